"""Capture or Store -> Report of kind "analyze": the tail analysis, wired (triage calls it first).

``analyze(source, slos)`` runs the SQL scans on the Store ``open_input`` gave (ClickHouse, or
DuckDB over a Capture) or on an embedded DuckDB over a Capture passed as is;
``analyze_store(store, slos)`` is the same analysis over a bare SQL Store (no input metadata)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from tailtriage.analyses.combine import combine
from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.rollout import analyze_rollout
from tailtriage.analyses.slo import parse_slos
from tailtriage.analyses.tail import TailAnalysis, TailOptions, analyze_tail
from tailtriage.model import Capture, Metadata
from tailtriage.model.metric_catalog import names_for
from tailtriage.report import Charts, DataQuality, Report
from tailtriage.report_sections import (
    AnalysisSection,
    AttributionSummary,
    EdgeEngineRow,
    EngineHistograms,
    Sections,
    rollout_from,
)
from tailtriage.store import InputStore, Store, opened


def analyze(
    source: Capture | InputStore,
    slos: Sequence[SloSpec] | str,
    *,
    incident: tuple[float, float] | None = None,
    baseline: tuple[float, float] | None = None,
    options: TailOptions | None = None,
) -> Report:
    """The analyze Report of ``source`` against ``slos`` (specs or ``"p95 ttft < 500ms"``)."""
    specs = parse_slos(slos) if isinstance(slos, str) else tuple(slos)
    opts = options or TailOptions()
    if incident is not None or baseline is not None:
        opts = TailOptions(
            incident=incident or opts.incident,
            baseline=baseline or opts.baseline,
            bin_width=opts.bin_width,
            seed=opts.seed,
            max_population=opts.max_population,
        )
    with opened(source) as store:
        return analyze_store(store, specs, opts, metadata=store.metadata)


def analyze_store(
    store: Store,
    slos: Sequence[SloSpec],
    options: TailOptions | None = None,
    metadata: Metadata | None = None,
) -> Report:
    """The analyze Report over any Store (the logical tables as SQL)."""
    opts = options or TailOptions()
    combined = combine(store, analyze_tail(store, slos, opts), slos, opts)
    tail = combined.tail
    report = report_from_tail(tail, data_quality(store, metadata or Metadata(), tail))
    events, series = timeline(store)
    charts = dataclasses.replace(report.charts, events=events, series=series)
    sections = report.sections
    if combined.metrics_only or combined.comparisons:
        engine = EngineHistograms(
            metrics_only=combined.metrics_only,
            edge_vs_engine=tuple(
                EdgeEngineRow(
                    metric=c.metric,
                    percentile=c.percentile,
                    edge=c.edge,
                    engine=c.engine,
                    before_engine=c.before_engine,
                    engine_histogram=c.engine_family,
                )
                for c in combined.comparisons
            ),
        )
        sections = dataclasses.replace(sections, engine_histograms=engine)
    rollout = analyze_rollout(store)
    if rollout is not None:
        sections = dataclasses.replace(sections, rollout=rollout_from(rollout.to_dict()))
    return dataclasses.replace(report, charts=charts, sections=sections)


#: series drawn on the events time axis: chart name -> catalog concept (summed over pods)
_TIMELINE_SERIES: Mapping[str, str] = {
    "hpa_replicas": "hpa_current_replicas",
    "hpa_desired_replicas": "hpa_desired_replicas",
    "queue_depth": "requests_waiting",
    "running_batch": "requests_running",
}
_MAX_EVENTS = 300


def timeline(
    store: Store,
) -> tuple[tuple[tuple[float, str, str, str], ...], dict[str, tuple[tuple[float, float], ...]]]:
    """Kubernetes events and the scaling/queue series, for the chart that puts them on one
    time axis (aggregated in SQL: one value per scrape time, summed over pods)."""
    rows = store.query(
        "SELECT time, kind, coalesce(object_name, '') AS obj, coalesce(message, '') AS msg "
        f"FROM events ORDER BY time, kind, obj, msg LIMIT {_MAX_EVENTS}"
    ).to_pylist()
    events = tuple((float(r["time"]), str(r["kind"]), str(r["obj"]), str(r["msg"])) for r in rows)
    series: dict[str, tuple[tuple[float, float], ...]] = {}
    for chart, concept in _TIMELINE_SERIES.items():
        names = {n for name in names_for(concept) for n in (name, name.replace(":", "_"))}
        listed = ", ".join("'" + n.replace("'", "''") + "'" for n in sorted(names))
        pts = store.query(
            f"SELECT time, sum(value) AS v FROM series WHERE metric IN ({listed}) "
            "GROUP BY time ORDER BY time"
        ).to_pylist()
        if pts:
            series[chart] = tuple((float(p["time"]), float(p["v"])) for p in pts)
    return events, series


def data_quality(store: Store, metadata: Metadata, tail: TailAnalysis | None = None) -> DataQuality:
    """Counts, the unattributed share of stage time, skipped files and every warning."""
    row = store.query(
        "SELECT (SELECT count(*) FROM requests) AS requests, (SELECT count(*) FROM spans) AS spans, "
        "(SELECT count(*) FROM series) AS series, (SELECT count(*) FROM events) AS events, "
        "(SELECT sum(duration) FROM stages) AS staged, "
        "(SELECT sum(duration) FROM stages WHERE stage = 'unattributed') AS unattributed"
    ).to_pylist()[0]
    staged = float(row["staged"] or 0.0)
    warnings = list(metadata.warnings)
    if tail is not None:
        warnings += [*tail.warnings, *tail.notes]
    return DataQuality(
        requests=int(row["requests"] or 0),
        spans=int(row["spans"] or 0),
        unattributed_share=float(row["unattributed"] or 0.0) / staged if staged > 0 else 0.0,
        skipped_files=tuple({"path": s.path, "reason": s.reason} for s in metadata.skipped_files),
        warnings=tuple(dict.fromkeys(warnings)),
        series=int(row["series"] or 0),
        events=int(row["events"] or 0),
        clock_adjustments=len(metadata.clock_adjustments),
        counts=dict(metadata.quality),
    )


def _replicas(tail: TailAnalysis) -> dict[str, dict[str, float]]:
    for b in tail.breakdowns:
        if b.dimension == "replica":
            return {
                r.key: {
                    "count": float(r.count),
                    "tail_share": r.tail_share,
                    **{f"{b.metric}_p{p:g}": v for p, v in r.values},
                }
                for r in b.rows
            }
    return {}


def _analysis(tail: TailAnalysis) -> AnalysisSection:
    a = tail.attribution
    return AnalysisSection(
        series_metric=tail.series_metric,
        bin_width_s=tail.bin_width,
        definitions=dict(tail.definitions),
        counts=dict(tail.counts),
        baseline_percentiles={m: dict(vals) for m, vals in tail.baseline_percentiles.items()},
        breakdowns=tail.breakdowns,
        attribution=None
        if a is None
        else AttributionSummary(
            metric=a.metric,
            percentile=a.percentile,
            observed=a.observed,
            baseline=a.baseline,
            resampled_baseline=a.resampled_baseline,
            seed=a.seed,
            population=a.population,
        ),
        notes=tuple(tail.notes),
    )


def report_from_tail(tail: TailAnalysis, quality: DataQuality, kind: str = "analyze") -> Report:
    """Put a TailAnalysis into the Report every renderer reads."""
    charts = Charts(
        percentile_series=tail.series,
        cdfs=dict(tail.cdfs),
        waterfall=tail.waterfall,
        waterfall_request_id=tail.waterfall_request_id,
        replicas=_replicas(tail),
    )
    return Report(
        kind=kind,
        slos=tail.slos,
        windows=tail.windows,
        decomposition=tail.decomposition,
        data_quality=quality,
        charts=charts,
        stage_percentiles=_finite(tail.stage_percentiles),
        attribution={} if tail.attribution is None else tail.attribution.as_mapping(),
        percentiles=_finite(tail.percentiles),
        throughput=dict(tail.throughput),
        sections=Sections(analysis=_analysis(tail)),
        title="tailtriage analyze",
    )


def _finite(d: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    return {k: {kk: vv for kk, vv in v.items() if math.isfinite(vv)} for k, v in d.items()}
