"""Rolling updates the capture shows, as the simulator's ``rollouts`` (so a what-if can
replay them and change their ``maxSurge`` / ``maxUnavailable``).

A rollout during the capture is part of what happened: without it the calibrated stack keeps
every replica through the incident and misses the queueing the lost capacity caused.  The
start, the strategy of the first step and the new pods' start-up come from
:func:`tailtriage.analyses.rollout.analyze_rollout`; what the new version changed inside the
engine (flags, another model) is not in the telemetry, so the new pods run the calibrated
engine.

A warm-up the new pods went through under traffic (their engine p95 in the slices after Ready
against their later p95: :meth:`~tailtriage.analyses.rollout.WarmUp.slow_span`) becomes the
simulator's ``pods.ready_warmup_s`` / ``pods.ready_warmup_factor``: engine queue + prefill
is counted in engine steps, so its p95 ratio is the step-time factor to first order (the
replay then reproduces the routing around the slow pod), and the span ends with the last
slice that slow.  The median over the new pods: one pod's unlucky burst is not the build's
warm-up."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tailtriage.analyses.rollout import RolloutAnalysis, analyze_rollout
from tailtriage.diagnosis.thresholds import WARMUP_SLOWDOWN
from tailtriage.model import Capture
from tailtriage.simulator.config import Rollout
from tailtriage.store.base import DuckDBStore


@dataclass(frozen=True)
class WarmUpFit:
    """The new pods' warm-up under traffic, as ``pods.ready_warmup_*``."""

    seconds: float
    factor: float
    pods: int  # new pods that showed it


def fit_warmup(found: RolloutAnalysis) -> WarmUpFit | None:
    """The median warm-up of the new pods slow enough to count (``WARMUP_SLOWDOWN``, the
    threshold the rollout finding uses), or None."""
    spans = [s for w in found.warmups if (s := w.slow_span(WARMUP_SLOWDOWN)) is not None]
    if not spans:
        return None
    seconds = statistics.median(s for s, _ in spans)
    factor = statistics.median(f for _, f in spans)
    return WarmUpFit(round(seconds, 3), round(factor, 3), len(spans))


def fit_rollouts(
    capture: Capture, t0: float
) -> tuple[tuple[Rollout, ...], WarmUpFit | None, dict[str, Any]]:
    """The rollout the capture shows (relative to ``t0``), its new pods' warm-up, and the
    evidence for both."""
    if capture.events.num_rows == 0:
        return (), None, {"note": "no Kubernetes events: no rollout replayed"}
    with DuckDBStore(capture) as store:
        found = analyze_rollout(store)
    if found is None:
        return (), None, {"note": "no rolling update in the events"}
    at = max(0.0, found.start - t0)
    rollout = Rollout(
        at_s=at, max_surge=found.max_surge, max_unavailable=max(found.max_unavailable, 0)
    )
    if rollout.max_surge == 0 and rollout.max_unavailable == 0:
        # a step that neither adds nor stops a pod cannot progress: Kubernetes rejects it too
        rollout = Rollout(at_s=at, max_surge=1, max_unavailable=0)
    part = {
        "at_s": round(at, 3),
        "new_replicaset": found.new,
        "old_replicasets": list(found.old),
        "max_surge": rollout.max_surge,
        "max_unavailable": rollout.max_unavailable,
        "weight_load_s": found.weight_load_s,
    }
    warm = fit_warmup(found)
    if warm is not None:
        part["ready_warmup"] = {"s": warm.seconds, "factor": warm.factor, "pods": warm.pods}
    return (rollout,), warm, part
