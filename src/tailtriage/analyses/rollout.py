"""Rolling updates and model swaps: which version served what, and what the swap cost.

From real ``kubectl`` output (pods and events) and kube-state-metrics, as the capture holds it:

* **versions**: a pod belongs to its ReplicaSet (``ownerReferences``, else the pod name
  ``<replicaset>-<5 chars>``: the ReplicaSet is ``<deployment>-<pod-template-hash>``); the
  version that starts during the capture while another one loses pods is the new one;
* **latency by version**: TTFT and e2e percentiles of the requests each version's pods served,
  with the model name the requests carry (a model swap shows two names);
* **warm-up**: each new pod's requests in the ``WARMUP_WINDOW_S`` after it turned Ready,
  against the same pod's requests afterwards;
* **capacity dip**: ready replicas against the desired count while the rollout ran
  (``kube_deployment_status_replicas_ready`` / ``kube_deployment_spec_replicas``, else counted
  from pod Ready and Killing events);
* **strategy**: the ``maxSurge`` / ``maxUnavailable`` the first step shows (new pods created
  and old pods stopped before the first new pod turned Ready), and the weight loading of the
  new pods (container started -> Ready).

``analyze_rollout(store)`` returns None when the capture shows no rollout."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from tailtriage.analyses.pods import PodLife, owner_shown, pod_lives, replicaset_of
from tailtriage.store.base import Store
from tailtriage.store.dialect import dialect_of, literal

#: the first requests after Ready meet CUDA graphs of unseen batch shapes, compile caches and
#: an empty prefix cache; a minute of traffic covers that on vLLM/SGLang
WARMUP_WINDOW_S = 60.0
#: the window in slices this long for the warm-up's profile: ~10 s holds enough requests per
#: pod for a p95 at serving rates, and resolves a warm-up that lasts a fraction of the window
WARMUP_BIN_S = 10.0
#: fewer requests than this give no percentile (a p95 of a handful is noise)
MIN_REQUESTS = 10
#: kube-state-metrics gauges of the Deployment's serving replicas, best first: ready, else
#: available (ready for ``minReadySeconds``; the one ``tailtriage collect`` asks Prometheus for)
READY_GAUGES = (
    "kube_deployment_status_replicas_ready",
    "kube_deployment_status_replicas_available",
)
DESIRED_GAUGE = "kube_deployment_spec_replicas"
#: ``CapacityDip.source`` when the dip is counted from pod events
FROM_EVENTS = "events"
_PERCENTILES = (0.5, 0.95)


@dataclass(frozen=True)
class VersionLatency:
    """The requests one version's pods served."""

    version: str
    new: bool  # the version the rollout moved to
    pods: int
    requests: int
    ttft_p50: float | None  # seconds
    ttft_p95: float | None
    e2e_p95: float | None
    models: tuple[str, ...] = ()  # model names its requests carried


@dataclass(frozen=True)
class WarmUp:
    """A new pod's first ``window_s`` after Ready against its later requests."""

    pod: str
    ready: float
    window_s: float
    requests: int
    ttft_p95: float | None  # engine TTFT (queue + prefill) in the window, else TTFT
    steady_requests: int
    steady_ttft_p95: float | None  # after the window
    #: engine p95 in each ``WARMUP_BIN_S`` slice of the window (None: too few requests);
    #: empty without engine stages
    profile: tuple[float | None, ...] = ()

    @property
    def slowdown(self) -> float | None:
        """p95 TTFT in the warm-up window over the steady p95 (1: no warm-up penalty)."""
        if self.ttft_p95 is None or not self.steady_ttft_p95:
            return None
        return self.ttft_p95 / self.steady_ttft_p95

    def slow_span(self, threshold: float) -> tuple[float, float] | None:
        """(seconds after Ready, slowdown) of the warm-up: up to the end of the last slice
        whose p95 is at least ``threshold`` x the steady p95, and the mean p95 ratio of the
        slices up to there.  None when no slice is that slow (or nothing to compare)."""
        steady = self.steady_ttft_p95
        if not steady or not self.profile:
            return None
        ratios = [None if p is None else p / steady for p in self.profile]
        slow = [i for i, r in enumerate(ratios) if r is not None and r >= threshold]
        if not slow:
            return None
        span = [r for r in ratios[: slow[-1] + 1] if r is not None]
        return (slow[-1] + 1) * self.window_s / len(self.profile), sum(span) / len(span)


@dataclass(frozen=True)
class CapacityDip:
    """Ready replicas against the desired count while the rollout ran."""

    desired: int
    min_ready: int
    seconds_below: float  # time with fewer ready replicas than desired
    source: str  # the kube-state-metrics gauge it was read from, or FROM_EVENTS

    @property
    def lost(self) -> int:
        return max(0, self.desired - self.min_ready)


@dataclass(frozen=True)
class RolloutAnalysis:
    """What a rolling update did to the capture (see module doc)."""

    start: float
    end: float
    new: str  # the ReplicaSet rolled out
    old: tuple[str, ...]
    pods: tuple[PodLife, ...]
    versions: tuple[VersionLatency, ...]
    warmups: tuple[WarmUp, ...]
    dip: CapacityDip | None
    max_surge: int  # as the first step shows it
    max_unavailable: int
    #: TTFT p95 of the requests that arrived during the rollout, and before it
    ttft_p95_during: float | None = None
    ttft_p95_before: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def new_pods(self) -> tuple[PodLife, ...]:
        return tuple(p for p in self.pods if p.version == self.new)

    @property
    def weight_load_s(self) -> float | None:
        """Median container-start -> Ready of the new pods (model-swap weight loading)."""
        loads = sorted(x for p in self.new_pods if (x := p.load_s) is not None)
        return loads[len(loads) // 2] if loads else None

    @property
    def model_swap(self) -> bool:
        """The versions served different model names."""
        return len({m for v in self.versions for m in v.models}) > 1

    def to_dict(self) -> dict[str, Any]:
        """JSON form: milliseconds for latencies, unix seconds for times."""
        return {
            "start": self.start,
            "end": self.end,
            "duration_s": round(self.end - self.start, 3),
            "new_replicaset": self.new,
            "old_replicasets": list(self.old),
            "max_surge": self.max_surge,
            "max_unavailable": self.max_unavailable,
            "weight_load_s": _round(self.weight_load_s),
            "model_swap": self.model_swap,
            "ttft_p95_during_ms": _ms(self.ttft_p95_during),
            "ttft_p95_before_ms": _ms(self.ttft_p95_before),
            "capacity_dip": None
            if self.dip is None
            else {
                "desired": self.dip.desired,
                "min_ready": self.dip.min_ready,
                "lost": self.dip.lost,
                "seconds_below": round(self.dip.seconds_below, 3),
                "source": self.dip.source,
            },
            "versions": [
                {
                    "replicaset": v.version,
                    "new": v.new,
                    "pods": v.pods,
                    "requests": v.requests,
                    "ttft_p50_ms": _ms(v.ttft_p50),
                    "ttft_p95_ms": _ms(v.ttft_p95),
                    "e2e_p95_ms": _ms(v.e2e_p95),
                    "models": list(v.models),
                }
                for v in self.versions
            ],
            "warmups": [
                {
                    "pod": w.pod,
                    "ready": w.ready,
                    "window_s": w.window_s,
                    "requests": w.requests,
                    "ttft_p95_ms": _ms(w.ttft_p95),
                    "steady_requests": w.steady_requests,
                    "steady_ttft_p95_ms": _ms(w.steady_ttft_p95),
                    "slowdown": _round(w.slowdown),
                }
                for w in self.warmups
            ],
            "pods": [
                {
                    "pod": p.pod,
                    "replicaset": p.version,
                    "created": p.created,
                    "ready": p.ready,
                    "killed": p.killed,
                    "load_s": _round(p.load_s),
                }
                for p in self.pods
            ],
            "notes": list(self.notes),
        }


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000.0, 3)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _rollout_versions(
    lives: Sequence[PodLife], served: set[str]
) -> tuple[str, tuple[str, ...]] | None:
    """(new, old) ReplicaSets: the newest version whose pods were created in the capture,
    and the versions whose pods it replaced (stopped, or serving before it)."""
    by_version: dict[str, list[PodLife]] = {}
    for p in lives:
        by_version.setdefault(p.version, []).append(p)
    for rs in served:
        by_version.setdefault(rs, [])
    if len(by_version) < 2:
        return None

    def first_created(rs: str) -> float:
        created = [p.created for p in by_version[rs] if p.created is not None]
        return min(created) if created else -math.inf

    new = max(by_version, key=first_created)
    if first_created(new) == -math.inf:
        return None
    start = first_created(new)
    old = tuple(
        sorted(
            rs
            for rs, pods in by_version.items()
            if rs != new
            and (
                any(p.killed is not None and p.killed >= start - 1.0 for p in pods)
                or first_created(rs) < start
            )
        )
    )
    return (new, old) if old else None


# -- the analysis ----------------------------------------------------------------------------
def analyze_rollout(store: Store) -> RolloutAnalysis | None:
    """The rolling update the capture shows, or None (see module doc)."""
    lives = pod_lives(store)
    owners = {p.pod: p.version for p in lives}
    replicas = _served(store, owners)
    # a pod that served with no owner shown (created before the capture, named without its
    # ReplicaSet) is no version of its own
    shown = {rs for pod, rs in replicas.items() if owner_shown(pod, owners)}
    versions = _rollout_versions(lives, shown)
    if versions is None:
        return None
    new, old = versions
    new_pods = [p for p in lives if p.version == new]
    old_pods = [p for p in lives if p.version in old]
    start = min(
        [p.created for p in new_pods if p.created is not None]
        + [p.killed for p in old_pods if p.killed is not None]
    )
    ends = [p.ready for p in new_pods if p.ready is not None]
    ends += [p.killed for p in old_pods if p.killed is not None]
    end = max(ends) if ends else start
    surge, unavailable = _first_step(new_pods, old_pods, start)
    case = _version_case(replicas)
    notes: list[str] = []
    if not any(p.ready for p in new_pods):
        notes.append("no new pod turned Ready in the capture: the rollout had not finished")
    return RolloutAnalysis(
        start=start,
        end=end,
        new=new,
        old=old,
        pods=tuple(p for p in lives if p.version in (new, *old)),
        versions=_by_version(store, case, new, lives),
        warmups=tuple(w for p in new_pods if (w := _warmup(store, p)) is not None),
        dip=_dip(store, start, end, lives, old),
        max_surge=surge,
        max_unavailable=unavailable,
        ttft_p95_during=_ttft_p95(
            store, f"arrival >= {literal(start)} AND arrival < {literal(end)}"
        )[1],
        ttft_p95_before=_ttft_p95(store, f"arrival < {literal(start)}")[1],
        notes=tuple(notes),
    )


def _served(store: Store, owners: Mapping[str, str]) -> dict[str, str]:
    """Every replica that served requests -> its ReplicaSet."""
    rows = store.query(
        "SELECT DISTINCT replica FROM requests WHERE replica IS NOT NULL"
    ).to_pylist()
    return {str(r["replica"]): replicaset_of(str(r["replica"]), owners) for r in rows}


def _first_step(
    new_pods: Sequence[PodLife], old_pods: Sequence[PodLife], start: float
) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as the first step shows them: before the first new pod is
    Ready, the controller may only stop ``maxUnavailable`` old pods and create ``maxSurge``
    pods beyond them."""
    readies = [p.ready for p in new_pods if p.ready is not None]
    first_ready = min(readies) if readies else math.inf
    created = sum(1 for p in new_pods if p.created is not None and p.created < first_ready)
    stopped = sum(
        1 for p in old_pods if p.killed is not None and start - 1.0 <= p.killed < first_ready
    )
    return max(0, created - stopped), stopped


def _version_case(replicas: Mapping[str, str]) -> str:
    """SQL mapping ``replica`` to its ReplicaSet."""
    arms = " ".join(f"WHEN {literal(p)} THEN {literal(rs)}" for p, rs in sorted(replicas.items()))
    return f"CASE replica {arms} ELSE replica END" if arms else "replica"


def _by_version(
    store: Store, case: str, new: str, lives: Sequence[PodLife]
) -> tuple[VersionLatency, ...]:
    d = dialect_of(store)
    ttft = "coalesce(ttft, first_token - arrival)"
    e2e = "coalesce(e2e, finish - arrival)"
    ok = "status = 'ok' AND replica IS NOT NULL"
    rows = store.query(
        f"SELECT {case} AS rs, count(*) AS n, {d.quantiles(ttft, _PERCENTILES)} AS t, "
        f"{d.quantile(e2e, 0.95)} AS e, count(DISTINCT replica) AS pods "
        f"FROM requests WHERE {ok} GROUP BY rs ORDER BY rs"
    ).to_pylist()
    models: dict[str, set[str]] = {}
    for r in store.query(
        f"SELECT DISTINCT {case} AS rs, model FROM requests WHERE {ok} AND model IS NOT NULL"
    ).to_pylist():
        models.setdefault(str(r["rs"]), set()).add(str(r["model"]))
    out = []
    for r in rows:
        n, rs = int(r["n"]), str(r["rs"])
        enough = n >= MIN_REQUESTS
        t = list(r["t"] or [None, None])
        out.append(
            VersionLatency(
                version=rs,
                new=rs == new,
                pods=max(int(r["pods"]), sum(1 for p in lives if p.version == rs)),
                requests=n,
                ttft_p50=_num(t[0]) if enough else None,
                ttft_p95=_num(t[1]) if enough else None,
                e2e_p95=_num(r["e"]) if enough else None,
                models=tuple(sorted(models.get(rs, ()))),
            )
        )
    return tuple(out)


def _num(v: object) -> float | None:
    if v is None:
        return None
    x = float(str(v))
    return None if math.isnan(x) else x


def _ttft_p95(store: Store, where: str, replica: str | None = None) -> tuple[int, float | None]:
    d = dialect_of(store)
    pod = f" AND replica = {literal(replica)}" if replica is not None else ""
    row = store.query(
        f"SELECT count(*) AS n, {d.quantile('coalesce(ttft, first_token - arrival)', 0.95)} AS q "
        f"FROM requests WHERE status = 'ok' AND {where}{pod}"
    ).to_pylist()[0]
    n = int(row["n"])
    return n, (_num(row["q"]) if n >= MIN_REQUESTS else None)


def _engine_ttft_p95(
    store: Store, pod: str, lo: float, hi: float | None
) -> tuple[int, float | None]:
    """Count and p95 of the pod's time in the engine before the first token (engine queue +
    prefill) for requests arriving in [lo, hi) (no end: None): what a cold engine slows, without the wait
    at the gateway that the rollout's lost capacity causes everywhere."""
    d = dialect_of(store)
    row = store.query(
        f"SELECT count(*) AS n, {d.quantile('x', 0.95)} AS q FROM ("
        "SELECT r.request_id, sum(s.duration) AS x FROM requests AS r "
        "JOIN stages AS s ON s.request_id = r.request_id "
        f"WHERE r.status = 'ok' AND r.replica = {literal(pod)} AND r.arrival >= {literal(lo)} "
        f"AND {'TRUE' if hi is None else f'r.arrival < {literal(hi)}'} AND s.stage IN ('engine_queue', 'prefill') "
        "GROUP BY r.request_id) AS t"
    ).to_pylist()[0]
    n = int(row["n"])
    return n, (_num(row["q"]) if n >= MIN_REQUESTS else None)


def _warmup(store: Store, pod: PodLife) -> WarmUp | None:
    if pod.ready is None:
        return None
    cut = pod.ready + WARMUP_WINDOW_S
    n, p95 = _engine_ttft_p95(store, pod.pod, pod.ready, cut)
    m, steady = _engine_ttft_p95(store, pod.pod, cut, None)
    if n == 0 and m == 0:  # no engine stages: the request's own TTFT
        n, p95 = _ttft_p95(
            store, f"arrival >= {literal(pod.ready)} AND arrival < {literal(cut)}", pod.pod
        )
        m, steady = _ttft_p95(store, f"arrival >= {literal(cut)}", pod.pod)
        return WarmUp(pod.pod, pod.ready, WARMUP_WINDOW_S, n, p95, m, steady)
    edges = [pod.ready + k * WARMUP_BIN_S for k in range(round(WARMUP_WINDOW_S / WARMUP_BIN_S))]
    profile = tuple(_engine_ttft_p95(store, pod.pod, lo, lo + WARMUP_BIN_S)[1] for lo in edges)
    return WarmUp(pod.pod, pod.ready, WARMUP_WINDOW_S, n, p95, m, steady, profile)


# -- the capacity dip ------------------------------------------------------------------------
def _dip(
    store: Store, start: float, end: float, lives: Sequence[PodLife], old: Sequence[str]
) -> CapacityDip | None:
    """From kube-state-metrics when the capture has the gauges, else from the pod events."""
    desired = _gauge(store, DESIRED_GAUGE, start, end)
    for metric in READY_GAUGES:
        ready = _gauge(store, metric, start, end)
        if not ready:
            continue
        want = int(max(v for _, v in desired)) if desired else int(ready[0][1])
        below = sum(b[0] - a[0] for a, b in pairwise(ready) if a[1] < want)
        return CapacityDip(want, int(min(v for _, v in ready)), below, metric)
    return _dip_from_events(start, end, lives, old)


def _gauge(store: Store, metric: str, start: float, end: float) -> list[tuple[float, float]]:
    """The gauge's samples from the last one before ``start`` to ``end`` (summed over series
    at each time: one Deployment per capture is the common case)."""
    rows = store.query(
        "SELECT time, sum(value) AS v FROM series "
        f"WHERE metric = {literal(metric)} AND time <= {literal(end)} GROUP BY time ORDER BY time"
    ).to_pylist()
    pts = [(float(r["time"]), float(r["v"])) for r in rows]
    before = [p for p in pts if p[0] < start]
    return before[-1:] + [p for p in pts if p[0] >= start]


def _dip_from_events(
    start: float, end: float, lives: Sequence[PodLife], old: Sequence[str]
) -> CapacityDip | None:
    """Ready pods over time: old pods ready from before the rollout leave at Killing, new
    pods join at Ready."""
    serving = [p for p in lives if p.version in old and (p.killed is None or p.killed >= start)]
    if not serving:
        return None
    want = len(serving)
    steps = sorted(
        [(p.killed, -1) for p in serving if p.killed is not None]
        + [(p.ready, +1) for p in lives if p.version not in old and p.ready is not None]
    )
    count, low, below, last = want, want, 0.0, start
    for t, delta in steps:
        if count < want:
            below += max(0.0, min(t, end) - last)
        count += delta
        last = max(last, t)
        low = min(low, count)
    return CapacityDip(want, low, below, FROM_EVENTS)
