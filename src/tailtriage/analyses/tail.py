"""The whole tail analysis of one capture: one function from a Store and SLOs to frozen results.

Order of work: percentile series per time bin -> incident and baseline windows -> SLO
percentiles over the incident window -> decomposition of the worst ttft/e2e SLO at its
percentile (incident and baseline) -> attribution (counterfactuals, Shapley) -> percentile
tables, per-stage percentiles, breakdowns, CDFs and a representative request for the charts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tailtriage.analyses import attribution as A
from tailtriage.analyses import decomposition as D
from tailtriage.analyses import quantiles as Q
from tailtriage.analyses import windows as W
from tailtriage.analyses.metrics import (
    MetricSource,
    evaluate_slo,
    has_token_times,
    metric_percentiles,
    metric_source,
)
from tailtriage.analyses.results import (
    Attribution,
    Decomposition,
    PercentilePoint,
    SloResult,
    SloSpec,
    Windows,
)
from tailtriage.model.vocabulary import METRICS
from tailtriage.store.base import Store
from tailtriage.store.dialect import dialect_of, window_filter

SERIES_PERCENTILES: tuple[float, ...] = (50.0, 95.0, 99.0)
NO_STAGES_NOTE = (
    "no stage spans for the requests at the p{p:g}: the whole {metric} is unattributed; "
    "trace the gateway, the API server and the engine to see where it goes"
)
TABLE_PERCENTILES = Q.STANDARD_PERCENTILES
#: CDF fractions: every 2 % up to p90, every 0.25 % to p99, every 0.05 % to p100 (101 points,
#: dense where the tail is)
CDF_FRACTIONS: tuple[float, ...] = tuple(
    sorted(
        {round(i * 0.02, 6) for i in range(46)}
        | {round(0.9 + i * 0.0025, 6) for i in range(37)}
        | {round(0.99 + i * 0.0005, 6) for i in range(21)}
    )
)


@dataclass(frozen=True)
class TailOptions:
    """Knobs of :func:`analyze_tail`; the defaults are what the CLI uses."""

    incident: tuple[float, float] | None = None  # given by the user, else detected
    baseline: tuple[float, float] | None = None
    bin_width: float | None = None  # seconds; None: adaptive around 30 s
    seed: int = 0  # pairing of incident and baseline requests in the attribution
    max_population: int = A.MAX_POPULATION


@dataclass(frozen=True)
class TailAnalysis:
    """Everything the analysis found; seconds throughout."""

    slos: tuple[SloResult, ...]
    windows: Windows
    series_metric: str
    series: tuple[PercentilePoint, ...]
    decomposition: Decomposition | None
    attribution: Attribution | None
    #: metric -> {"p50": s, ...} over the incident window (and the baseline window)
    percentiles: Mapping[str, Mapping[str, float]]
    baseline_percentiles: Mapping[str, Mapping[str, float]]
    #: metric -> definition actually used, and sample counts
    definitions: Mapping[str, str]
    counts: Mapping[str, int]
    stage_percentiles: Mapping[str, Mapping[str, float]]
    breakdowns: tuple[D.Breakdown, ...]
    cdfs: Mapping[str, tuple[tuple[float, float], ...]]
    waterfall: tuple[tuple[str, float, float, str], ...] = ()
    waterfall_request_id: str | None = None
    throughput: Mapping[str, float] = field(default_factory=dict)
    bin_width: float = W.DEFAULT_BIN
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _primary(slos: Sequence[SloResult]) -> SloSpec:
    """The SLO to decompose: the worst-breached ttft/e2e one (default p95 ttft)."""
    additive = [s for s in slos if s.spec.metric in ("ttft", "e2e") and s.observed is not None]
    if not additive:
        return SloSpec("ttft", 95.0, float("inf"))
    return max(additive, key=lambda s: (s.breached, (s.observed or 0.0) / s.spec.threshold)).spec


def _pct_table(
    store: Store, sources: Mapping[str, MetricSource], window: tuple[float, float] | None
) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    """metric -> {"p50": s, ...} (metrics with samples only), and metric -> sample count."""
    table, counts = {}, {}
    for m, source in sources.items():
        got = metric_percentiles(store, source, TABLE_PERCENTILES, window)
        counts[m] = got.count
        if got.count:
            table[m] = {f"p{p:g}": v for p, v in got.values}
    return table, counts


def _cdf(
    store: Store, source: MetricSource, window: tuple[float, float]
) -> tuple[tuple[float, float], ...]:
    d = dialect_of(store)
    fractions = list(CDF_FRACTIONS)
    row = store.query(
        f"SELECT count(*) AS n, {d.quantiles('value', fractions)} AS qs FROM ({source.sql}) AS s "
        f"WHERE {window_filter('arrival', window)}"
    ).to_pylist()[0]
    if not row["n"]:
        return ()
    return tuple((float(q), f) for q, f in zip(row["qs"], fractions, strict=True))


def _throughput(store: Store, window: tuple[float, float]) -> dict[str, float]:
    row = store.query(
        "SELECT count(*) AS n, sum(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS ok, "
        "sum(CASE WHEN status = 'ok' THEN coalesce(output_tokens, 0) ELSE 0 END) AS tokens, "
        "min(arrival) AS lo, max(arrival) AS hi "
        f"FROM requests WHERE {window_filter('arrival', window)}"
    ).to_pylist()[0]
    n = int(row["n"] or 0)
    if n == 0:
        return {"requests": 0.0}
    span = max(float(row["hi"]) - float(row["lo"]), 1e-9) if n > 1 else 1.0
    span = min(span, window[1] - window[0]) if n > 1 else window[1] - window[0]
    return {
        "requests": float(n),
        "requests_per_s": n / span,
        "output_tokens_per_s": float(row["tokens"] or 0) / span,
        "error_rate": (n - int(row["ok"] or 0)) / n,
    }


def _deciding(
    slos: Sequence[SloSpec],
    breaches: Sequence[Sequence[bool]],
    series: Sequence[PercentilePoint],
) -> list[int]:
    """Which SLOs' bins decide the incident: the ttft/e2e SLO whose breaching bins hold the
    most requests (a chronic TPOT breach must not swallow an acute TTFT incident), else all."""

    def weight(i: int) -> int:
        return sum(pt.count for pt, hit in zip(series, breaches[i], strict=True) if hit)

    additive = [i for i, s in enumerate(slos) if s.metric in ("ttft", "e2e") and weight(i) > 0]
    return [max(additive, key=weight)] if additive else list(range(len(slos)))


def _windows(
    store: Store,
    slos: Sequence[SloSpec],
    sources: Mapping[str, MetricSource],
    options: TailOptions,
) -> tuple[Windows, tuple[PercentilePoint, ...], str, float, tuple[str, ...]]:
    """The percentile series of the deciding SLO's metric, and the windows."""
    specs = list(slos) or [SloSpec("ttft", 95.0, math.inf)]
    rng = W.arrival_range(store, sources["e2e"]) or W.arrival_range(store, sources[specs[0].metric])
    if rng is None:
        empty = options.incident or (0.0, 0.0)
        lead = specs[0].metric
        return Windows(empty, options.baseline), (), lead, W.DEFAULT_BIN, ("no requests",)
    width = options.bin_width or W.bin_width(rng.count, rng.end - rng.start)
    origin = (rng.start // width) * width
    by_metric: dict[str, tuple[PercentilePoint, ...]] = {}
    for metric in dict.fromkeys(s.metric for s in specs):
        ps = set(SERIES_PERCENTILES) | {s.percentile for s in specs if s.metric == metric}
        by_metric[metric] = W.percentile_series(store, sources[metric], sorted(ps), origin, width)
    aligned = _align(by_metric, width)
    breaches = [W.bin_breaches(aligned[s.metric], [s])[0] for s in specs]
    deciding = _deciding(specs, breaches, aligned[specs[0].metric])
    lead = specs[deciding[0]].metric
    chosen = [breaches[i] for i in deciding]
    if options.incident is not None and options.baseline is not None:
        found = W.DetectedWindows(Windows(options.incident, options.baseline, False))
    elif options.incident is not None:
        found = W.baseline_before(aligned[lead], chosen, options.incident)
    else:
        found = W.detect_windows(aligned[lead], chosen, rng, specs[deciding[0]])
        if options.baseline is not None:
            found = W.DetectedWindows(
                Windows(found.windows.incident, options.baseline, True), found.notes
            )
    return found.windows, by_metric[lead], lead, width, found.notes


def _align(
    by_metric: Mapping[str, Sequence[PercentilePoint]], width: float
) -> dict[str, tuple[PercentilePoint, ...]]:
    """Every metric's series on the same bins (missing bins become empty points)."""
    starts = sorted({pt.start for pts in by_metric.values() for pt in pts})
    out = {}
    for metric, pts in by_metric.items():
        have = {pt.start: pt for pt in pts}
        out[metric] = tuple(have.get(s) or PercentilePoint(s, s + width, 0, ()) for s in starts)
    return out


@dataclass(frozen=True)
class _Tail:
    """Decomposition, attribution and the representative request of the primary SLO."""

    observed: float = math.nan
    count: int = 0
    decomposition: Decomposition | None = None
    attribution: Attribution | None = None
    representative: str | None = None
    waterfall: tuple[tuple[str, float, float, str], ...] = ()


def _observed(
    store: Store, src: MetricSource, p: float, window: tuple[float, float] | None
) -> tuple[float, int]:
    got = metric_percentiles(store, src, [p], window)
    return (got.get(p) if got.count else math.nan), got.count


def _tail_of(
    store: Store, src: MetricSource, primary: SloSpec, windows: Windows, options: TailOptions
) -> _Tail:
    p = primary.percentile
    observed, n = _observed(store, src, p, windows.incident)
    inc = D.band_shares(store, src, p, observed, windows.incident) if n else None
    if inc is None:
        return _Tail(observed, n)
    base, n_base = None, 0
    if windows.baseline is not None:
        b_value, n_base = _observed(store, src, p, windows.baseline)
        base = D.band_shares(store, src, p, b_value, windows.baseline) if n_base else None
    representative = D.representative_request(store, src, inc.band, observed)
    attribution = None
    if base is not None:
        stages = D.stages_for(primary.metric)
        cap = options.max_population
        inc_matrix, base_matrix = A.stage_matrices(
            store,
            src,
            stages,
            [(windows.incident, math.ceil(n / cap)), (base.band.window, math.ceil(n_base / cap))],
        )
        attribution = A.attribute(
            primary.metric,
            p,
            stages,
            inc_matrix,
            base_matrix,
            seed=options.seed,
            max_population=cap,
            exact=(observed, base.percentile_value),
        )
    return _Tail(
        observed=observed,
        count=n,
        decomposition=D.decompose(primary.metric, p, inc, base),
        attribution=attribution,
        representative=representative,
        waterfall=D.waterfall(store, representative) if representative else (),
    )


def analyze_tail(
    store: Store, slos: Sequence[SloSpec], options: TailOptions = TailOptions()
) -> TailAnalysis:
    """Run the whole tail analysis over ``store`` (see module docstring)."""
    tokens = has_token_times(store)
    sources = {m: metric_source(store, m, tokens) for m in METRICS}
    windows, series, lead, width, notes = _windows(store, slos, sources, options)
    results = tuple(evaluate_slo(store, s, windows.incident, tokens) for s in slos)
    warnings = [f"{r.spec}: {r.warning}" for r in results if r.warning]
    primary = _primary(results)
    src = sources[primary.metric]
    tail = _tail_of(store, src, primary, windows, options)
    # without token times "itl" would only repeat tpot under a wrong name: leave it out
    table_sources = {m: s for m, s in sources.items() if s.definition == m}
    percentiles, counts = _pct_table(store, table_sources, windows.incident)
    baseline_pcts = (
        _pct_table(store, table_sources, windows.baseline)[0] if windows.baseline else {}
    )
    breakdowns = (
        tuple(
            D.breakdown(store, src, dim, SERIES_PERCENTILES, tail.observed, windows.incident)
            for dim in D.DIMENSIONS
        )
        if tail.count
        else ()
    )
    d = tail.decomposition
    if d is not None and {s.stage for s in d.stages} == {"unattributed"}:
        notes = (*notes, NO_STAGES_NOTE.format(metric=d.metric, p=d.percentile))
    if sources["itl"].warning and not any(s.metric == "itl" for s in slos):
        notes = (*notes, sources["itl"].warning)
    return TailAnalysis(
        slos=results,
        windows=windows,
        series_metric=lead,
        series=series,
        decomposition=tail.decomposition,
        attribution=tail.attribution,
        percentiles=percentiles,
        baseline_percentiles=baseline_pcts,
        definitions={m: sources[m].description for m in METRICS},
        counts=counts,
        stage_percentiles=D.stage_percentiles(store, SERIES_PERCENTILES, windows.incident),
        breakdowns=breakdowns,
        cdfs={m: c for m, s in table_sources.items() if (c := _cdf(store, s, windows.incident))},
        waterfall=tail.waterfall,
        waterfall_request_id=tail.representative,
        throughput=_throughput(store, windows.incident),
        bin_width=width,
        warnings=tuple(warnings),
        notes=tuple(notes),
    )
