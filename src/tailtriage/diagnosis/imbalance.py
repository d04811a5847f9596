"""Is load spread over replicas more unevenly than the routing's chance spread?

Random and least-request routing leave a natural spread: with a few hundred sampled requests
per replica the busiest carries 10-20 % more than the mean by chance.  Imbalance is claimed
only when it is shown against that chance:

* **request counts** per replica against a multinomial with each replica's share of the
  window it was serving (Pearson chi-square; sampling traces per request keeps the counts
  multinomial, and least-request routing only spreads them less);
* **queue depth / in-flight** per replica (engine gauges) against a Poisson dispersion,
  inflated by :data:`~tailtriage.diagnosis.thresholds.QUEUE_OVERDISPERSION` because queue
  lengths vary more than Poisson counts;

and then only when the tail band (requests at or above the incident's SLO percentile) sits on
the replicas found hot: they hold most of it, and a request there is far likelier to be in it
than one elsewhere (relative risk)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext


@dataclass(frozen=True)
class SpreadTest:
    """One per-replica quantity against its chance spread."""

    signal: str  # "requests" or the gauge's metric name
    statistic: float  # Pearson chi-square / dispersion index (after over-dispersion)
    dof: int
    p_value: float
    ratio: float  # hottest replica over its expectation
    hot: tuple[str, ...]  # replicas significantly above their expectation

    @property
    def significant(self) -> bool:
        return (
            self.p_value < T.IMBALANCE_ALPHA
            and self.ratio >= T.MIN_IMBALANCE_RATIO
            and bool(self.hot)
        )


@dataclass(frozen=True)
class Imbalance:
    """The tests run, and where the tail band sits."""

    tests: tuple[SpreadTest, ...]
    hot: tuple[str, ...]  # union of the hot replicas of the significant tests
    tail_share: float | None  # share of the tail band served by the hot replicas
    request_share: float | None  # share of all requests they served
    #: how many times likelier a request on a hot replica is in the tail than one elsewhere
    tail_risk: float | None = None

    @property
    def shown(self) -> SpreadTest | None:
        """The most significant test that passed, else None."""
        ok = [t for t in self.tests if t.significant]
        return min(ok, key=lambda t: t.p_value) if ok else None

    @property
    def proven(self) -> bool:
        return (
            self.shown is not None
            and self.tail_share is not None
            and self.tail_share >= T.TAIL_ON_HOT_MIN
            and self.tail_risk is not None
            and self.tail_risk >= T.TAIL_RISK_MIN
        )


def pearson(
    observed: Mapping[str, float], expected: Mapping[str, float], dispersion: float, signal: str
) -> SpreadTest | None:
    """Pearson statistic of ``observed`` against ``expected`` (same keys), divided by
    ``dispersion``; None with fewer than two replicas."""
    keys = sorted(k for k in observed if expected.get(k, 0.0) > 0)
    if len(keys) < 2:
        return None
    o = np.array([observed[k] for k in keys], dtype=float)
    e = np.array([expected[k] for k in keys], dtype=float)
    resid = (o - e) / np.sqrt(e * dispersion)
    stat = float(np.sum(resid**2))
    dof = len(keys) - 1
    hot = tuple(k for k, r in zip(keys, resid, strict=True) if r > T.HOT_REPLICA_Z)
    return SpreadTest(
        signal=signal,
        statistic=stat,
        dof=dof,
        p_value=float(stats.chi2.sf(stat, dof)),
        ratio=float(np.max(o / e)),
        hot=hot,
    )


_COUNTS_SQL = """
SELECT replica,
       sum(CASE WHEN arrival >= ? AND arrival < ? THEN 1 ELSE 0 END) AS n,
       sum(CASE WHEN arrival >= ? AND arrival < ? AND {col} >= ? THEN 1 ELSE 0 END) AS tail,
       min(arrival) AS first_seen, max(arrival) AS last_seen
FROM requests WHERE replica IS NOT NULL GROUP BY replica
"""


def _count_test(
    rows: list[dict[str, object]], lo: float, hi: float
) -> tuple[SpreadTest | None, dict[str, int]]:
    """Requests per replica against a multinomial weighted by the time each served."""
    counts = {str(r["replica"]): int(r["n"] or 0) for r in rows}  # type: ignore[call-overload]
    exposure = {
        str(r["replica"]): max(
            min(float(r["last_seen"]), hi) - max(float(r["first_seen"]), lo),  # type: ignore[arg-type]
            0.0,
        )
        for r in rows
    }
    total_n, total_t = sum(counts.values()), sum(exposure.values())
    if total_n < T.MIN_IMBALANCE_REQUESTS or total_t <= 0:
        return None, counts
    expected = {k: total_n * t / total_t for k, t in exposure.items() if t > 0}
    return pearson(counts, expected, 1.0, "requests"), counts


def _joined_late(ctx: DiagnosisContext) -> frozenset[str]:
    """Pods that became Ready inside the incident window (pod conditions' ``cold_start`` rows:
    at scheduling, their duration to Ready): an exporter may be scraped from container start,
    so such a pod has a full window of samples while it served only part of it."""
    lo, hi = ctx.windows.incident
    return frozenset(
        e.object_name
        for e in ctx.signals.events
        if e.kind == "cold_start"
        and e.object_name
        and e.time <= hi
        and e.time + (e.duration or 0.0) > lo
    )


def _gauge_test(ctx: DiagnosisContext, signal: str) -> SpreadTest | None:
    """Per-replica gauge means against their common mean, over the replicas that served the
    whole window: one that joined mid-window (a cold start, a rollout's new pod) ramps from
    empty and one that left drained, so their means differ by construction, not by routing.
    A replica joined late when it has fewer samples than the others or became Ready inside
    the window."""
    g = ctx.signals.incident.gauge(signal)
    if g is None or len(g.per_replica_mean) < 2:
        return None
    full = max(g.per_replica_samples.values(), default=0)
    late = _joined_late(ctx)
    vals = {
        k: v
        for k, v in g.per_replica_mean.items()
        if g.per_replica_samples.get(k, full) >= T.FULL_WINDOW_SAMPLES * full and k not in late
    }
    if len(vals) < 2:
        return None
    mean = sum(vals.values()) / len(vals)
    if mean < T.MIN_MEAN_QUEUE:
        return None
    return pearson(vals, dict.fromkeys(vals, mean), T.QUEUE_OVERDISPERSION, g.metric)


def imbalance(ctx: DiagnosisContext) -> Imbalance:
    """Every imbalance test the capture allows, and the tail band's place."""
    lo, hi = ctx.windows.incident
    tests = [t for t in (_gauge_test(ctx, "queue_waiting"), _gauge_test(ctx, "running")) if t]
    counts: dict[str, int] = {}
    tail: dict[str, int] = {}
    metric = ctx.decomposition.metric if ctx.decomposition is not None else "ttft"
    col = metric if metric in ("ttft", "e2e") else "ttft"
    slo = ctx.slo(col)
    if ctx.store is not None:
        # no percentile to cut at: no request counts as tail (a finite literal: ClickHouse)
        cut = slo.observed if slo is not None and slo.observed is not None else sys.float_info.max
        rows = ctx.store.query(_COUNTS_SQL.format(col=col), [lo, hi, lo, hi, cut]).to_pylist()
        count_test, counts = _count_test(rows, lo, hi)
        if count_test is not None:
            tests.append(count_test)
        tail = {str(r["replica"]): int(r["tail"] or 0) for r in rows}
    hot = tuple(sorted({h for t in tests if t.significant for h in t.hot}))
    tail_total, n_total = sum(tail.values()), sum(counts.values())
    tail_share = request_share = risk = None
    if hot and tail_total > 0 and n_total > 0:
        t_hot, n_hot = sum(tail.get(h, 0) for h in hot), sum(counts.get(h, 0) for h in hot)
        tail_share, request_share = t_hot / tail_total, n_hot / n_total
        # the relative risk needs requests elsewhere to compare with: when the hot replicas
        # served (nearly) every traced request, the tail sits on them by construction
        if n_total - n_hot >= T.MIN_IMBALANCE_COMPARISON:
            rest = (tail_total - t_hot) / (n_total - n_hot)
            risk = (t_hot / max(n_hot, 1)) / rest if rest > 0 else float("inf")
    return Imbalance(tuple(tests), hot, tail_share, request_share, risk)
