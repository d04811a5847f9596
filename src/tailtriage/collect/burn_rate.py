"""SLO burn rate from an engine's latency histograms, through the Prometheus HTTP API.

An SLO ``p95 ttft < 500ms`` allows 5 % of requests over 500 ms: that 5 % is the error
budget.  Over a window W the bad ratio is ``1 - rate(bucket{le="0.5"}[W]) / rate(count[W])``
and the burn rate is that ratio divided by the budget (1 = spending it exactly as fast as
allowed).  Paging follows the multi-window, multi-burn-rate alerts of the Google SRE
workbook ("Alerting on SLOs"): a long window proves the burn is significant, a short one
that it is still happening.

The threshold must be a bucket boundary; when it is not, the largest boundary below it is
used (more requests count as bad: the alert fires early, never late) and the evaluation
says so."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.analyses.results import SloSpec
from tailtriage.errors import BackendError
from tailtriage.model.metric_catalog import spec as metric_spec
from tailtriage.sources.prometheus_live import instant_query


@dataclass(frozen=True)
class BurnWindow:
    """Page when both windows burn faster than ``factor``."""

    long_s: float
    short_s: float
    factor: float


#: the workbook's paging pairs: 2 % of a 30-day budget in 1 h, 5 % in 6 h
PAGE_WINDOWS = (BurnWindow(3600.0, 300.0, 14.4), BurnWindow(21600.0, 1800.0, 6.0))
#: how far back the histogram's bucket boundaries are looked up
LE_LOOKBACK_S = 3600.0
#: catalog concept of each SLO metric's histogram
HISTOGRAMS = {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e": "e2e_latency"}


@dataclass(frozen=True)
class BurnEvaluation:
    """One evaluation of one SLO."""

    slo: SloSpec
    burn: tuple[tuple[float, float | None], ...]  # (window seconds, burn rate or None)
    breached: bool
    bucket_le: float | None  # the bucket boundary used for the threshold
    note: str = ""


def _names(metric: str) -> tuple[str, ...]:
    concept = HISTOGRAMS.get(metric)
    if concept is None:
        raise BackendError(f"no histogram for {metric} in the metric catalog")
    return metric_spec(concept).names


def _selector(names: tuple[str, ...], part: str, namespace: str | None, extra: str = "") -> str:
    regex = "|".join(f"{n}_{part}" for n in names)
    ns = f',namespace="{namespace}"' if namespace else ""
    return f'{{__name__=~"{regex}"{ns}{extra}}}'


def bucket_boundaries(
    url: str, metric: str, namespace: str | None, at: float, timeout: float
) -> list[tuple[float, str]]:
    """The ``le`` values the engine exports for ``metric``'s histogram, with their spelling
    in the TSDB (``0.5``, ``1`` or ``1.0``), ascending, ``+Inf`` left out."""
    sel = _selector(_names(metric), "bucket", namespace)
    # over the last hour, not the instant: a target that just went away still has its buckets
    query = f"group by (le) (last_over_time({sel}[{LE_LOOKBACK_S:.0f}s]))"
    result = instant_query(url, query, at, timeout) or []
    out = []
    for row in result:
        try:
            text = str(row["metric"]["le"])
            out.append((float(text), text))
        except (KeyError, TypeError, ValueError):
            continue
    return sorted(b for b in out if b[0] != float("inf"))


def evaluate(
    url: str,
    slo: SloSpec,
    at: float,
    *,
    namespace: str | None = None,
    timeout: float = 30.0,
    windows: tuple[BurnWindow, ...] = PAGE_WINDOWS,
) -> BurnEvaluation:
    """The SLO's burn rate over every window at ``at``; breached when a pair pages."""
    names = _names(slo.metric)
    bounds = bucket_boundaries(url, slo.metric, namespace, at, timeout)
    usable = [b for b in bounds if b[0] <= slo.threshold * (1 + 1e-9)]
    if not usable:
        note = f"no {slo.metric} histogram bucket at or below {slo.threshold:g} s"
        return BurnEvaluation(slo, (), False, None, note)
    le, le_text = usable[-1]
    exact = abs(le - slo.threshold) <= 1e-9 * slo.threshold
    note = (
        "" if exact else f"threshold {slo.threshold:g} s is not a bucket boundary; used le={le:g}"
    )
    budget = 1.0 - slo.percentile / 100.0
    rates: dict[float, float | None] = {}
    for w in sorted({s for bw in windows for s in (bw.long_s, bw.short_s)}):
        good = _selector(names, "bucket", namespace, f',le="{le_text}"')
        total = _selector(names, "count", namespace)
        query = f"1 - sum(rate({good}[{w:.0f}s])) / sum(rate({total}[{w:.0f}s]))"
        result = instant_query(url, query, at, timeout) or []
        try:
            ratio = float(result[0]["value"][1])
        except (IndexError, KeyError, TypeError, ValueError):
            ratio = float("nan")
        rates[w] = ratio / budget if ratio == ratio else None  # NaN: no traffic
    breached = any(
        (rates.get(bw.long_s) or 0.0) > bw.factor and (rates.get(bw.short_s) or 0.0) > bw.factor
        for bw in windows
    )
    return BurnEvaluation(slo, tuple(rates.items()), breached, le, note)
