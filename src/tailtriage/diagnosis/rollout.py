"""Was capacity replaced by a rolling update, or only scaled?  From real kubectl output.

* a **rollout** is the Deployment controller moving two ReplicaSets in opposite directions:
  ``ScalingReplicaSet`` "Scaled up replica set <new> ..." and "Scaled down replica set <old>
  ..." (or the simulator's and other exporters' ``rollout`` events);
* a **scale-down** moves one ReplicaSet down after the HPA's ``SuccessfulRescale`` to fewer
  replicas;
* a new ReplicaSet scaled up while pods of another one are stopped is a rollout too (captures
  miss "Scaled down" steps);
* ``Killing`` events belong to whichever of the two removed the pod's ReplicaSet (a pod is
  ``<replicaset>-<5 chars>``, its owner when ``kubectl get pods`` lists it).

Latency split by ReplicaSet (version) tells a rollout that slowed every replica (capacity lost
while new pods load) from a new version that is itself slower."""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from tailtriage.analyses.pods import replicaset_of
from tailtriage.analyses.rollout import FROM_EVENTS, RolloutAnalysis, WarmUp, analyze_rollout
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence
from tailtriage.diagnosis.rule import ms
from tailtriage.store import Store

_SCALED = re.compile(r"Scaled (up|down) replica set (\S+) (?:to|from \d+ to) (\d+)")


@dataclass(frozen=True)
class RolloutEvidence:
    steps: int  # ScalingReplicaSet steps of a rollout (or rollout events)
    new: tuple[str, ...]  # ReplicaSets scaled up by the rollout
    old: tuple[str, ...]  # ReplicaSets scaled down by it
    rollout_kills: int  # Killing events of pods of the old ReplicaSets
    scale_down_kills: int  # Killing events explained by an HPA scale-down
    first: float | None  # time of the first rollout step or kill
    #: mean TTFT (seconds) and request count per ReplicaSet in the incident
    by_replicaset: tuple[tuple[str, float, int], ...] = ()

    @property
    def is_rollout(self) -> bool:
        return self.steps > 0


def rollout_evidence(ctx: DiagnosisContext) -> RolloutEvidence:
    """What the events say about replaced vs scaled capacity (see module doc)."""
    if ctx.store is None:
        return RolloutEvidence(0, (), (), 0, 0, None)
    lo, hi = ctx.windows.incident[0] - T.ROLLOUT_LEAD_S, ctx.windows.incident[1]
    rows = ctx.store.query(
        "SELECT time, kind, object_name, message, attributes FROM events "
        "WHERE kind IN ('replicaset_scaled', 'rollout', 'pod_killing', 'hpa_rescale', "
        "'pod_created') ORDER BY time"
    ).to_pylist()
    owners: dict[str, str] = {}
    moves: list[tuple[float, str, str]] = []  # (time, direction, replicaset)
    sim_rollouts: list[float] = []
    kills: list[tuple[float, str]] = []
    downs: list[float] = []
    last_size: int | None = None
    for r in rows:
        attrs = _attrs(r["attributes"])
        t, kind = float(r["time"]), str(r["kind"])
        if kind == "pod_created" and attrs.get("owner") and attrs.get("pod"):
            owners[str(attrs["pod"])] = str(attrs["owner"])
        elif kind == "hpa_rescale" and isinstance(size := attrs.get("replicas"), int):
            if last_size is not None and size < last_size:
                downs.append(t)
            last_size = size
        elif not lo <= t <= hi:
            continue
        elif kind == "replicaset_scaled":
            m = _SCALED.search(str(r["message"] or ""))
            rs = str(attrs.get("replicaset") or (m.group(2) if m else ""))
            way = str(attrs.get("direction") or (m.group(1) if m else ""))
            if rs and way:
                moves.append((t, way, rs))
        elif kind == "rollout":
            sim_rollouts.append(t)
        elif kind == "pod_killing":
            kills.append((t, str(attrs.get("pod") or r["object_name"] or "")))
    ups = {rs for _, way, rs in moves if way == "up"}
    dns = {rs for _, way, rs in moves if way == "down"}
    # a capture may miss the "Scaled down" steps: pods of another ReplicaSet being stopped
    # while a new one scales up say the same
    killed = {replicaset_of(p, owners) for _, p in kills}
    new, old = tuple(sorted(ups - dns)), tuple(sorted((dns | killed) - ups))
    rolling = bool(new and old)
    steps = (len(moves) if rolling else 0) + len(sim_rollouts)
    roll_kills = scale_kills = 0
    for t, pod in kills:
        rs = replicaset_of(pod, owners)
        if rolling and rs in old:
            roll_kills += 1
        elif any(0.0 <= t - d <= T.ROLLOUT_LEAD_S for d in downs) or (not rolling and rs in dns):
            scale_kills += 1
        elif sim_rollouts:
            roll_kills += 1
    times = [t for t, _, _ in moves] if rolling else []
    times += sim_rollouts + [t for t, p in kills if rolling and replicaset_of(p, owners) in old]
    return RolloutEvidence(
        steps=steps,
        new=new,
        old=old,
        rollout_kills=roll_kills,
        scale_down_kills=scale_kills,
        first=min(times) if times else None,
        by_replicaset=_latency_by_replicaset(ctx, owners) if rolling else (),
    )


def _attrs(text: object) -> dict[str, object]:
    try:
        d = orjson.loads(str(text)) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return d if isinstance(d, dict) else {}


def _latency_by_replicaset(
    ctx: DiagnosisContext, owners: dict[str, str]
) -> tuple[tuple[str, float, int], ...]:
    assert ctx.store is not None
    lo, hi = ctx.windows.incident
    rows = ctx.store.query(
        "SELECT replica, sum(ttft) AS s, count(ttft) AS n FROM requests "
        "WHERE arrival >= ? AND arrival < ? AND replica IS NOT NULL GROUP BY replica",
        [lo, hi],
    ).to_pylist()
    acc: dict[str, list[float]] = {}
    for r in rows:
        if not r["n"]:
            continue
        rs = replicaset_of(str(r["replica"]), owners)
        a = acc.setdefault(rs, [0.0, 0.0])
        a[0] += float(r["s"] or 0.0)
        a[1] += int(r["n"])
    return tuple(sorted((rs, s / n, int(n)) for rs, (s, n) in acc.items() if n))


#: the rollout analysis of each store, read once per diagnosis by the rules that weigh it
#: (weak keys: a store's entry goes with the store)
_ANALYSES: weakref.WeakKeyDictionary[Store, RolloutAnalysis | None] = weakref.WeakKeyDictionary()


def _analysis(store: Store) -> RolloutAnalysis | None:
    if store not in _ANALYSES:
        _ANALYSES[store] = analyze_rollout(store)
    return _ANALYSES[store]


def took_capacity(ctx: DiagnosisContext) -> bool | None:
    """Did the rollout take serving capacity away: ready replicas below the desired count, or
    new pods serving slower in their warm-up?  None when the capture cannot tell (no rollout
    found by the analysis, or neither ready gauges nor pod lifecycles)."""
    if ctx.store is None:
        return None
    found = _analysis(ctx.store)
    if found is None or found.dip is None:
        return None
    slow = [w for w in found.warmups if (w.slowdown or 0.0) >= T.WARMUP_SLOWDOWN]
    # a slow warm-up took capacity only if the incident's tail is made of it: new pods of a
    # surge rollout warm up one at a time, each with a small share of the traffic
    share = warmup_tail_share(ctx, slow) if slow else 0.0
    return bool(found.dip.lost) or (share is None or share >= T.WARMUP_TAIL_SHARE)


_TAIL_SQL = """
SELECT replica, arrival, ttft FROM requests
WHERE arrival >= ? AND arrival < ? AND ttft IS NOT NULL AND replica IS NOT NULL
"""


def warmup_tail_share(ctx: DiagnosisContext, warmups: Sequence[WarmUp]) -> float | None:
    """Share of the incident's tail band (TTFT at or above its p95) served by ``warmups``'
    pods in their warm-up windows; None with too few requests to have a tail band."""
    assert ctx.store is not None
    rows = ctx.store.query(_TAIL_SQL, list(ctx.windows.incident)).to_pylist()
    if len(rows) < T.TAIL_BAND_MIN_REQUESTS:
        return None
    ttft = np.array([float(r["ttft"]) for r in rows])
    tail = ttft >= np.quantile(ttft, T.TAIL_BAND_QUANTILE)
    windows = {w.pod: (w.ready, w.ready + w.window_s) for w in warmups}
    warming = np.array(
        [
            (win := windows.get(str(r["replica"]))) is not None
            and win[0] <= float(r["arrival"]) < win[1]
            for r in rows
        ]
    )
    return float((tail & warming).sum() / tail.sum())


def capacity_dipped(ctx: DiagnosisContext) -> bool:
    """A rollout took ready replicas below the desired count (maxUnavailable, or new pods
    slower to be Ready than old ones were killed): each remaining replica carried more."""
    if ctx.store is None:
        return False
    found = _analysis(ctx.store)
    return found is not None and found.dip is not None and bool(found.dip.lost)


def analysis_evidence(ctx: DiagnosisContext) -> tuple[Evidence, ...]:
    """The rollout analysis (:mod:`tailtriage.analyses.rollout`) as evidence: latency by
    version, the capacity dip, the new pods' weight loading and warm-up."""
    if ctx.store is None:
        return ()
    found = _analysis(ctx.store)
    if found is None:
        return ()
    out = []
    timed = [v for v in found.versions if v.ttft_p95 is not None]
    if len(timed) >= 2:
        out.append(
            Evidence(
                "request.ttft_p95_by_version",
                ", ".join(f"{v.version}: {ms(v.ttft_p95)}" for v in timed),
                "p95 TTFT per ReplicaSet ("
                + ", ".join(
                    f"{v.requests} requests on {v.version}{' (new)' if v.new else ''}"
                    + (f", model {'/'.join(v.models)}" if v.models else "")
                    for v in timed
                )
                + ")",
                source="span",
            )
        )
    dip = found.dip
    if dip is not None and dip.lost:
        out.append(
            Evidence(
                "Killing" if dip.source == FROM_EVENTS else dip.source,
                dip.min_ready,
                f"ready replicas fell from {dip.desired} to {dip.min_ready} for "
                f"{dip.seconds_below:.0f} s of the rollout (maxSurge {found.max_surge}, "
                f"maxUnavailable {found.max_unavailable} as its first step shows)",
                source="event" if dip.source == FROM_EVENTS else "metric",
                threshold=dip.desired,
            )
        )
    load = found.weight_load_s
    if load is not None:
        out.append(
            Evidence(
                "pod.weight_load_s",
                round(load, 1),
                f"each new pod took {load:.0f} s from container start to Ready (weights and "
                f"engine warm-up) while its step of the rollout held capacity back"
                + (
                    "; the versions serve different models (a model swap)"
                    if found.model_swap
                    else ""
                ),
                source="event",
            )
        )
    slow = [w for w in found.warmups if (w.slowdown or 0.0) >= T.WARMUP_SLOWDOWN]
    if slow:
        worst = max(slow, key=lambda w: w.slowdown or 0.0)
        out.append(
            Evidence(
                "pod.warmup_ttft_p95",
                round(worst.slowdown or 0.0, 2),
                f"{len(slow)} new pod(s) served slower in the {worst.window_s:.0f} s after "
                f"Ready: {worst.pod} {ms(worst.ttft_p95)} in the engine against "
                f"{ms(worst.steady_ttft_p95)} afterwards",
                source="derived",
                threshold=T.WARMUP_SLOWDOWN,
            )
        )
    return tuple(out)
