"""The step-time scale search: which of the factors ``(1 ± SCALE_STEP) ** k`` (``k`` in
``0..SCALE_STEPS``) makes the replay reproduce the observed percentiles best.

Every probe is a replay of the whole capture, so the search spends as few as it can.  The
score (mean |log error| of the replayed percentiles) falls and then rises along ``k``: the
walk from ``k = 0`` one step at a time while the score falls finds its lowest point, at one
replay per step.  :func:`best_step` finds the same point with fewer when it is far: after
step 1 it jumps to where the replay's bias (mean signed log error, which the scale moves
about linearly) crosses zero, on the line through steps 0 and 1, half way (JUMP_SHARE), and
walks from there, replaying a step's two neighbours together with it (``simulator.parallel``
runs them at once where cores are idle).  The answer is the step with the lowest score whose
neighbours both score higher (or the same, on the far side) - the walk's answer whenever the
score falls then rises; only the number of replays differs.

Every probe names the steps it needs and the spare steps the search expects to need next
(step 2 beside step 1; the next step the way the walk goes): a prober whose workers would wait
in that round replays spares too and keeps them, so the next probe finds them done.  Spares
never enter the answer, nor the steps reported as probed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: a fitted line whose replay misses the observed percentiles by more than this (mean |log
#: error|) has its scale refined by replaying: per-request TPOTs carry preemption stalls and
#: batch-composition noise the line absorbs, which shows as a throughput bias in the replay
SCALE_MIN_SCORE = 0.02
#: the scale search: steps of this ratio, at most SCALE_STEPS of them either way (1.05^10:
#: up to 63 %; at five steps, tuning bundles' searches stopped at the bound still improving)
SCALE_STEP = 0.05
SCALE_STEPS = 10


@dataclass(frozen=True)
class Probe:
    """One replayed scale, against the observation."""

    score: float  # mean |log error| of the replayed percentiles: lower is better
    bias: float  # mean log error: > 0 the replay is slower than observed


#: how far towards the bias line's zero the search jumps: the percentiles' errors shrink at
#: different rates, so the line overshoots (a held-out bundle: zero at step 9, lowest score at
#: step 4, nine replays where the walk takes five); half way costs at most half the walk
#: when the line is right
JUMP_SHARE = 0.5

#: replays the steps given first (in that order) and returns their probes; the second
#: sequence: spare steps, likely needed next, that it may replay where a worker would be idle
Prober = Callable[[Sequence[int], Sequence[int]], Sequence[Probe]]


def best_step(probe: Prober, start: Probe, steps: int) -> tuple[int, dict[int, Probe]]:
    """The step in ``0..steps`` to keep (``start`` is step 0's probe, already replayed), and
    every step probed on the way."""
    seen = {0: start}

    def need(ks: Sequence[int], spare: int) -> None:
        todo = [k for k in dict.fromkeys(ks) if 0 <= k <= steps and k not in seen]
        if todo:
            extra = [spare] if 0 < spare <= steps and spare not in seen else []
            seen.update(zip(todo, probe(todo, extra), strict=True))

    need([1], 2)
    if steps < 1 or seen[1].score >= start.score:
        return 0, seen
    crossing = _crossing(start.bias, seen[1].bias)
    k = max(1, min(steps, round(1 + JUMP_SHARE * (crossing - 1))))
    way = -1  # the jump's guess is the bias line's, half way: it errs both ways, nearer first
    while k > 0:
        need([k - 1, k, k + 1], k + 2 * way)
        if k < steps and seen[k + 1].score < seen[k].score:
            k, way = k + 1, 1  # still falling: the lowest point is further out
        elif seen[k - 1].score <= seen[k].score:
            k, way = k - 1, -1  # the jump overshot: it is nearer
        else:
            break
    return k, seen


def _crossing(b0: float, b1: float) -> int:
    """The step nearest to where the line through (0, b0) and (1, b1) crosses zero; 1 when
    the bias did not move towards zero (the walk then goes one step at a time)."""
    if not (math.isfinite(b0) and math.isfinite(b1)) or b0 == b1 or b0 * (b0 - b1) <= 0:
        return 1
    return max(1, round(b0 / (b0 - b1)))
