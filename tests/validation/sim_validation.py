"""Replays used by the validation tests and by ``make_tables.py`` (docs/simulator-validation.md).

* :func:`replay_vllm_run`: a real vLLM run (DATA/vllm_runs/) read by tailtriage's own source,
  calibrated (engine flags from meta.json, everything else fitted) and replayed;
* :func:`canonical_example`: the worked example of design section 1, simulated, written as an
  incident bundle, read back, calibrated and asked about its two fixes, next to what the
  simulator itself does with those fixes (the ground truth)."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.slo import parse_slos
from tailtriage.model import Capture
from tailtriage.remediation.calibrate import calibrate
from tailtriage.remediation.whatif import Prediction, Replay, slo_values, step_capacity
from tailtriage.simulator.config import (
    EngineConfig,
    HpaConfig,
    PodsConfig,
    ScenarioConfig,
    StepTimeConfig,
    apply_overrides,
)
from tailtriage.store.input import load_capture

VLLM_SLOS = parse_slos(
    "p50 ttft < 1s, p90 ttft < 1s, p95 ttft < 1s, p99 ttft < 1s, "
    "p50 e2e < 1s, p95 e2e < 1s, p99 e2e < 1s, p50 tpot < 1s, p95 tpot < 1s"
)


def vllm_base(meta: Mapping[str, Any]) -> ScenarioConfig:
    """What the run's operator knows: its engine flags.  Data-parallel engines are modelled
    as one engine with dp x max_num_seqs (the requests do not say which engine served them)."""
    ek = meta["engine_kwargs"]
    dp = int(ek.get("data_parallel_size") or 1)
    kv = meta.get("kv_cache") or {}
    return ScenarioConfig(
        # model and GPU are not in the simulator's tables: the step time is fitted, not a roofline
        step_time=StepTimeConfig(mode="fitted"),
        engine=EngineConfig(
            max_num_batched_tokens=int(ek["max_num_batched_tokens"]),
            max_num_seqs=int(ek["max_num_seqs"]) * dp,
            num_gpu_blocks=int(kv.get("num_gpu_blocks") or 0),
            # the replayed workload carries no shared prefixes; what prefix caching still does
            # is keep a preempted request's freed blocks for its resume (vLLM V1's default)
            prefix_caching=bool(kv.get("enable_prefix_caching", True)),
        ),
        hpa=HpaConfig(enabled=False),
        pods=PodsConfig(initial_replicas=1),
    )


def replay_vllm_run(
    run_dir: Path, meta: Mapping[str, Any], *, fit_fraction: float = 1.0, seed: int = 0
) -> Prediction:
    """Calibrate on the run (the step-time fit on its first ``fit_fraction`` of requests only,
    for a held-out check) and replay every request; the prediction with no change is the
    calibrated baseline."""
    capture = load_capture(run_dir)
    base = vllm_base(meta)
    cal = calibrate(capture, base)
    if fit_fraction < 1.0:
        head = capture.requests.sort_by("arrival")
        keep = head.slice(0, int(head.num_rows * fit_fraction))["request_id"]
        import pyarrow.compute as pc

        part = capture.replace(
            requests=capture.requests.filter(pc.is_in(capture.requests["request_id"], keep)),
            stages=capture.stages.filter(pc.is_in(capture.stages["request_id"], keep)),
        )
        held = calibrate(part, base)
        cal = dataclasses.replace(
            cal, config=dataclasses.replace(cal.config, step_time=held.config.step_time)
        )
    with Replay(capture, VLLM_SLOS, calibration=cal, seed=seed) as rep:
        return rep.predict({})


# -- the canonical example -------------------------------------------------------------------
CANONICAL_SLOS = parse_slos("p95 ttft < 500ms")
FIXES: dict[str, dict[str, Any]] = {
    "HPA on vllm:num_requests_waiting": {
        "hpa.metric": "vllm:num_requests_waiting",
        "hpa.target": 0.3,
    },
    "max_num_batched_tokens 128": {"engine.max_num_batched_tokens": 128},
}
FIXES["both"] = {**FIXES["HPA on vllm:num_requests_waiting"], **FIXES["max_num_batched_tokens 128"]}


@dataclass(frozen=True)
class FixResult:
    name: str
    overrides: Mapping[str, Any]
    truth_s: float | None  # the simulator run with the fix (ground truth)
    truth_stages: Mapping[str, float]  # p95-band stage means of the ground truth
    truth_throughput_change_pct: float
    prediction: Prediction  # calibrated on the bundle, replayed with the fix


def _stage_p95_band(capture: Capture) -> dict[str, float]:
    """Mean stage seconds of the requests whose TTFT lies in the 94-96th percentile band."""
    import numpy as np

    rq = capture.requests.filter(capture.requests["status"].to_numpy(zero_copy_only=False) == "ok")
    ttft = rq["ttft"].to_numpy(zero_copy_only=False).astype(float)
    lo, hi = np.percentile(ttft, [94, 96])
    band = set(np.asarray(rq["request_id"].to_pylist(), dtype=object)[(ttft >= lo) & (ttft <= hi)])
    sums: dict[str, float] = {}
    for rid, stage, dur in zip(
        capture.stages["request_id"].to_pylist(),
        capture.stages["stage"].to_pylist(),
        capture.stages["duration"].to_pylist(),
        strict=True,
    ):
        if rid in band:
            sums[stage] = sums.get(stage, 0.0) + dur
    return {k: v / max(len(band), 1) for k, v in sums.items()}


def canonical_example(
    scenario: ScenarioConfig, seed: int, slos: Sequence[SloSpec] = CANONICAL_SLOS
) -> tuple[Capture, Capture, Replay, list[FixResult]]:
    """(simulated capture, capture read back from its bundle, replay, results per fix).

    The replay is calibrated on the bundle with the deployment's own settings as the base
    (engine flags, HPA spec, model and GPU: what the operator knows); the workload, step time,
    stage latencies and pod start-up are fitted from the bundle."""
    from tailtriage.simulator.bundle import write_bundle
    from tailtriage.simulator.simulation import run

    sim = run(scenario, seed=seed).capture
    with tempfile.TemporaryDirectory() as d:
        write_bundle(sim, d)
        observed = load_capture(d)
    replay = Replay(observed, slos, base=scenario, seed=seed)
    wl = replay.calibration.workload
    base_cap = step_capacity(scenario, wl)
    results = []
    for name, overrides in FIXES.items():
        truth_cfg = apply_overrides(scenario, overrides)
        truth = run(truth_cfg, seed=seed).capture
        results.append(
            FixResult(
                name=name,
                overrides=overrides,
                truth_s=slo_values(truth, slos)[0][0],
                truth_stages=_stage_p95_band(truth),
                truth_throughput_change_pct=(step_capacity(truth_cfg, wl) - base_cap)
                / base_cap
                * 100.0,
                prediction=replay.predict(overrides),
            )
        )
    return sim, observed, replay, results
