"""Benchmark: triage end to end.

    python bench/triage.py bundle [--scenario kv_cache_pressure] [--requests 5000]  # what-if on
    python bench/triage.py synthetic [--requests 1000000]           # analysis + diagnosis only

``bundle``: simulates a built-in scenario (every phase stretched in time, rates kept, so that
about ``--requests`` requests arrive; 5,000 by default), writes it as a real-format incident
bundle, then times reading the bundle (``load_capture``) and ``triage`` with the calibrated
what-if runs, wall and CPU seconds, against a reference measured in the same run: the same
triage with the simulator stepping one event per engine step
(``fastforward.one_event_per_step``; decode-only stretches as one event is what the what-if
replays do), ``--rounds`` of each interleaved.  The findings and predictions must be identical.
Target (issue 5): a 5,000-request bundle triaged in under 10 s including the what-if runs.

``synthetic``: a capture of N requests with 8 stages and engine/HPA series (the analyze
benchmark's shape), timed through analysis and diagnosis (no what-if).
Target (design 5): 1 M requests analyzed and diagnosed in under 10 s after ingest."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from builders import T0, capture_from_arrays
from tailtriage.model import make_table
from tailtriage.model import schema as S
from tailtriage.pipeline.triage import triage
from tailtriage.renderers.jsonrenderer import JSONRenderer
from tailtriage.simulator import fastforward, resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import ScenarioConfig
from tailtriage.store.input import load_capture


def _stretched(cfg: ScenarioConfig, requests: int) -> ScenarioConfig:
    """``cfg`` with every phase lengthened by one factor so that about ``requests`` arrive."""
    expected = 0.0
    for ph in cfg.workload:
        a = ph.arrivals
        end_rate = a.rate if a.rate_to < 0 else a.rate_to
        expected += ph.duration_s * (a.rate + end_rate) / 2
    if expected <= 0:
        return cfg
    k = requests / expected
    phases = tuple(dataclasses.replace(ph, duration_s=ph.duration_s * k) for ph in cfg.workload)
    return dataclasses.replace(cfg, workload=phases)


def bench_bundle(scenario: str, slo: str, requests: int, rounds: int) -> None:
    cfg = _stretched(resolve_scenario(scenario), requests)
    cap = simulate(cfg)
    print(f"load average {os.getloadavg()[0]:.1f} (other work inflates wall time)")
    with tempfile.TemporaryDirectory() as d:
        write_bundle(cap, d)
        t0 = time.perf_counter()
        bundle = load_capture(d)
        print(
            f"scenario {scenario}: {bundle.requests.num_rows} requests, "
            f"{bundle.series.num_rows} samples; load_capture {time.perf_counter() - t0:.2f} s"
        )
        # the reference, in the same run: the simulator stepping one event per engine step
        times: dict[str, list[tuple[float, float]]] = {"stepwise": [], "stretches": []}
        reports: dict[str, Any] = {}
        for r in range(rounds):
            for name in list(times)[:: 1 if r % 2 == 0 else -1]:  # alternate who goes first
                with contextlib.ExitStack() as stack:
                    if name == "stepwise":
                        stack.enter_context(fastforward.one_event_per_step())
                    w0, c0 = time.perf_counter(), time.process_time()
                    report = triage(bundle, slo, base=cfg)
                    times[name].append((time.perf_counter() - w0, time.process_time() - c0))
                reports[name] = report
    for name, runs in times.items():
        report = reports[name]
        section = report.sections.triage
        timings = section.timings if section is not None else {}
        print(
            f"triage ({name}): "
            + ", ".join(f"{w:.2f} s wall / {c:.2f} s CPU" for w, c in runs)
            + f" ({int(timings.get('whatif_runs', 0))} what-if runs)"
        )
    best = {name: min(c for _, c in runs) for name, runs in times.items()}
    print(f"ratio stretches / stepwise (best CPU): {best['stretches'] / best['stepwise']:.2f}")
    same = _predictions(reports["stretches"]) == _predictions(reports["stepwise"])
    print(f"findings and predictions identical: {same}")
    report = reports["stretches"]
    print(
        f"top finding: {report.findings[0].category if report.findings else '-'}; "
        f"top fix: {report.remediations[0].action if report.remediations else '-'}"
    )


def _predictions(report: Any) -> Any:
    doc = orjson.loads(JSONRenderer(indent=False).render(report))
    return doc.get("findings"), doc.get("remediations")


def bench_synthetic(n: int) -> None:
    rng = np.random.default_rng(0)
    arrival = np.sort(rng.uniform(T0, T0 + 3600.0, n))
    late = arrival >= T0 + 1800.0
    stages = {
        "ingress": 0.02 * rng.lognormal(0, 0.2, n),
        "gateway_queue": 0.005 * rng.lognormal(0, 0.5, n),
        "pending": np.where(late, 0.2 * rng.lognormal(0, 0.3, n), 0.0),
        "api_server": 0.004 * rng.lognormal(0, 0.2, n),
        "engine_queue": 0.03 * rng.lognormal(0, 0.5, n),
        "prefill": 0.2 * rng.lognormal(0, 0.3, n),
        "decode": 2.0 * rng.lognormal(0, 0.3, n),
        "unattributed": 0.001 * rng.lognormal(0, 0.3, n),
    }
    cap = capture_from_arrays(
        arrival,
        stages,
        replica=np.array([f"vllm-{i}" for i in range(8)])[rng.integers(0, 8, n)],
        prompt_tokens=rng.integers(50, 2000, n),
        output_tokens=rng.integers(10, 400, n),
    )
    times = T0 + np.arange(0.0, 3600.0, 15.0)
    rows = {"metric": [], "labels": [], "time": [], "value": []}
    for pod in range(8):
        for t in times:
            rows["metric"].append("vllm:num_requests_waiting")
            rows["labels"].append(f'{{"pod":"vllm-{pod}"}}')
            rows["time"].append(float(t))
            rows["value"].append(max(0.0, (t - T0 - 1800.0) / 60.0))
    cap = cap.replace(series=make_table(S.SERIES, rows))
    t0 = time.perf_counter()
    report = triage(cap, "p95 ttft < 400ms", whatif=False)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    section = report.sections.triage
    timings = section.timings if section is not None else {}
    print(
        f"{n} requests: analysis {timings['analyze_s']:.2f} s + diagnosis "
        f"{timings['diagnose_s']:.2f} s = {dt:.2f} s; peak RSS {peak:.0f} MiB; "
        f"top finding {report.findings[0].category if report.findings else '-'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["bundle", "synthetic"])
    ap.add_argument("--scenario", default="kv_cache_pressure")
    ap.add_argument("--slo", default="p95 ttft < 500ms")
    ap.add_argument(
        "--requests", type=int, default=None, help="bundle: 5,000; synthetic: 1,000,000"
    )
    ap.add_argument(
        "--rounds", type=int, default=2, help="bundle: triages of each kind, interleaved"
    )
    a = ap.parse_args()
    if a.mode == "bundle":
        bench_bundle(a.scenario, a.slo, a.requests or 5_000, a.rounds)
    else:
        bench_synthetic(a.requests or 1_000_000)


if __name__ == "__main__":
    main()
