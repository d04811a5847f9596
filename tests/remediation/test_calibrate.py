"""Calibration: the step-time fit recovers known coefficients; integrals are exact; real runs fit."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import DATA
from tailtriage.remediation.calibrate.steps import (
    EngineTimings,
    _Piecewise,
    fit_step_time,
    single_steps,
    step_features,
)
from tailtriage.simulator.batching import BatchLimits, ContinuousBatcher
from tailtriage.simulator.batching import Sequence as Seq
from tailtriage.simulator.steptime import FittedStepTime, StepTimeModel

# -- exact integrals -----------------------------------------------------------------------
intervals = st.lists(
    st.tuples(
        st.floats(0, 100, allow_nan=False),
        st.floats(0.001, 50, allow_nan=False),
        st.floats(-5, 5, allow_nan=False),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(intervals, st.floats(0, 120), st.floats(0.01, 60), st.booleans())
def test_piecewise_integral_matches_brute_force(
    ivs: list[tuple[float, float, float]], x: float, width: float, linear: bool
) -> None:
    a = np.array([i[0] for i in ivs])
    b = a + np.array([i[1] for i in ivs])
    w = np.array([i[2] for i in ivs])
    got = _Piecewise(a, b, w, linear=linear).integral(np.array([x]), np.array([x + width]))[0]
    # brute force: the integral of each indicator (times t) over the overlap, summed
    want = 0.0
    for aj, bj, wj in zip(a, b, w, strict=True):
        lo, hi = max(aj, x), min(bj, x + width)
        if hi > lo:
            want += wj * ((hi**2 - lo**2) / 2 if linear else hi - lo)
    assert got == pytest.approx(want, rel=1e-7, abs=1e-7)


# -- a single-replica engine driven by the simulator's own batcher -------------------------
def run_engine(
    model: StepTimeModel, n: int, rate: float, seed: int, limits: BatchLimits | None = None
) -> EngineTimings:
    """Drive ContinuousBatcher with ``model`` over Poisson arrivals; return the timings."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    prompts = rng.integers(50, 1500, n)
    outputs = rng.integers(20, 400, n)
    batcher = ContinuousBatcher(
        limits or BatchLimits(max_num_batched_tokens=1024), kv_blocks=50_000
    )
    seqs = [Seq(f"r{i}", int(prompts[i]), int(outputs[i])) for i in range(n)]
    now, nxt, done = 0.0, 0, 0
    while done < n:
        while nxt < n and arrivals[nxt] <= now:
            batcher.add(seqs[nxt], float(arrivals[nxt]))
            nxt += 1
        plan = batcher.schedule(now)
        if plan is None:
            now = float(arrivals[nxt])
            continue
        dt = model.step_time(plan.prefill_tokens, plan.decode_seqs, plan.context_tokens)
        now += dt
        done += len(batcher.complete(plan, now).finished)
    get = lambda attr: np.array([getattr(s, attr) for s in seqs], dtype=np.float64)  # noqa: E731
    return EngineTimings(
        t0=0.0,
        replica=np.zeros(n, dtype=np.int64),
        arrival=arrivals,
        queued=get("engine_arrival"),
        scheduled=get("first_scheduled"),
        first_token=get("first_token_time"),
        finish=get("finish_time"),
        prompt=prompts.astype(np.float64),
        output=outputs.astype(np.float64),
    )


def test_fit_recovers_the_coefficients_that_made_the_data() -> None:
    truth = FittedStepTime(c0=0.008, prefill=6e-5, decode=1.5e-4, context=2e-7, batch=0.0)
    timings = run_engine(truth, n=600, rate=6.0, seed=7)
    for single, rel in ((False, 0.15), (True, 0.1)):
        fit = fit_step_time(timings, 1024, single=single)
        assert fit.mape < 0.1
        # the fitted model predicts the step times of batches the data never showed exactly
        for prefill, seqs, ctx in [(0, 8, 4000), (512, 32, 20000), (1024, 64, 60000), (0, 1, 300)]:
            want = truth.step_time(prefill, seqs, ctx)
            got = fit.model.step_time(prefill, seqs, ctx)
            assert got == pytest.approx(want, rel=rel), (single, prefill, seqs, ctx)


def test_single_steps_are_the_steps_the_engine_ran() -> None:
    # every single-step row lies on the model that generated the data (up to the estimate of
    # the prefill tokens in flight, which the budget caps)
    truth = FittedStepTime(c0=0.01, prefill=1e-4, decode=2e-4, context=0.0, batch=0.0)
    steps = single_steps(run_engine(truth, n=300, rate=4.0, seed=11), budget=1024)
    assert steps.tpot.size > 50
    model = truth.c0 + truth.decode * steps.decode_seqs + truth.prefill * steps.prefill_per_step
    assert np.median(np.abs(model - steps.tpot) / steps.tpot) < 0.05


def test_features_see_the_batch() -> None:
    # two requests decoding side by side on one replica, a third alone afterwards
    t = EngineTimings(
        t0=0.0,
        replica=np.zeros(3, dtype=np.int64),
        arrival=np.array([0.0, 0.0, 20.0]),
        queued=np.array([0.0, 0.0, 20.0]),
        scheduled=np.array([0.0, 0.0, 20.0]),
        first_token=np.array([1.0, 1.0, 21.0]),
        finish=np.array([11.0, 11.0, 31.0]),
        prompt=np.array([100.0, 300.0, 100.0]),
        output=np.array([11.0, 11.0, 11.0]),
    )
    f = step_features(t)
    assert f.tpot == pytest.approx([1.0, 1.0, 1.0])
    assert f.decode_seqs == pytest.approx([2.0, 2.0, 1.0])
    # context grows linearly from prompt to prompt + output: mean = prompt + output / 2
    assert f.context == pytest.approx([400 + 11.0, 400 + 11.0, 100 + 5.5])
    assert f.prefill_per_step == pytest.approx([0.0, 0.0, 0.0])


def _vllm_run(name: str) -> EngineTimings:
    rows = [json.loads(line) for line in (DATA / "vllm_runs" / name / "requests.jsonl").open()]
    col = lambda k: np.array([r[k] for r in rows], dtype=np.float64)  # noqa: E731
    q = col("queued_ts")  # engine-core monotonic clock: never mix with arrival_time
    t0 = float(q.min())
    return EngineTimings(
        t0=t0,
        replica=np.zeros(len(rows), dtype=np.int64),
        arrival=q - t0,
        queued=q - t0,
        scheduled=col("scheduled_ts") - t0,
        first_token=col("first_token_ts") - t0,
        finish=col("last_token_ts") - t0,
        prompt=col("input_toks"),
        output=col("output_toks"),
    )


def test_real_vllm_run_fits_a_linear_step_model() -> None:
    fit = fit_step_time(_vllm_run("RTXPRO6000_Llama-3.1-8B"), 2048, single=False)
    assert fit.n == 300
    assert fit.r2 > 0.9 and fit.mape < 0.05
    m = fit.model
    # a decode step of an 8B bf16 model on a ~1.6 TB/s GPU reads 16 GB of weights: >= 10 ms
    assert 0.005 < m.step_time(0, 1, 1000) < 0.03
    # and a 128-sequence batch costs more than a 1-sequence one
    assert m.step_time(0, 128, 128 * 1500) > m.step_time(0, 1, 1500)


def test_roofline_efficiencies_are_recovered() -> None:
    from tailtriage.remediation.calibrate.steps import fit_roofline
    from tailtriage.simulator.steptime import GPUS, MODELS, RooflineStepTime

    truth = RooflineStepTime(
        MODELS["llama-3.1-8b"], GPUS["L40S"], mfu=0.45, mbu=0.7, overhead_s=0.003
    )
    timings = run_engine(
        truth, n=500, rate=5.0, seed=5, limits=BatchLimits(max_num_batched_tokens=512)
    )
    guess = RooflineStepTime(MODELS["llama-3.1-8b"], GPUS["L40S"])  # the defaults: 0.6 / 0.8 / 2 ms
    fit = fit_roofline(timings, guess, budget=512)
    assert fit.mfu == pytest.approx(0.45, rel=0.1)
    assert fit.mbu == pytest.approx(0.7, rel=0.1)
    assert fit.overhead_s == pytest.approx(0.003, abs=0.0015)


def test_edge_latency_with_tls_handshakes_is_two_populations() -> None:
    from tailtriage.remediation.calibrate.parts import fit_ingress

    rng = np.random.default_rng(3)
    n = 4000
    base = 0.005 * np.exp(0.2 * rng.standard_normal(n))
    new_conn = rng.random(n) < 0.2  # 80 % of requests reuse a connection
    samples = base + new_conn * 0.060
    dist, tls_ms, reuse, part = fit_ingress(samples)
    assert reuse == pytest.approx(0.8, abs=0.02)
    assert tls_ms == pytest.approx(60.0, rel=0.1)
    assert dist.median == pytest.approx(5.0, rel=0.1)
    assert (
        part["two_populations"]["quantile_error"] < part["two_populations"]["single_quantile_error"]
    )
    # one population stays one lognormal
    dist1, tls1, reuse1, _ = fit_ingress(base)
    assert (tls1, reuse1) == (0.0, 1.0) and dist1.median == pytest.approx(5.0, rel=0.05)


def test_pending_pods_that_waited_for_a_node_set_node_provisioning() -> None:
    from builders import T0, make_capture, make_request
    from tailtriage.model import make_table
    from tailtriage.model import schema as S
    from tailtriage.remediation.calibrate.parts import fit_pods
    from tailtriage.simulator.config import PodsConfig

    cap = make_capture([make_request("r", T0)])
    durations = [2.0, 3.0, 2.0, 185.0, 182.0]
    events = make_table(
        S.EVENTS,
        {
            "time": [T0 + 10 * i for i in range(5)],
            "kind": ["pod_pending"] * 5,
            "duration": durations,
        },
    )
    pods, part = fit_pods(cap.replace(events=events), PodsConfig())
    assert pods.scheduling_delay_s == 2.0
    assert pods.node_provision_s == pytest.approx(183.5 - 2.0)
    assert part["pending_n"] == 5


def test_pods_started_before_the_capture_time_the_next_start_up() -> None:
    """No pod became Ready during the capture (the ones the autoscaler added were deleted
    before ``kubectl get pods`` listed them): the deployment's pods started an hour earlier
    took 52 s, which stands for the next start-up instead of the simulator's default; a
    start-up during the capture still wins over them."""
    from builders import T0, make_capture, make_request
    from tailtriage.model import make_table
    from tailtriage.model import schema as S
    from tailtriage.remediation.calibrate.parts import fit_pods
    from tailtriage.simulator.config import PodsConfig

    cap = make_capture([make_request("r", T0), make_request("s", T0 + 300.0)])

    def cold(times: list[float], durations: list[float]) -> tuple[PodsConfig, dict[str, Any]]:
        events = make_table(
            S.EVENTS, {"time": times, "kind": ["cold_start"] * len(times), "duration": durations}
        )
        return fit_pods(cap.replace(events=events), PodsConfig())

    pods, part = cold([T0 - 3600.0, T0 - 3500.0], [52.0, 52.0])
    assert part["cold_start_from"] == "pods started earlier"
    assert part["cold_start_median_s"] == 52.0
    default = PodsConfig()
    assert pods.warmup_s + pods.image_pull_s < default.warmup_s + default.image_pull_s
    _, part = cold([T0 - 3600.0, T0 + 60.0], [52.0, 90.0])
    assert part["cold_start_median_s"] == 90.0 and "cold_start_from" not in part


def test_a_start_up_of_unknown_split_loads_the_weights_at_the_assumed_speed() -> None:
    """Pod conditions time the whole start-up (scheduled -> Ready): a 70B model's 140 GB
    take 70 s of it at 2 GB/s and the rest is warm-up - the same start-up, which a faster
    weight loader now shortens; a start-up too short for that keeps 20 % as warm-up."""
    from tailtriage.remediation.calibrate.parts import FOLDED_LOAD_GB_S, split_load
    from tailtriage.simulator.config import ModelConfig, PodsConfig
    from tailtriage.simulator.steptime import weight_bytes

    model = ModelConfig(name="llama-3.1-70b")
    gb = weight_bytes(model.shape, model.dtype) / 1e9
    folded = PodsConfig(load_gb_s=FOLDED_LOAD_GB_S, warmup_s=120.0)
    pods, load_s = split_load(folded, model)
    assert load_s == pytest.approx(gb / 2.0)
    assert pods.warmup_s + gb / pods.load_gb_s == pytest.approx(120.0)
    short, load_s = split_load(replace(folded, warmup_s=30.0), model)
    assert load_s == pytest.approx(24.0) and short.warmup_s == pytest.approx(6.0)
    # a loading speed that was given or fitted is left alone
    given = PodsConfig(load_gb_s=5.0, warmup_s=120.0)
    assert split_load(given, model) == (given, None)


def test_pods_still_starting_at_the_capture_start_are_replayed_as_starting() -> None:
    # two pods were scheduled before the first request and became Ready 40 s and 70 s after
    # it (pod conditions: a cold_start row at scheduling, its duration to Ready); a third
    # started and finished before the capture, a fourth inside it: neither is "starting"
    from builders import T0, make_capture, make_request
    from tailtriage.model import make_table
    from tailtriage.model import schema as S
    from tailtriage.remediation.calibrate.parts import fit_scaling
    from tailtriage.simulator.config import ScenarioConfig
    from tailtriage.simulator.workload import Workload

    cap = make_capture([make_request(f"r{i}", T0 + i) for i in range(20)])
    events = make_table(
        S.EVENTS,
        {
            "time": [T0 - 60.0, T0 - 30.0, T0 - 500.0, T0 + 10.0],
            "kind": ["cold_start"] * 4,
            "duration": [100.0, 100.0, 120.0, 90.0],
        },
    )
    empty = Workload(*(np.zeros(0) for _ in range(6)))
    pods, _, part = fit_scaling(cap.replace(events=events), ScenarioConfig(), empty, T0)
    assert pods.starting_ready_s == (40.0, 70.0)
    assert part["starting_ready_s"] == [40.0, 70.0]
    # without the capture's start there is nothing to place them against
    assert (
        fit_scaling(cap.replace(events=events), ScenarioConfig(), empty)[0].starting_ready_s == ()
    )


def test_start_ups_still_running_at_the_capture_end_set_a_floor() -> None:
    """Six pods scheduled 440-470 s into a 600 s capture pull the image for ~117 s and never
    turn Ready: readiness probes still fail 100+ s after the capture.  No finished start-up
    exists, yet each took at least (its last event - scheduled); the fit must not fall back to
    a start-up of defaults a minute and a half long."""
    from builders import T0, make_capture, make_request
    from tailtriage.model import make_table
    from tailtriage.model import schema as S
    from tailtriage.remediation.calibrate.parts import (
        censored_start_gap,
        fit_pods,
        still_starting,
    )
    from tailtriage.simulator.config import PodsConfig

    cap = make_capture([make_request("r0", T0), make_request("r1", T0 + 600.0)])
    rows: dict[str, list[object]] = {k: [] for k in ("time", "kind", "object_kind", "object_name")}
    rows["duration"] = []

    def add(t: float, kind: str, pod: str, duration: float | None = None) -> None:
        for k, v in zip(
            ("time", "kind", "object_kind", "object_name"), (T0 + t, kind, "Pod", pod), strict=True
        ):
            rows[k].append(v)
        rows["duration"].append(duration)

    for i in range(6):
        pod, at = f"vllm-new-{i}", 440.0 + 6 * i
        add(at, "pod_scheduled", pod)
        add(at + 120.0, "image_pulled", pod, 115.0 + i)
        add(at + 122.0, "container_started", pod)
        add(at + 270.0, "pod_unhealthy", pod)  # after the capture: still not Ready
    add(-3000.0, "pod_scheduled", "vllm-old")  # long before: says nothing of this incident
    add(-2850.0, "pod_ready", "vllm-old")
    cap = cap.replace(events=make_table(S.EVENTS, rows))
    floors = still_starting(cap)
    assert sorted(floors) == pytest.approx([270.0] * 6)
    pods, part = fit_pods(cap, PodsConfig())
    assert part["still_starting_n"] == 6 and part["cold_start_n"] == 0
    assert pods.image_pull_s == pytest.approx(117.5) and not pods.image_cached
    # pull + load + warm-up is at least the 270 s the pods are known to have needed
    assert pods.image_pull_s + pods.warmup_s == pytest.approx(270.0)
    # ... and the report says it is a lower bound
    gap = censored_start_gap(part)
    assert gap is not None and "lower bound" in gap.line()


def test_a_pod_known_to_have_run_is_not_still_starting() -> None:
    """Pods deleted before the export (a scale-down, Knative) have no Ready condition: one
    that was Ready, was killed, served a traced request or had work in its engine's gauges ran;
    a gauge of zeros (some exporters fill a new pod's series) proves nothing."""
    from builders import T0, make_capture, make_request
    from tailtriage.model import make_table
    from tailtriage.model import schema as S
    from tailtriage.remediation.calibrate.parts import still_starting

    pods = ["ready", "killed", "served", "busy", "zeros"]
    reqs = [make_request("r0", T0), make_request("r1", T0 + 600.0)]
    reqs.append(make_request("r2", T0 + 300.0, replica="served"))
    cap = make_capture(reqs)
    times, kinds, names = [], [], []
    for i, pod in enumerate(pods):
        times.append(T0 + 100.0 + i)
        kinds.append("pod_scheduled")
        names.append(pod)
    times += [T0 + 250.0, T0 + 400.0]
    kinds += ["pod_ready", "pod_killing"]
    names += ["ready", "killed"]
    events = make_table(
        S.EVENTS,
        {
            "time": times,
            "kind": kinds,
            "object_kind": ["Pod"] * len(times),
            "object_name": names,
        },
    )
    series = make_table(
        S.SERIES,
        {
            "metric": ["vllm:num_requests_running"] * 4,
            "labels": ['{"pod":"busy"}', '{"pod":"busy"}', '{"pod":"zeros"}', '{"pod":"zeros"}'],
            "time": [T0 + 200.0, T0 + 215.0, T0 + 200.0, T0 + 215.0],
            "value": [0.0, 3.0, 0.0, 0.0],
        },
    )
    cap = cap.replace(events=events, series=series)
    floors = still_starting(cap)
    end = cap.time_range[1] if cap.time_range else 0.0
    assert floors.tolist() == pytest.approx([end - (T0 + 104.0)])  # "zeros" only


def test_sampled_traces_fit_the_compute_side_from_their_prefill_steps() -> None:
    # half the traces: no step is pinned, but a short prompt admitted beside the running
    # decodes is prefilled in its admission step, and the engine's running gauge and prompt
    # counter say what else that step carried (steps.sampled_prefill_steps); fitted to the
    # decodes' mean steps alone, the roofline's compute side came out 10 % low
    from tailtriage.remediation.calibrate.steps import fit_roofline
    from tailtriage.simulator.steptime import GPUS, MODELS, RooflineStepTime

    truth = RooflineStepTime(
        MODELS["llama-3.1-8b"], GPUS["H100"], mfu=0.45, mbu=0.7, overhead_s=0.003
    )
    t = run_engine(truth, n=1500, rate=12.0, seed=5, limits=BatchLimits(2048))
    grid = np.arange(0.0, float(t.finish.max()) + 1.0)
    running = np.array([((t.scheduled <= g) & (t.finish > g)).sum() for g in grid], float)
    counted = np.array([t.prompt[t.first_token <= g].sum() for g in grid])
    keep = np.random.default_rng(0).random(t.n) < 0.5
    sampled = EngineTimings(
        t0=0.0,
        replica=t.replica[keep],
        arrival=t.arrival[keep],
        queued=t.queued[keep],
        scheduled=t.scheduled[keep],
        first_token=t.first_token[keep],
        finish=t.finish[keep],
        prompt=t.prompt[keep],
        output=t.output[keep],
        sampled=0.5,
        running=((grid, running),),
        prompt_tokens=((grid, counted),),
    )
    guess = RooflineStepTime(MODELS["llama-3.1-8b"], GPUS["H100"])
    fit = fit_roofline(sampled, guess, budget=2048)
    assert fit.mfu == pytest.approx(0.45, rel=0.08)
