"""Decode-only stretches of an engine's step loop, run as one event.

Most engine steps only decode: every running sequence gets one token, nothing is admitted,
nothing finishes, no block runs short.  Such a step changes no sequence, only the step count,
the context total (one more token per sequence) and the blocks handed out, so a stretch of
them has a closed form (:meth:`~tailtriage.simulator.batching.ContinuousBatcher.decode_run`):
their step times come from one vectorised call (bit for bit the scalar model's) and their end
times from a running sum in step order (the same additions as one event after another).  The
simulation then schedules one event at the stretch's last step end instead of one per step.

Anything that could see or change the engine before then - a request reaching it, a scrape,
the pod being killed - first *cuts* the stretch at its own time (``Simulation._cut``): the
steps that ended by then are completed, the one in flight becomes an ordinary step again, and
the simulation goes on exactly as if every step had been an event: every total is added in
the same order (captures are byte-identical with and without stretches).  The one freedom
left: two replicas' steps ending at the very same float instant keep their push order as
events, which a cut stretch's step may not share - it only matters when requests wait at the
gateway for exactly that instant, and no scenario or replay checked has shown it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import numpy as np

from tailtriage.simulator.batching import StepPlan
from tailtriage.simulator.cluster import ITERATION_BUCKETS, ITL_BUCKETS, Pod

#: shortest stretch run as one event: one step saved is worth more than setting it up
MIN_STEPS: Final = 2
#: steps computed ahead at most: an arrival or a scrape usually cuts a stretch sooner, and the
#: steps after the cut were computed for nothing
MAX_STEPS: Final = 256
#: longer stretches get their step times from one vectorised call, shorter ones step by step
#: (a numpy call costs about as much as this many scalar steps)
VECTOR_FROM: Final = 24


class DecodeRun:
    """``k`` decode-only steps of one pod from ``plan`` (step 0, counted when it started)."""

    __slots__ = ("dts", "ends", "k", "plan", "pod")

    def __init__(self, pod: Pod, plan: StepPlan, dts: list[float], ends: list[float]) -> None:
        self.pod = pod
        self.plan = plan
        self.dts = dts
        self.ends = ends  # end time of every step, the last one the run's event
        self.k = len(ends)


#: False inside :func:`one_event_per_step`
_enabled = True


@contextmanager
def one_event_per_step() -> Iterator[None]:
    """Simulate one event per engine step inside this block: the reference that
    ``bench/triage.py`` times stretches against (and that they must reproduce exactly)."""
    global _enabled
    before, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = before


def begin(pod: Pod, plan: StepPlan, start: float, dt: float) -> DecodeRun | None:
    """The stretch that starts with ``plan`` (in flight since ``start``, ``dt`` long), or None
    when it is too short to be worth one.  Steps slowed by a warm-up are not stretched."""
    if not _enabled:
        return None
    k = pod.batcher.decode_run(MAX_STEPS)
    if k < MIN_STEPS:
        return None
    n = plan.decode_seqs
    ctx = plan.context_tokens
    if k >= VECTOR_FROM:
        contexts = ctx + n * np.arange(k, dtype=np.float64)  # one more token per sequence
        times = pod.template.step_model.decode_step_times(n, contexts)
        times[0] = dt
        # t + dt0, then + dt1, ...: add.accumulate adds in order, as one event after another
        ends = np.cumsum(np.concatenate(([start], times)))[1:]
        return DecodeRun(pod, plan, times.tolist(), ends.tolist())
    step_time = pod.step_time
    dts, end_times = [dt], [start + dt]
    t = end_times[0]
    for _ in range(1, k):
        ctx += n
        d = step_time(0, n, ctx, n)
        t += d
        dts.append(d)
        end_times.append(t)
    return DecodeRun(pod, plan, dts, end_times)


def settle(run: DecodeRun, steps: int, cpu_per_token_s: float) -> None:
    """Complete the run's first ``steps`` steps, and count the start of every step begun by
    then (the one after them too, unless the run is over): what ``Pod.count_step`` and the
    step ends would have added one step at a time, float sums added in the same order."""
    pod = run.pod
    plan = run.plan
    n = plan.decode_seqs
    began = min(steps, run.k - 1)  # steps 1..began start inside the run (0 was counted)
    if began:
        pod.steps += began
        pod.tokens_sum += n * began
        it = pod.iter_hist
        it[bisect.bisect_left(ITERATION_BUCKETS, n)] += began  # whole numbers: exact in any order
        it[-1] += n * began
        # contexts c0 + n, c0 + 2n, ...: their sum in closed form (integers)
        pod.context_sum += plan.context_tokens * began + n * began * (began + 1) // 2
        hist = pod.itl_hist
        busy, itl_sum = pod.busy_s, hist[-1]
        for dt in run.dts[1 : began + 1]:
            busy += dt
            itl_sum += dt * n
            hist[bisect.bisect_left(ITL_BUCKETS, dt)] += n
        pod.busy_s, hist[-1] = busy, itl_sum
    if steps:
        pod.batcher.complete_decode_run(plan, steps)
        pod.step_ends.extend(run.ends[:steps])
        cpu = cpu_per_token_s * n
        total = pod.cpu_s
        for _ in range(steps):  # one addition per step, as each step's end adds it
            total += cpu
        pod.cpu_s = total


def steps_by(run: DecodeRun, t: float) -> int:
    """Steps of the run that ended by ``t`` (a step ending at ``t`` comes before any other
    event at ``t``: step ends have the first priority)."""
    return bisect.bisect_right(run.ends, t)
