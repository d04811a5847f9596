"""Sampled traces: the full-rate workload is rebuilt from the request counters, so the
calibrated replay carries the load the stack really had, not the traced share of it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tailtriage.analyses.slo import parse_slos
from tailtriage.model import Capture
from tailtriage.remediation.calibrate.sampling import estimate_sampling
from tailtriage.remediation.whatif import Replay
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import apply_overrides
from tailtriage.store.input import load_capture

#: the calibrated baseline of a sampled capture against the full bundle's observed p95
WITHIN_PCT = 15.0


def _sampled(capture: Capture, keep: float, seed: int = 1) -> Capture:
    """Whole traces dropped at random: each request (and all its stages) kept with ``keep``."""
    ids = capture.requests["request_id"].to_pylist()
    rng = np.random.default_rng(seed)
    kept = pa.array([i for i in ids if rng.random() < keep])
    return capture.replace(
        requests=capture.requests.filter(pc.is_in(capture.requests["request_id"], kept)),
        stages=capture.stages.filter(pc.is_in(capture.stages["request_id"], kept)),
    )


@pytest.fixture(scope="module")
def saturated(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    """compute_saturation, shortened: two replicas near capacity, where load is everything."""
    cfg = apply_overrides(
        resolve_scenario("compute_saturation"),
        {"workload.0.duration_s": 90, "workload.1.duration_s": 180},
    )
    out = tmp_path_factory.mktemp("saturated")
    write_bundle(simulate(cfg), out)
    return load_capture(out)


@pytest.mark.slow
@pytest.mark.parametrize("keep", [0.5, 0.08])
def test_the_sampling_ratio_is_read_from_the_counters(saturated: Capture, keep: float) -> None:
    est = estimate_sampling(_sampled(saturated, keep))
    assert est is not None and est.counter == "vllm:request_success_total"
    assert est.ratio == pytest.approx(keep, rel=0.1)
    assert est.sampled
    full = estimate_sampling(saturated)
    assert full is not None and not full.sampled


@pytest.mark.slow
def test_a_capture_with_eight_percent_of_its_traces_replays_the_full_load(
    saturated: Capture,
) -> None:
    """The median TTFT and the tail of e2e: at this stack's saturation its p95 TTFT is
    chaotic (replays of the rebuilt load with seeds 0-2 land anywhere in 0.12-0.83 s against
    the 0.12 s observed, whichever way the load is rebuilt), a test of the simulator's
    knife-edge rather than of the load the sampled traces are rebuilt to."""
    slos = parse_slos("p50 ttft < 1s, p95 e2e < 20s")
    # the full bundle's observed percentiles (the replay is not run: only its observed values)
    truth = {
        s.metric: float(
            np.nanpercentile(
                saturated.requests[s.metric].to_numpy(zero_copy_only=False).astype(float),
                s.percentile,
            )
        )
        for s in slos
    }
    with Replay(_sampled(saturated, 0.08), slos, seed=0) as rep:
        pred = rep.predict({})
        sampling = rep.calibration.fit.parts["sampling"]
        assert sampling["rebuilt_requests"] > 10 * sampling["traced"]
        assert any("traces sampled" in w for w in rep.calibration.fit.warnings)
    for s in pred.slos:
        want = truth[s.spec.metric]
        assert s.baseline is not None and want is not None
        assert abs(s.baseline - want) / want * 100 <= WITHIN_PCT, (str(s.spec), s.baseline, want)


def _first_requests(capture: Capture, share: float) -> Capture:
    """``capture`` with only its first ``share`` of requests (by arrival) left, every series
    kept: a capture that misses requests no counter reveals."""
    head = capture.requests.sort_by("arrival")
    keep = head.slice(0, int(head.num_rows * share))["request_id"]
    return capture.replace(
        requests=capture.requests.filter(pc.is_in(capture.requests["request_id"], keep)),
        stages=capture.stages.filter(pc.is_in(capture.stages["request_id"], keep)),
    )


def test_untraced_sequences_are_read_from_the_engine_gauges() -> None:
    """A real vLLM run (two data-parallel engines, up to 256 sequences) cut to its first 150
    requests: the traces show ~60 % of the sequences the running gauge counted, so the batch
    each request decoded beside and the prompt tokens prefilled meanwhile come from the
    engine's gauge and counter - and agree with what the complete capture shows."""
    from support import DATA
    from tailtriage.remediation.calibrate.sampling import traced_batch_share, with_engine_batch
    from tailtriage.remediation.calibrate.steps import engine_timings, step_features

    whole = load_capture(DATA / "vllm_runs" / "RTXPRO6000_Qwen3-30B-A3B-Instruct-2507")
    full = engine_timings(whole)
    full_share = traced_batch_share(full, whole)
    assert full_share is not None and full_share > 0.9  # complete traces: no correction
    part = _first_requests(whole, 0.5)
    timings = engine_timings(part)
    share = traced_batch_share(timings, part)
    assert share is not None and share < 0.8
    cut = step_features(timings)
    gauged = step_features(with_engine_batch(timings, part, share))
    truth = step_features(full)
    n = cut.tpot.size
    # the same requests (arrival order) in the complete capture
    assert np.allclose(gauged.tpot, truth.tpot[:n])
    err = lambda a, b: float(np.median(np.abs(a / b - 1.0)))  # noqa: E731
    assert err(gauged.decode_seqs, truth.decode_seqs[:n]) < 0.05
    assert err(gauged.prefill_per_step, truth.prefill_per_step[:n]) < 0.1
    # ... where the cut traces alone under-count both
    assert err(cut.decode_seqs, truth.decode_seqs[:n]) > 2 * err(
        gauged.decode_seqs, truth.decode_seqs[:n]
    )


def test_an_overloaded_stack_is_rebuilt_at_its_arrival_rate_not_its_completion_rate() -> None:
    """Arrivals ramp past what two replicas serve: the queue grows, the success counter
    counts completions capped at the stack's capacity, and requests still queued when the
    capture ends are never counted.  Rebuilt from 10 % of the traces, the arrivals per
    30 s must follow the true ones into the overload, and the total include the uncounted
    ones (the load of the realistic corpus' scaling_lag+cold_start replayed at half)."""
    from tailtriage.remediation.calibrate.sampling import incident_workload

    cfg = apply_overrides(
        resolve_scenario("compute_saturation"),
        {
            "workload.0.duration_s": 30,
            "workload.1.duration_s": 90,
            "workload.0.arrivals.rate": 20,
            "workload.1.arrivals.rate": 20,
            "workload.1.arrivals.rate_to": 90,
        },
    )
    full = simulate(cfg)
    e2e = full.requests["e2e"].to_numpy(zero_copy_only=False).astype(float)
    assert np.nanpercentile(e2e, 95) > 5.0, "the stand-in must queue for seconds"
    workload, t0, part = incident_workload(_sampled(full, 0.1))
    assert part["rebuilt"]
    truth = np.sort(full.requests["arrival"].to_numpy(zero_copy_only=False)) - t0
    edges = np.arange(0.0, float(truth.max()) + 30.0, 30.0)
    want = np.histogram(truth, edges)[0]
    got = np.histogram(workload.arrival, edges)[0]
    assert want[-1] > 2 * want[0]  # the ramp: the last 30 s carry more than twice the first
    assert np.all(np.abs(got / want - 1.0) < 0.1), (got, want)
    assert abs(len(workload) / truth.size - 1.0) < 0.05
