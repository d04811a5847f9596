"""Per-request latency metrics as SQL relations, and their exact percentiles (docs/metrics.md).

Each metric is a relation ``(request_id, arrival, value, model, replica, node, prompt_tokens)``
over the logical tables; one row per sample.  Only successful requests (``status = 'ok'``)
count towards latency: failed ones are reported as errors, never as fast or slow samples.

* ``ttft``  first token at the edge minus arrival (``requests.ttft``, else
  ``first_token - arrival``);
* ``e2e``   finish minus arrival;
* ``tpot``  per request ``(e2e - ttft) / (output_tokens - 1)``, requests with >= 2 tokens;
* ``itl``   one sample per generated token after the first, from ``token_times``: a chunk of
  ``c`` tokens arriving ``g`` seconds after the previous chunk gives ``c`` samples of ``g / c``.
  Without token times the only definition left is the per-request mean gap (the TPOT formula);
  it is used only under its own name, ``itl_request_mean``, with a warning."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tailtriage.analyses import quantiles as Q
from tailtriage.analyses.results import SloResult, SloSpec
from tailtriage.store.base import Store
from tailtriage.store.dialect import Dialect, dialect_of, window_filter

_TTFT = "coalesce(ttft, first_token - arrival)"
_E2E = "coalesce(e2e, finish - arrival)"
_GROUPS = "model, replica, node, prompt_tokens, output_tokens"

DEFINITIONS: dict[str, str] = {
    "ttft": "ttft: first token at the edge minus arrival, per request",
    "e2e": "e2e: last byte at the edge minus arrival, per request",
    "tpot": "tpot: (e2e - ttft) / (output_tokens - 1), per request with >= 2 output tokens",
    "itl": "itl: one sample per inter-token gap, from token arrival times",
    "itl_request_mean": (
        "itl_request_mean: per-request mean inter-token gap (e2e - ttft) / (output_tokens - 1); "
        "the capture has no token times"
    ),
}
NO_TOKEN_TIMES_WARNING = (
    "no token times in the capture: ITL per gap is unavailable; the value shown is the "
    "per-request mean gap (TPOT formula), which hides stalls inside a request"
)


@dataclass(frozen=True)
class MetricSource:
    """Where a metric's samples come from in this capture."""

    metric: str  # as asked: ttft | itl | tpot | e2e
    definition: str  # key of DEFINITIONS actually used
    sql: str  # relation (request_id, arrival, value, model, replica, node, prompt_tokens, ...)
    per_request: bool  # one sample per request (False: several per request, e.g. ITL gaps)
    warning: str | None = None

    @property
    def description(self) -> str:
        return DEFINITIONS[self.definition]


def request_metrics_sql() -> str:
    """One row per successful request with ttft, e2e and tpot (seconds)."""
    return (
        f"SELECT request_id, arrival, {_GROUPS}, {_TTFT} AS ttft, {_E2E} AS e2e, "
        f"CASE WHEN output_tokens > 1 THEN ({_E2E} - {_TTFT}) / (output_tokens - 1) END AS tpot "
        "FROM requests WHERE status = 'ok'"
    )


def _per_request(column: str) -> str:
    return (
        f"SELECT request_id, arrival, {_GROUPS}, {column} AS value "
        f"FROM ({request_metrics_sql()}) AS rm WHERE {column} IS NOT NULL"
    )


def itl_samples_sql(d: Dialect) -> str:
    """One row per generated token after the first, joined to its request's arrival."""
    prev = d.lag("time", "request_id", "index")
    gaps = (
        f"SELECT request_id, time - {prev} AS gap, tokens, "
        "row_number() OVER (PARTITION BY request_id ORDER BY index) AS rn FROM token_times"
    )
    return (
        f"SELECT g.request_id AS request_id, r.arrival AS arrival, r.model AS model, "
        "r.replica AS replica, r.node AS node, r.prompt_tokens AS prompt_tokens, "
        f"r.output_tokens AS output_tokens, g.gap / g.tokens AS value, "
        f"{d.repeat_rows('g.tokens')} AS copy "
        f"FROM ({gaps}) AS g JOIN requests AS r ON r.request_id = g.request_id "
        "WHERE g.rn > 1 AND g.tokens > 0 AND r.status = 'ok'"
    )


def has_token_times(store: Store) -> bool:
    rows = store.query("SELECT count(*) AS n FROM token_times").column("n").to_pylist()
    return bool(rows and rows[0])


def metric_source(store: Store, metric: str, token_times: bool | None = None) -> MetricSource:
    """The best available definition of ``metric`` in this capture."""
    if metric in ("ttft", "e2e", "tpot"):
        return MetricSource(metric, metric, _per_request(metric), per_request=True)
    if metric != "itl":
        raise ValueError(f"unknown metric {metric!r}")
    if token_times is None:
        token_times = has_token_times(store)
    if token_times:
        return MetricSource("itl", "itl", itl_samples_sql(dialect_of(store)), per_request=False)
    return MetricSource(
        "itl",
        "itl_request_mean",
        _per_request("tpot"),
        per_request=True,
        warning=NO_TOKEN_TIMES_WARNING,
    )


@dataclass(frozen=True)
class MetricPercentiles:
    """Exact percentiles of one metric over one window."""

    source: MetricSource
    count: int
    values: tuple[tuple[float, float], ...]  # (percentile, seconds); NaN when no samples

    def get(self, p: float) -> float:
        for pp, v in self.values:
            if pp == p:
                return v
        raise KeyError(p)


def metric_percentiles(
    store: Store,
    source: MetricSource,
    ps: Sequence[float],
    window: tuple[float, float] | None = None,
) -> MetricPercentiles:
    """Exact percentiles (type 7) of ``source`` over requests arriving in ``window``."""
    d = dialect_of(store)
    ps = tuple(sorted(set(float(p) for p in ps)))
    sql = (
        f"SELECT count(*) AS n, {d.quantiles('value', [p / 100.0 for p in ps])} AS qs "
        f"FROM ({source.sql}) AS s WHERE {window_filter('arrival', window)}"
    )
    row = store.query(sql).to_pylist()[0]
    n = int(row["n"] or 0)
    qs = row["qs"] if n else None
    values = tuple((p, float(q) if qs else math.nan) for p, q in zip(ps, qs or ps, strict=True))
    return MetricPercentiles(source, n, values)


def order_statistic_ci(
    store: Store,
    source: MetricSource,
    p: float,
    n: int,
    window: tuple[float, float] | None = None,
    confidence: float = 0.95,
) -> tuple[float | None, float | None]:
    """The order statistics bounding the p-th percentile of ``n`` samples (seconds)."""
    lo, hi = Q.ci_ranks(n, p, confidence)
    ranks = [r for r in (lo, hi) if r is not None]
    if not ranks:
        return (None, None)
    d = dialect_of(store)
    # type 7 at (r-1)/(n-1) is exactly the r-th order statistic
    fractions = [Q.rank_fraction(r, n) for r in ranks]
    sql = (
        f"SELECT {d.quantiles('value', fractions)} AS qs FROM ({source.sql}) AS s "
        f"WHERE {window_filter('arrival', window)}"
    )
    qs = [float(v) for v in store.query(sql).to_pylist()[0]["qs"]]
    it = iter(qs)
    return (next(it) if lo is not None else None, next(it) if hi is not None else None)


def evaluate_slo(
    store: Store,
    spec: SloSpec,
    window: tuple[float, float] | None,
    token_times: bool | None = None,
) -> SloResult:
    """The SLO's exact percentile over ``window``, its CI, definition and sample warnings."""
    source = metric_source(store, spec.metric, token_times)
    pct = metric_percentiles(store, source, [spec.percentile], window)
    warnings = [w for w in (source.warning, _sample_warning(spec.percentile, pct)) if w]
    if pct.count == 0:
        return SloResult(
            spec, None, False, 0, definition=source.description, warning="; ".join(warnings)
        )
    observed = pct.get(spec.percentile)
    lo, hi = order_statistic_ci(store, source, spec.percentile, pct.count, window)
    return SloResult(
        spec=spec,
        observed=observed,
        breached=observed > spec.threshold,
        count=pct.count,
        ci_low=lo,
        ci_high=hi,
        definition=source.description,
        warning="; ".join(warnings) or None,
    )


def _sample_warning(p: float, pct: MetricPercentiles) -> str | None:
    what = "requests" if pct.source.per_request else "samples"
    if pct.count == 0:
        return f"no {pct.source.metric} {what} in the window"
    return Q.too_few_warning(p, pct.count, what)
