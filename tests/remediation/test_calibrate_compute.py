"""A step model with a compute side: decode steps on the fitted line, long prefill steps on
``compute`` x tokens - the roofline's ridge fitted from the telemetry, sampled traces too."""

from __future__ import annotations

import numpy as np

from tailtriage.remediation.calibrate.steps import (
    EngineTimings,
    fit_compute,
    sampled_prefill_steps,
)
from tailtriage.simulator.steptime import FittedStepTime

LINE = FittedStepTime(c0=0.012, prefill=0.0, decode=1e-4, context=0.0, batch=0.0)
PER_TOKEN = 60e-6  # a 14B model at half an H100's peak: 2 * 14e9 / (0.5 * 989e12)
RUNNING = 20.0


def _timings(prompts: np.ndarray, sampled: float) -> EngineTimings:
    """One replica, a request admitted every second, each prefilled in one step of
    max(line, PER_TOKEN x tokens) beside RUNNING - 1 decodes, then 100 decode steps."""
    n = prompts.size
    s = np.arange(n, dtype=float)
    decoding = RUNNING - 1.0
    step = np.maximum(
        [LINE.step_time(int(p), int(decoding), 0) for p in prompts],
        PER_TOKEN * (prompts + decoding),
    )
    first = s + step
    gauge_t = np.arange(0.0, n + 30.0, 15.0)
    return EngineTimings(
        t0=0.0, replica=np.zeros(n, dtype=np.int64), arrival=s, queued=s, scheduled=s,
        first_token=first, finish=first + 100 * 0.015, prompt=prompts.astype(float),
        output=np.full(n, 101.0), replicas=("vllm-0",), sampled=sampled,
        running=((gauge_t, np.full(gauge_t.size, RUNNING)),),
    )  # fmt: skip


def test_the_step_is_the_longer_of_the_line_and_the_compute_side() -> None:
    hinge = FittedStepTime(c0=0.012, prefill=0.0, decode=1e-4, context=0.0, compute=PER_TOKEN)
    assert hinge.step_time(0, 32, 0) == LINE.step_time(0, 32, 0)  # decode: memory-bound
    assert abs(hinge.step_time(2000, 32, 0) - PER_TOKEN * 2032) < 1e-12  # past the ridge
    times = hinge.decode_step_times(32, np.array([0.0, 1e5]))
    assert np.allclose(times, LINE.decode_step_times(32, np.array([0.0, 1e5])))


def test_sampled_traces_fit_the_compute_cost_of_long_prefills() -> None:
    prompts = np.random.default_rng(3).integers(100, 3000, 300)
    t = _timings(prompts, sampled=0.2)
    rows = sampled_prefill_steps(t, budget=8192)
    assert rows.tpot.size == 300 and np.all(rows.decode_seqs == RUNNING - 1.0)
    per_token = fit_compute(t, LINE, budget=8192)
    assert per_token is not None and abs(per_token / PER_TOKEN - 1.0) < 0.02


def test_prompts_beyond_the_budget_are_not_one_step() -> None:
    t = _timings(np.array([500, 4000, 9000]), sampled=0.2)
    assert sampled_prefill_steps(t, budget=8192).tpot.size == 2  # 9000 > 8192 - 19


def test_no_compute_side_when_every_step_stays_on_the_line() -> None:
    # short prompts never cross the ridge (12 ms line vs 60 us x 170 tokens = 10 ms)
    t = _timings(np.random.default_rng(4).integers(20, 150, 300), sampled=0.2)
    assert fit_compute(t, LINE, budget=8192) is None
