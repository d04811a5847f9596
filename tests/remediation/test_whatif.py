"""What-if: the calibrated baseline reproduces the capture, and predictions track what the
stack really does under the change (the simulator's own ground truth, re-run with it)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tailtriage.analyses.slo import parse_slos
from tailtriage.errors import ConfigError
from tailtriage.model import Capture
from tailtriage.remediation.whatif import (
    MODEL_TOLERANCE_PCT,
    Replay,
    SloPrediction,
    observed_slos,
    slo_values,
    throughput,
    whatif,
)
from tailtriage.simulator import parallel
from tailtriage.simulator.config import (
    Arrivals,
    Dist,
    GpuConfig,
    HpaConfig,
    Phase,
    PodsConfig,
    ScenarioConfig,
    apply_overrides,
)
from tailtriage.simulator.simulation import run

SLOS = parse_slos("p95 ttft < 500ms, p50 ttft < 200ms, p95 e2e < 5s, p95 tpot < 50ms")
SEED = 3


def scenario() -> ScenarioConfig:
    """A stack that falls behind, scales up and catches up: queueing, pending and batching
    all matter, so a wrong model shows."""
    out = Dist("lognormal", median=60, sigma=0.5)
    return ScenarioConfig(
        gpu=GpuConfig(type="L40S"),
        hpa=HpaConfig(
            metric="vllm:num_requests_waiting",
            target=2,
            min_replicas=1,
            max_replicas=4,
            scrape_lag_s=5,
        ),
        pods=PodsConfig(initial_replicas=1, warmup_s=8, load_gb_s=100),
        workload=(
            Phase(duration_s=30, arrivals=Arrivals(rate=4.0), output_tokens=out),
            Phase(name="incident", duration_s=60, arrivals=Arrivals(rate=30.0), output_tokens=out),
        ),
    )


@pytest.fixture(scope="module")
def observed() -> Capture:
    return run(scenario(), seed=SEED).capture


@pytest.fixture(scope="module")
def replay(observed: Capture) -> Any:
    # the deployment's settings (engine flags, HPA spec, GPU) are what an SRE knows; the
    # workload, step time, stage latencies and start-up times are all fitted
    with Replay(observed, SLOS, base=scenario(), seed=0) as r:
        yield r


def test_the_calibration_is_scored_on_the_slos_too(replay: Replay) -> None:
    # every step-model candidate was compared on each SLO's own percentile as well
    part = replay.calibration.fit.parts["step_time"]
    for candidate in part["candidates"].values():
        keys = set(candidate["replay_error_pct"])
        assert {"slo:ttft_p95", "slo:ttft_p50", "slo:e2e_p95", "slo:tpot_p95"} <= keys


def test_no_change_predicts_the_baseline(replay: Replay) -> None:
    pred = replay.predict({})
    for s in pred.slos:
        assert s.predicted == s.baseline
        assert s.change_pct == 0.0
    assert pred.throughput_change_pct == 0.0


def test_calibrated_baseline_reproduces_the_capture(replay: Replay) -> None:
    pred = replay.predict({})
    for s in pred.slos:
        assert s.observed is not None and s.baseline is not None
        assert abs(s.model_error_pct or 0.0) < 15.0, (str(s.spec), s.observed, s.baseline)
    assert pred.baseline.capacity_tps == pytest.approx(pred.observed.capacity_tps, rel=0.15)


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        {"engine.max_num_seqs": 64},
        {"hpa.min_replicas": 3, "pods.initial_replicas": 3},
    ],
)
def test_predictions_track_the_truth(
    replay: Replay, observed: Capture, overrides: dict[str, Any]
) -> None:
    truth = run(apply_overrides(scenario(), overrides), seed=SEED).capture
    want = [v for v, _ in slo_values(truth, SLOS)]
    pred = replay.predict(overrides)
    for s, w in zip(pred.slos, want, strict=True):
        assert w is not None and s.predicted is not None
        # the direction of the change is right ...
        if abs(w - (s.observed or 0.0)) > 0.2 * w:
            assert (s.predicted - (s.baseline or 0.0)) * (w - (s.observed or 0.0)) > 0, str(s.spec)
        # ... and so is its size, within the model's error
        assert s.predicted == pytest.approx(w, rel=0.3), (str(s.spec), overrides)


def test_more_replicas_from_the_start_cut_the_tail(replay: Replay) -> None:
    pred = replay.predict({"hpa.min_replicas": 4, "pods.initial_replicas": 4})
    ttft95 = pred.slos[0]
    assert ttft95.predicted is not None and ttft95.baseline is not None
    assert ttft95.predicted < 0.5 * ttft95.baseline
    # the same requests are served either way: no throughput is lost by adding capacity
    assert pred.predicted.requests == pred.baseline.requests


def test_same_seed_same_prediction(observed: Capture) -> None:
    a = whatif(observed, SLOS[:1], {"engine.max_num_batched_tokens": 1024}, base=scenario())
    b = whatif(observed, SLOS[:1], {"engine.max_num_batched_tokens": 1024}, base=scenario())
    assert a.to_dict() == b.to_dict()


def test_prediction_forms(replay: Replay) -> None:
    pred = replay.predict({"engine.max_num_seqs": 64})
    f = pred.forecast()
    values = set(f.predicted())
    assert values == {"ttft_p95", "ttft_p50", "e2e_p95", "tpot_p95", "throughput_change_pct"}
    assert f.slos["ttft_p95"].value == pred.slos[0].predicted
    # beside each value, the facts a planner needs to judge it: the model's own error ...
    facts = f.facts("ttft_p95")
    assert facts is not None
    assert facts.model_error_pct == pred.slos[0].model_error_pct
    assert facts.observed == pred.slos[0].observed
    assert not facts.anchored
    anchored = pred.forecast(corrected=True)
    assert (a := anchored.facts("ttft_p95")) is not None and a.anchored
    corrected = anchored.slos["ttft_p95"].value
    s = pred.slos[0]
    assert corrected == pytest.approx(s.predicted * s.observed / s.baseline)  # type: ignore[operator]
    d = pred.to_dict()
    row = d["slos"][0]
    assert row["threshold_ms"] == 500.0 and row["metric"] == "ttft" and row["percentile"] == 95.0
    assert row["predicted_ms"] == pytest.approx(s.predicted * 1000, abs=1e-3)  # type: ignore[operator]
    assert set(d["throughput"]) == {"observed", "baseline", "predicted"}
    ci = row["observed_ci_ms"]
    inside = ci is not None and ci[0] <= row["baseline_ms"] <= ci[1]
    assert row["low_confidence"] is (
        abs(row["model_error_pct"]) > MODEL_TOLERANCE_PCT and not inside
    )
    json.dumps(d)  # JSON-ready


def test_throughput_counts_busy_replica_time() -> None:
    from builders import T0, make_capture, make_request

    cap = make_capture(
        [
            make_request("a1", T0, {"prefill": 1.0, "decode": 3.0}, replica="a", output_tokens=10),
            make_request(
                "a2", T0 + 1, {"prefill": 1.0, "decode": 2.0}, replica="a", output_tokens=10
            ),
            make_request(
                "b1", T0 + 10, {"prefill": 1.0, "decode": 1.0}, replica="b", output_tokens=6
            ),
            make_request("b2", T0 + 5, {"prefill": 0.5}, replica="b", status="error"),
        ]
    )
    tp = throughput(cap)
    # replica a is busy [0, 4) with two overlapping requests, b [10, 12): 6 s for 26 tokens;
    # the failed request neither counts as served nor as busy time
    assert tp.capacity_tps == pytest.approx(26 / 6.0)
    assert tp.requests == 3
    assert tp.served_rps == pytest.approx(3 / 12.0)


def test_prefetched_runs_predict_what_runs_one_by_one_do(
    replay: Replay, observed: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate fixes replayed together in two worker processes predict exactly what
    they predict replayed one after another; a change that does not apply is left to
    ``predict``, which still says why."""
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: {0, 1})
    changes: list[dict[str, Any]] = [
        {"engine.max_num_batched_tokens": 1024},
        {"hpa.min_replicas": 2, "pods.initial_replicas": 2},
        {"engine.no_such_flag": 1},
    ]
    cal = replay.calibration
    with Replay(observed, SLOS, calibration=cal, seed=0) as together:
        together.prefetch(changes)
        assert len(together._runs) == 3  # the baseline and the two that apply, all run
        with pytest.raises(ConfigError):
            together.predict(changes[2])
        got = [together.predict(c).to_dict() for c in changes[:2]]
    with Replay(observed, SLOS, calibration=cal, seed=0) as alone:
        want = [alone.predict(c).to_dict() for c in changes[:2]]
    assert got == want
    assert got[0]["slos"] != got[1]["slos"]


def test_unknown_override_is_a_config_error(replay: Replay) -> None:
    with pytest.raises(ConfigError):
        replay.predict({"engine.no_such_flag": 1})


# -- the command line ------------------------------------------------------------------------
def test_parse_set_types_values() -> None:
    from tailtriage.cli.cmd_whatif import parse_set

    got = parse_set(
        [
            "engine.max_num_batched_tokens=128",
            "hpa.metric=vllm:num_requests_waiting",
            "x.y=0.5",
            "b=true",
        ]
    )
    assert got == {
        "engine.max_num_batched_tokens": 128,
        "hpa.metric": "vllm:num_requests_waiting",
        "x.y": 0.5,
        "b": True,
    }
    with pytest.raises(ConfigError):
        parse_set(["no-equals-sign"])


def test_cli_whatif_writes_json(tmp_path: Path, observed: Capture) -> None:
    from tailtriage.cli import cmd_whatif  # noqa: F401  (registers the command)
    from tailtriage.cli._app import app

    saved = observed.save(tmp_path / "capture.duckdb")
    out = tmp_path / "whatif.json"
    result = CliRunner().invoke(
        app,
        [
            "whatif",
            str(saved),
            "--slo",
            "p95 ttft < 500ms",
            "--set",
            "hpa.min_replicas=3",
            "--set",
            "pods.initial_replicas=3",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "observed" in result.output and "predicted" in result.output
    doc = json.loads(out.read_text())
    assert doc["overrides"] == {"hpa.min_replicas": 3, "pods.initial_replicas": 3}
    (row,) = doc["slos"]
    assert row["observed_ms"] > 0 and row["predicted_ms"] > 0
    assert not math.isnan(doc["throughput_change_pct"])


def test_window_selects_the_same_requests_in_every_run(observed: Capture, replay: Replay) -> None:
    start = observed.time_range[0]  # type: ignore[index]
    healthy = (start, start + 30.0)  # the quiet phase, before the burst
    with Replay(observed, SLOS[:1], base=scenario(), window=healthy) as quiet:
        q = quiet.predict({}).slos[0]
    whole = replay.predict({}).slos[0]
    assert q.observed is not None and whole.observed is not None and q.baseline is not None
    assert q.observed < 0.5 * whole.observed  # the window really narrowed the requests
    assert q.baseline == pytest.approx(q.observed, rel=0.25)  # and did so in the replay too


def test_window_replays_stop_early_and_predict_what_whole_runs_do(
    observed: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = observed.time_range[0]  # type: ignore[index]
    window = (start + 20.0, start + 45.0)  # the burst's first half: later arrivals are cut
    change = {"hpa.min_replicas": 2}

    def predicted(r: Replay) -> tuple[Any, ...]:
        p = r.predict(change)
        return tuple((s.baseline, s.predicted) for s in p.slos)

    with Replay(observed, SLOS, base=scenario(), window=window) as stopped:
        fast = predicted(stopped)
        run_fast = stopped.run(change)
    with monkeypatch.context() as m:
        m.setattr("tailtriage.remediation.whatif._stopped", lambda config, window: config)
        with Replay(observed, SLOS, base=scenario(), window=window) as whole:
            slow = predicted(whole)
            run_slow = whole.run(change)
    assert fast == slow
    # the stopped run did end sooner: the requests after the window were never finished
    assert run_fast.requests.num_rows == run_slow.requests.num_rows
    timeouts = run_fast.requests["status"].to_pylist().count("timeout")
    assert timeouts > run_slow.requests["status"].to_pylist().count("timeout")


def _ttft_capture(n: int) -> Capture:
    """``n`` requests whose TTFTs are 10, 20, ... ms apart: the p95 is known exactly."""
    from builders import T0, make_capture, make_request

    reqs = [
        make_request(arrival=T0 + i, stages={"engine_queue": 0.0, "prefill": 0.01 * (i + 1)})
        for i in range(n)
    ]
    return make_capture(reqs)


def test_the_observed_interval_narrows_as_more_requests_are_measured() -> None:
    (spec,) = parse_slos("p95 ttft < 500ms")
    widths = []
    for n in (60, 2000):
        cap = _ttft_capture(n)
        ((_, _, ci),) = observed_slos(cap, [spec])
        ((p95, _),) = slo_values(cap, [spec])
        assert ci is not None and p95 is not None
        assert ci[0] <= p95 <= ci[1]
        widths.append((ci[1] - ci[0]) / p95)
    assert widths[0] > 5 * widths[1], widths
    ((_, _, none),) = observed_slos(_ttft_capture(8), [spec])  # 8 requests bound no p95 from above
    assert none is None


def test_a_replay_inside_the_observed_interval_is_not_low_confidence() -> None:
    (spec,) = parse_slos("p95 ttft < 500ms")
    err = 1.0 + 2 * MODEL_TOLERANCE_PCT / 100  # far beyond the tolerance
    inside = SloPrediction(spec, 1.0, err, 1.0, observed_ci=(0.7, err + 0.1))
    outside = SloPrediction(spec, 1.0, err, 1.0, observed_ci=(0.9, 1.1))
    unknown = SloPrediction(spec, 1.0, err, 1.0)
    assert inside.within_tolerance
    assert not outside.within_tolerance and not unknown.within_tolerance
    close = SloPrediction(spec, 1.0, 1.0 + MODEL_TOLERANCE_PCT / 200, 1.0, observed_ci=(0.99, 1.01))
    assert close.within_tolerance  # the tolerance holds whatever the interval
    # the plan says which of the two holds: only the interval's is worth a caveat
    assert inside.by_interval and not close.by_interval and not outside.by_interval
