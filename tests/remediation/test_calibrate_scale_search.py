"""The step-time scale search finds what replaying every scale finds, with fewer replays when
the best scale is far: the pure search on score curves that fall then rise, and the
calibration's search on a small capture against replaying every factor."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.remediation import calibrate as cal
from tailtriage.remediation.calibrate.replay import Replays, simulate_workloads
from tailtriage.remediation.calibrate.scale import SCALE_STEPS, Probe, best_step
from tailtriage.simulator.config import Arrivals, Dist, Phase, ScenarioConfig, StepTimeConfig
from tailtriage.simulator.simulation import run


def _curve(lowest: int, drops: Sequence[float], rises: Sequence[float]) -> list[float]:
    """Scores over steps 0..SCALE_STEPS falling (strictly) to ``lowest``, then not falling."""
    scores = [1.0]
    for k in range(1, SCALE_STEPS + 1):
        step = -drops[k - 1] if k <= lowest else rises[k - 1]
        scores.append(scores[-1] + step)
    return scores


@settings(max_examples=200, deadline=None)
@given(
    lowest=st.integers(0, SCALE_STEPS),
    drops=st.lists(st.floats(0.001, 0.2), min_size=SCALE_STEPS, max_size=SCALE_STEPS),
    rises=st.lists(st.floats(0.0, 0.3), min_size=SCALE_STEPS, max_size=SCALE_STEPS),
    bias_at=st.floats(-2.0, 8.0),  # where the bias line says the best step is (any guess)
)
def test_the_search_finds_the_lowest_score(
    lowest: int, drops: list[float], rises: list[float], bias_at: float
) -> None:
    scores = _curve(lowest, drops, rises)
    probed: list[int] = []

    def probe(ks: Sequence[int], spare: Sequence[int]) -> list[Probe]:
        probed.extend(ks)
        spares.extend(spare)
        assert not set(spare) & {0, *probed}  # a spare is a step not probed yet
        return [Probe(scores[k], bias_at - k) for k in ks]

    spares: list[int] = []
    k, seen = best_step(probe, Probe(scores[0], bias_at), SCALE_STEPS)
    assert k == int(np.argmin(scores))  # what replaying every step finds
    assert len(probed) == len(set(probed)) and 0 not in probed  # no step replayed twice
    assert set(seen) == {0, *probed}  # spares are never reported as probed
    assert all(1 <= s <= SCALE_STEPS for s in spares)


def test_an_accurate_bias_finds_a_far_best_step_in_fewer_replays() -> None:
    scores = _curve(SCALE_STEPS, [0.1] * SCALE_STEPS, [0.1] * SCALE_STEPS)
    probed: list[int] = []

    def probe(ks: Sequence[int], spare: Sequence[int]) -> list[Probe]:
        probed.extend(ks)
        return [Probe(scores[k], 0.1 * (SCALE_STEPS - k)) for k in ks]

    k, _ = best_step(probe, Probe(scores[0], 0.1 * SCALE_STEPS), SCALE_STEPS)
    assert k == SCALE_STEPS
    assert len(probed) < SCALE_STEPS  # the walk one step at a time replays every step


def test_a_bias_line_that_overshoots_costs_about_the_walk() -> None:
    # the bias says step 10, the score is lowest at 4 (the percentiles' errors shrink at
    # different rates): jumping all the way and walking back would replay nine steps
    scores = _curve(4, [0.1] * SCALE_STEPS, [0.05] * SCALE_STEPS)
    probed: list[int] = []

    def probe(ks: Sequence[int], spare: Sequence[int]) -> list[Probe]:
        probed.extend(ks)
        return [Probe(scores[k], 0.1 * (SCALE_STEPS - k)) for k in ks]

    k, _ = best_step(probe, Probe(scores[0], 0.1 * SCALE_STEPS), SCALE_STEPS)
    assert k == 4
    assert len(probed) <= 4 + 2  # the walk replays steps 1..5


def _line_scaled(config: ScenarioConfig, factor: float) -> ScenarioConfig:
    scaled = cal._scaled(config, factor)
    assert scaled is not None  # a fitted line has no hardware bound
    return scaled


def test_refined_scale_is_the_best_of_every_factor_replayed() -> None:
    """A calibrated line made 25 % too slow on purpose: the search walks back to the factor
    that replaying all of them scores best."""
    out = Dist("lognormal", median=80, sigma=0.4)
    truth = ScenarioConfig(
        workload=(Phase(duration_s=40, arrivals=Arrivals(rate=14.0), output_tokens=out),),
        step_time=StepTimeConfig(mode="fitted"),
    )
    observed = run(truth, seed=2).capture
    calibration = cal.calibrate(observed, truth, seed=0)
    slow = _line_scaled(calibration.config, 1.25)
    (sim,) = simulate_workloads([slow], calibration.workload, 0)
    score, err = cal.score_of_replay(observed, sim)
    start = Probe(score, cal.bias_of(err))
    steps = cal._scale_configs(slow, start)
    runs = Replays(calibration.workload, 0)
    chosen, _, part = cal._refine_scale(observed, steps, start, sim, runs)
    factors = [(1.0 - cal.SCALE_STEP) ** k for k in range(cal.SCALE_STEPS + 1)]
    every = simulate_workloads([_line_scaled(slow, f) for f in factors], calibration.workload, 0)
    scores = [cal.score_of_replay(observed, c)[0] for c in every]
    assert part["factor"] == factors[int(np.argmin(scores))]
    assert part["factor"] < 1.0  # it did move: the line was too slow
    assert len(part["scores"]) <= len(factors)
    assert (
        chosen.step_time.coefficients == _line_scaled(slow, part["factor"]).step_time.coefficients
    )


def _rounds(scores: Sequence[float], bias: Sequence[float], width: int) -> tuple[int, int, int]:
    """(answer, rounds of ``width`` workers, steps replayed) of a search whose prober runs the
    spares it is given where a round would leave a worker idle, and finds them later."""
    done: set[int] = set()
    rounds = 0

    def probe(ks: Sequence[int], spare: Sequence[int]) -> list[Probe]:
        nonlocal rounds
        todo = [k for k in ks if k not in done]
        idle = -len(todo) % width if todo else 0
        todo += [s for s in spare if s not in done and s not in todo][:idle]
        rounds += -(-len(todo) // width)
        done.update(todo)
        return [Probe(scores[k], bias[k]) for k in ks]

    k, _ = best_step(probe, Probe(scores[0], bias[0]), SCALE_STEPS)
    return k, rounds, len(done)


def test_spare_steps_fill_idle_workers_and_leave_the_answer_alone() -> None:
    # the held-out bundle's shape: the bias line says step 10, the score is lowest at 4
    scores = _curve(4, [0.1] * SCALE_STEPS, [0.05] * SCALE_STEPS)
    bias = [0.1 * (SCALE_STEPS - k) for k in range(SCALE_STEPS + 1)]
    alone, alone_rounds, alone_runs = _rounds(scores, bias, 1)
    paired, paired_rounds, paired_runs = _rounds(scores, bias, 2)
    assert alone == paired == 4
    assert alone_rounds == alone_runs  # one worker: a round is a replay, no spare runs
    assert paired_rounds < alone_rounds - 1  # two workers: spares save whole rounds
    assert paired_runs <= alone_runs + 2  # for at most a spare or two that went unused
