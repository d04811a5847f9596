"""Tail decomposition: where the time of the requests at the SLO percentile goes.

A percentile is not additive over stages, so the stages of "the p95 request" are taken from the
requests whose metric lies in a narrow band around the percentile (p94-p96, widened until it holds
enough requests).  Their mean stage durations are made to add up exactly to the observed
percentile in two steps: time of the band's metric that no stage covers is added to
``unattributed`` (never dropped; overlapping stages that exceed it are scaled down), then all
stages are scaled by percentile / band mean, a factor close to 1 because the band is narrow.

Also here: per-stage percentiles (each over the requests that have the stage; not additive) and
the breakdowns of the metric by replica, node, model and prompt-length bucket."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tailtriage.analyses.metrics import MetricSource
from tailtriage.analyses.results import Decomposition, StageMove, StageValue
from tailtriage.model.vocabulary import PRE_FIRST_TOKEN_STAGES, STAGES
from tailtriage.store.base import Store
from tailtriage.store.dialect import dialect_of, literal, window_filter

#: the band is widened (half-width in percentile points) until it holds MIN_BAND requests, or
#: 5 % of the requests (at least MIN_SMALL_BAND) when there are few: with 48 requests a p95 band
#: of 3 requests (p90-p100) says more about the p95 than 10 requests reaching down to p70
BAND_HALF_WIDTHS: tuple[float, ...] = (1.0, 2.0, 3.0, 5.0, 10.0, 25.0, 50.0, 100.0)
MIN_BAND = 10
MIN_SMALL_BAND = 3


def stages_for(metric: str) -> tuple[str, ...]:
    """Stages whose sum is the metric: TTFT = the pre-first-token stages, e2e = all."""
    if metric == "ttft":
        return PRE_FIRST_TOKEN_STAGES
    if metric == "e2e":
        return STAGES
    raise ValueError(f"{metric} is not a sum of stages; decompose ttft or e2e")


@dataclass(frozen=True)
class Band:
    """Requests whose metric lies in [low, high] (the percentiles ``band``) in ``window``."""

    window: tuple[float, float] | None
    band: tuple[float, float]  # percentiles
    low: float  # seconds
    high: float
    count: int

    def filter(self) -> str:
        return (
            f"{window_filter('arrival', self.window)} AND value >= {literal(self.low)} "
            f"AND value <= {literal(self.high)}"
        )


def band_size(n: int) -> int:
    """Requests a band needs around a percentile of ``n`` requests."""
    return min(MIN_BAND, max(MIN_SMALL_BAND, math.ceil(0.05 * n)))


def find_band(
    store: Store,
    source: MetricSource,
    p: float,
    window: tuple[float, float] | None,
    min_count: int | None = None,
) -> Band | None:
    """The narrowest band around the p-th percentile holding ``min_count`` requests (or all)."""
    d = dialect_of(store)
    edges = sorted(
        {max(0.0, p - h) for h in BAND_HALF_WIDTHS} | {min(100.0, p + h) for h in BAND_HALF_WIDTHS}
    )
    where = window_filter("arrival", window)
    row = store.query(
        f"SELECT count(*) AS n, {d.quantiles('value', [e / 100 for e in edges])} AS qs "
        f"FROM ({source.sql}) AS s WHERE {where}"
    ).to_pylist()[0]
    if not row["n"]:
        return None
    n = int(row["n"])
    need = min(min_count or band_size(n), n)
    at = dict(zip(edges, (float(q) for q in row["qs"]), strict=True))
    bands = [(max(0.0, p - h), min(100.0, p + h)) for h in BAND_HALF_WIDTHS]
    counts_sql = ", ".join(
        f"sum(CASE WHEN value >= {literal(at[a])} AND value <= {literal(at[b])} THEN 1 ELSE 0 END)"
        f" AS c{i}"
        for i, (a, b) in enumerate(bands)
    )
    counts = store.query(f"SELECT {counts_sql} FROM ({source.sql}) AS s WHERE {where}").to_pylist()
    for i, (a, b) in enumerate(bands):
        c = int(counts[0][f"c{i}"] or 0)
        if c >= need:
            return Band(window, (a, b), at[a], at[b], c)
    a, b = bands[-1]  # pragma: no cover - the last band holds every request
    return Band(window, (a, b), at[a], at[b], int(row["n"]))


def band_stage_means(
    store: Store, source: MetricSource, band: Band, stages: Sequence[str]
) -> tuple[float, dict[str, float]]:
    """Mean metric of the band, and the mean duration of each stage over the band's requests
    (a request without the stage counts as 0; unknown stage names count as unattributed)."""
    in_band = f"SELECT request_id, value FROM ({source.sql}) AS s WHERE {band.filter()}"
    mean = store.query(f"SELECT avg(value) AS m FROM ({in_band}) AS b").to_pylist()[0]["m"]
    known = ", ".join(literal(s) for s in STAGES)
    rows = store.query(
        f"SELECT CASE WHEN stage IN ({known}) THEN stage ELSE 'unattributed' END AS stage_name, "
        "sum(duration) AS total FROM stages "
        f"WHERE request_id IN (SELECT request_id FROM ({in_band}) AS b) "
        f"AND (stage IN ({', '.join(literal(s) for s in stages)}) OR stage NOT IN ({known})) "
        "GROUP BY stage_name"
    ).to_pylist()
    sums: dict[str, float] = {}
    for r in rows:
        sums[r["stage_name"]] = sums.get(r["stage_name"], 0.0) + float(r["total"] or 0.0)
    return float(mean), {s: sums.get(s, 0.0) / band.count for s in stages}


def fit_to_total(means: Mapping[str, float], band_mean: float, total: float) -> dict[str, float]:
    """Stage shares that add up exactly to ``total`` (see module docstring): uncovered time of
    the band mean becomes ``unattributed``, then the shares are scaled to ``total``."""
    shares = {s: max(0.0, v) for s, v in means.items()}
    covered = math.fsum(shares.values())
    if band_mean - covered > 1e-9 * band_mean:  # float noise is not uncovered time
        shares["unattributed"] = shares.get("unattributed", 0.0) + (band_mean - covered)
    denom = math.fsum(shares.values())
    if not denom > 0 or not math.isfinite(denom):
        return {"unattributed": total}
    out = {s: total * (v / denom) for s, v in shares.items()}
    # the float residue goes to the largest share so the sum is exact to the last bit it can be
    biggest = max(out, key=lambda s: out[s])
    out[biggest] += total - math.fsum(out.values())
    return out


@dataclass(frozen=True)
class BandShares:
    band: Band
    shares: dict[str, float]  # stage -> seconds, summing to the percentile
    percentile_value: float


def band_shares(
    store: Store,
    source: MetricSource,
    p: float,
    percentile_value: float,
    window: tuple[float, float] | None,
) -> BandShares | None:
    """Stage shares of the p-th percentile over ``window`` (None without requests)."""
    band = find_band(store, source, p, window)
    if band is None or band.count == 0:
        return None
    stages = stages_for(source.metric)
    mean, means = band_stage_means(store, source, band, stages)
    return BandShares(band, fit_to_total(means, mean, percentile_value), percentile_value)


def decompose(
    metric: str,
    p: float,
    incident: BandShares,
    baseline: BandShares | None,
) -> Decomposition:
    """The Decomposition result: stages present in either window, in path order."""
    present = [
        s
        for s in STAGES
        if incident.shares.get(s, 0.0) > 0 or (baseline and baseline.shares.get(s, 0.0) > 0)
    ]
    return Decomposition(
        metric=metric,
        percentile=p,
        total=incident.percentile_value,
        stages=tuple(
            StageValue(
                s,
                incident.shares.get(s, 0.0),
                None if baseline is None else baseline.shares.get(s, 0.0),
            )
            for s in present
        ),
        band=incident.band.band,
        count=incident.band.count,
        baseline_total=None if baseline is None else baseline.percentile_value,
        baseline_count=0 if baseline is None else baseline.band.count,
    )


def reclassify(d: Decomposition, moves: Sequence[StageMove]) -> Decomposition:
    """``d`` with each move's seconds taken from its source stage and added to its target (at
    most what the source holds, so the stages still add up to the percentile), stages in path
    order, the moves that took anything recorded for the report."""
    inc = {s.stage: s.seconds for s in d.stages}
    base = {s.stage: s.baseline_seconds or 0.0 for s in d.stages}
    has_base = d.baseline_total is not None
    done: list[StageMove] = []
    for m in moves:
        got = min(max(m.seconds, 0.0), inc.get(m.source, 0.0))
        b_got = min(max(m.baseline_seconds, 0.0), base.get(m.source, 0.0)) if has_base else 0.0
        if got <= 0 and b_got <= 0:
            continue
        for side, took in ((inc, got), (base, b_got)):
            side[m.source] = side.get(m.source, 0.0) - took
            side[m.target] = side.get(m.target, 0.0) + took
        done.append(dataclasses.replace(m, seconds=got, baseline_seconds=b_got))
    if not done:
        return d
    order = [s for s in STAGES if s in inc] + [s for s in inc if s not in STAGES]
    stages = tuple(
        StageValue(s, inc[s], base.get(s, 0.0) if has_base else None)
        for s in order
        if inc[s] > 0 or base.get(s, 0.0) > 0
    )
    return dataclasses.replace(d, stages=stages, moves=(*d.moves, *done))


def representative_request(
    store: Store, source: MetricSource, band: Band, target: float
) -> str | None:
    """The band's request whose metric is closest to the percentile (ties: smallest id)."""
    rows = store.query(
        f"SELECT request_id FROM ({source.sql}) AS s WHERE {band.filter()} "
        f"ORDER BY abs(value - {literal(target)}), request_id LIMIT 1"
    ).to_pylist()
    return str(rows[0]["request_id"]) if rows else None


def waterfall(store: Store, request_id: str) -> tuple[tuple[str, float, float, str], ...]:
    """(stage, start offset from arrival, duration, span name) of one request, in time order."""
    rid = literal(request_id)
    rows = store.query(  # filtered on both sides: engines do not all push the key through joins
        "SELECT st.stage AS stage, st.start - r.arrival AS offset, st.duration AS duration, "
        "coalesce(st.span_name, st.stage) AS name "
        f"FROM (SELECT * FROM stages WHERE request_id = {rid}) AS st "
        f"JOIN (SELECT request_id, arrival FROM requests WHERE request_id = {rid}) AS r "
        "ON r.request_id = st.request_id ORDER BY st.start, st.stage"
    ).to_pylist()
    return tuple((r["stage"], float(r["offset"]), float(r["duration"]), r["name"]) for r in rows)


def stage_percentiles(
    store: Store,
    ps: Sequence[float],
    window: tuple[float, float] | None,
) -> dict[str, dict[str, float]]:
    """Per stage, percentiles of its duration over the requests in ``window`` that have it.

    Not additive: the p95 of each stage comes from different requests.  One sample per row of
    ``stages`` (the model keeps one row per request and stage; a source that writes several
    rows for one stage gives one sample each)."""
    d = dialect_of(store)
    ok = f"SELECT request_id FROM requests WHERE status = 'ok' AND {window_filter('arrival', window)}"
    rows = store.query(
        f"SELECT stage, count(*) AS n, {d.quantiles('duration', [p / 100 for p in ps])} AS qs "
        f"FROM stages WHERE request_id IN ({ok}) GROUP BY stage"
    ).to_pylist()
    order = {s: i for i, s in enumerate(STAGES)}
    rows.sort(key=lambda r: (order.get(r["stage"], len(order)), r["stage"]))
    return {
        r["stage"]: {f"p{p:g}": float(q) for p, q in zip(ps, r["qs"], strict=True)} for r in rows
    }


@dataclass(frozen=True)
class BreakdownRow:
    key: str
    count: int
    share: float  # of the window's requests
    tail_share: float  # of the window's requests at or above the percentile
    values: tuple[tuple[float, float], ...]  # (percentile, seconds)


@dataclass(frozen=True)
class Breakdown:
    """The metric per group (replica, node, model, prompt bucket), biggest groups first."""

    dimension: str
    metric: str
    rows: tuple[BreakdownRow, ...]


DIMENSIONS: tuple[str, ...] = ("replica", "node", "model", "prompt_bucket")
MAX_GROUPS = 50


def _dimension_expr(store: Store, dimension: str) -> str:
    if dimension == "prompt_bucket":
        d = dialect_of(store)
        return (
            "CASE WHEN prompt_tokens IS NULL THEN -1 ELSE "
            f"{d.to_int('floor(log2(greatest(prompt_tokens, 1)))')} END"
        )
    if dimension not in ("replica", "node", "model"):
        raise ValueError(f"unknown breakdown dimension {dimension!r}")
    return dimension


def _bucket_label(k: int) -> str:
    return "unknown" if k < 0 else f"{2**k}-{2 ** (k + 1) - 1} tokens"


def breakdown(
    store: Store,
    source: MetricSource,
    dimension: str,
    ps: Sequence[float],
    tail_threshold: float,
    window: tuple[float, float] | None,
) -> Breakdown:
    """Percentiles of the metric per group, with each group's share of all and of tail requests
    (a group over-represented in the tail points to imbalance or a workload shift)."""
    d = dialect_of(store)
    key = _dimension_expr(store, dimension)
    rows = store.query(
        f"SELECT {key} AS k, count(*) AS n, "
        f"sum(CASE WHEN value >= {literal(tail_threshold)} THEN 1 ELSE 0 END) AS tail, "
        f"{d.quantiles('value', [p / 100 for p in ps])} AS qs "
        f"FROM ({source.sql}) AS s WHERE {window_filter('arrival', window)} "
        f"GROUP BY k ORDER BY n DESC, k LIMIT {MAX_GROUPS}"
    ).to_pylist()
    total = sum(int(r["n"]) for r in rows) or 1
    tail_total = sum(int(r["tail"] or 0) for r in rows) or 1
    out = []
    for r in rows:
        label = _bucket_label(int(r["k"])) if dimension == "prompt_bucket" else r["k"]
        out.append(
            BreakdownRow(
                key="unknown" if label is None else str(label),
                count=int(r["n"]),
                share=int(r["n"]) / total,
                tail_share=int(r["tail"] or 0) / tail_total,
                values=tuple(zip(ps, (float(q) for q in r["qs"]), strict=True)),
            )
        )
    return Breakdown(dimension, source.metric, tuple(out))
