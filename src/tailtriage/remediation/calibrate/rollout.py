"""Rolling updates the capture shows, as the simulator's ``rollouts`` (so a what-if can
replay them and change their ``maxSurge`` / ``maxUnavailable``).

A rollout during the capture is part of what happened: without it the calibrated stack keeps
every replica through the incident and misses the queueing the lost capacity caused.  The
start, the strategy of the first step and the new pods' start-up come from
:func:`tailtriage.analyses.rollout.analyze_rollout`; what the new version changed inside the
engine (flags, another model) is not in the telemetry, so the new pods run the calibrated
engine."""

from __future__ import annotations

from typing import Any

from tailtriage.analyses.rollout import analyze_rollout
from tailtriage.model import Capture
from tailtriage.simulator.config import Rollout
from tailtriage.store.base import DuckDBStore


def fit_rollouts(capture: Capture, t0: float) -> tuple[tuple[Rollout, ...], dict[str, Any]]:
    """The rollout the capture shows (relative to ``t0``), and the evidence for it."""
    if capture.events.num_rows == 0:
        return (), {"note": "no Kubernetes events: no rollout replayed"}
    with DuckDBStore(capture) as store:
        found = analyze_rollout(store)
    if found is None:
        return (), {"note": "no rolling update in the events"}
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
    return (rollout,), part
