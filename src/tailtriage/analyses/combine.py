"""Requests and engine histograms together: which answers, and where they disagree.

* No request has the SLO's metric (a bundle of Prometheus files and kubectl output): the
  whole analysis comes from the engine histograms (``engine_metrics.analyze_histograms``).
* Requests without token times and an ITL SLO: the per-request mean gap hides stalls, the
  engine's per-gap ITL histogram does not, so the ITL SLO comes from the histogram.
* Both: the request percentiles stand (they are what the user sees), and the engine's own
  percentile over the same window is set beside them.  Edge TTFT minus engine TTFT is the time
  before the engine saw the request: gateway, pending capacity, API server.
* Traces too sparse to place the incident (fewer traced requests per time bin than a p95
  needs, and no breach with a healthy stretch before it found): where the engine's full-rate
  histograms find one, those windows are the incident and baseline, and the requests are
  analysed over them.  Where the requests did place an incident it stands, even if sparse:
  tried on the corpus, moving it to the engine's windows placed them better but ranked causes
  worse (tuning top-1 46 -> 44 of 72)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tailtriage.analyses.engine_metrics import (
    EngineHistograms,
    analyze_histograms,
    find_histograms,
    slo_result,
)
from tailtriage.analyses.quantiles import min_count
from tailtriage.analyses.results import SloResult, SloSpec
from tailtriage.analyses.tail import TailAnalysis, TailOptions, analyze_tail
from tailtriage.store.base import Store

#: traced requests per time bin below which the traces cannot place a p95 breach: the fewest
#: samples whose p95 has a two-sided 95 % confidence interval (72)
SPARSE_TRACES_PER_BIN = min_count(95.0)
SPARSE_WINDOWS_NOTE = (
    "the traces are too sparse to place the incident ({per_bin:.0f} traced requests per "
    "{width:g} s bin, {need} needed for a p95): the incident and baseline windows come from the "
    "engine's full-rate {metric} histogram"
)
#: edge and engine percentiles "disagree" when the edge exceeds the engine by this share
DISAGREE_SHARE = 0.1
ITL_FROM_HISTOGRAM_NOTE = (
    "ITL from the engine's per-gap histogram ({family}): the capture has no token times, and "
    "the per-request mean gap would hide stalls inside a request"
)


@dataclass(frozen=True)
class EdgeVsEngine:
    """One latency percentile seen at the edge (requests) and by the engine (histogram)."""

    metric: str
    percentile: float
    edge: float
    engine: float
    engine_family: str
    engine_upper: float = math.inf  # the top of the bucket holding the engine's percentile

    @property
    def before_engine(self) -> float:
        """Edge minus engine: gateway + pending + API-server share (seconds, >= 0 when the
        clocks agree)."""
        return self.edge - self.engine

    @property
    def disagrees(self) -> bool:
        """The edge is above everything the engine's bucket allows, by a real share."""
        return self.edge > self.engine_upper and self.before_engine > DISAGREE_SHARE * self.edge

    def sentence(self) -> str:
        p = f"p{self.percentile:g}"
        return (
            f"{p} {self.metric} is {self.edge * 1000:.0f} ms at the edge and "
            f"{self.engine * 1000:.0f} ms in the engine ({self.engine_family}): "
            f"{self.before_engine * 1000:.0f} ms is spent before the engine sees the request "
            f"(gateway, pending capacity, API server)"
        )


@dataclass(frozen=True)
class Combined:
    """The analysis to report, and what the engine histograms said beside the requests."""

    tail: TailAnalysis
    metrics_only: bool = False
    comparisons: tuple[EdgeVsEngine, ...] = ()


def _has_requests(tail: TailAnalysis) -> bool:
    return any(n > 0 for n in tail.counts.values())


def combine(
    store: Store, tail: TailAnalysis, slos: Sequence[SloSpec], options: TailOptions
) -> Combined:
    """The request analysis ``tail`` completed (or replaced) by the engine histograms."""
    if not _has_requests(tail):
        metrics = analyze_histograms(store, slos, options)
        if metrics is not None:
            return Combined(metrics, metrics_only=True)
        return Combined(_telemetry_range(store, tail, options))
    found = find_histograms(store, phases=False)  # beside requests only latencies are read
    if found is None:
        return Combined(tail)
    tail = _windows_from_histograms(store, tail, slos, options)
    tail = _itl_from_histogram(tail, found)
    comparisons = tuple(_compare(tail, found))
    notes = tuple(c.sentence() for c in comparisons if c.disagrees and c.percentile == 95.0)
    if notes:
        tail = dataclasses.replace(tail, notes=(*tail.notes, *notes))
    return Combined(tail, comparisons=comparisons)


def _windows_from_histograms(
    store: Store, tail: TailAnalysis, slos: Sequence[SloSpec], options: TailOptions
) -> TailAnalysis:
    """Where too few traced requests per bin placed no incident with a baseline before it, the
    engine histograms' windows (full rate) are taken, when they show a breach of the same
    metric, with a baseline, overlapping the requests' window."""
    counts = [pt.count for pt in tail.series if pt.count > 0]
    if (
        options.incident is not None
        or not tail.windows.detected
        or tail.windows.baseline is not None  # the requests placed an incident: it stands
        or not counts
    ):
        return tail
    per_bin = sum(counts) / len(counts)
    if per_bin >= SPARSE_TRACES_PER_BIN:
        return tail
    metrics = analyze_histograms(store, slos, options)
    if (
        metrics is None
        or metrics.windows.baseline is None
        or metrics.series_metric != tail.series_metric
        or not any(s.breached for s in metrics.slos if s.spec.metric == tail.series_metric)
        or not _overlap(metrics.windows.incident, tail.windows.incident)
    ):
        return tail  # the engine may see another breach than the edge's (gateway, network)
    given = dataclasses.replace(
        options, incident=metrics.windows.incident, baseline=metrics.windows.baseline
    )
    redone = analyze_tail(store, slos, given)
    note = SPARSE_WINDOWS_NOTE.format(
        per_bin=per_bin, width=tail.bin_width, need=SPARSE_TRACES_PER_BIN, metric=tail.series_metric
    )
    return dataclasses.replace(
        redone,
        windows=dataclasses.replace(redone.windows, detected=True),
        notes=(*redone.notes, note),
    )


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


NO_LATENCY_NOTE = (
    "no request timings and no latency histogram: the SLO cannot be evaluated; export the "
    "engine's TTFT / e2e histograms (vllm:time_to_first_token_seconds, "
    "vllm:e2e_request_latency_seconds) or traces"
)


def _telemetry_range(store: Store, tail: TailAnalysis, options: TailOptions) -> TailAnalysis:
    """Without requests or latency histograms: the windows span the metrics and events there
    are (never the epoch), and a note says what would let the SLO be evaluated."""
    if options.incident is not None:
        return dataclasses.replace(tail, notes=(*tail.notes, NO_LATENCY_NOTE))
    row = store.query(
        "SELECT least((SELECT min(time) FROM series), (SELECT min(time) FROM events)) AS lo, "
        "greatest((SELECT max(time) FROM series), (SELECT max(time) FROM events)) AS hi"
    ).to_pylist()[0]
    if row["lo"] is None:
        return dataclasses.replace(tail, notes=(*tail.notes, NO_LATENCY_NOTE))
    windows = dataclasses.replace(
        tail.windows, incident=(float(row["lo"]), float(row["hi"])), detected=True
    )
    return dataclasses.replace(tail, windows=windows, notes=(*tail.notes, NO_LATENCY_NOTE))


def _itl_from_histogram(tail: TailAnalysis, found: EngineHistograms) -> TailAnalysis:
    picked = found.latencies.get("itl")
    if picked is None or tail.definitions.get("itl", "").startswith("itl: one sample"):
        return tail
    incident = tail.windows.incident
    slos: list[SloResult] = []
    for s in tail.slos:
        slos.append(slo_result(picked, s.spec, incident) if s.spec.metric == "itl" else s)
    w = picked.histogram.window(*incident)
    percentiles = dict(tail.percentiles)
    if w.count > 0:
        vals = {f"p{p:g}": w.quantile(p).value for p in (50.0, 90.0, 95.0, 99.0, 99.9)}
        percentiles["itl"] = {k: v for k, v in vals.items() if math.isfinite(v)}
    note = ITL_FROM_HISTOGRAM_NOTE.format(family=picked.family)
    warnings = tuple(w for w in tail.warnings if "no token times" not in w)
    notes = tuple(n for n in tail.notes if "no token times" not in n)
    return dataclasses.replace(
        tail,
        slos=tuple(slos),
        percentiles=percentiles,
        warnings=warnings,
        notes=(*notes, note),
        definitions={**tail.definitions, "itl": slo_result(picked, _SPEC, incident).definition},
    )


_SPEC = SloSpec("itl", 95.0, math.inf)


def _compare(tail: TailAnalysis, found: EngineHistograms) -> list[EdgeVsEngine]:
    out = []
    for metric in ("ttft", "e2e"):
        picked = found.latencies.get(metric)
        edge = tail.percentiles.get(metric, {})
        if picked is None or not edge:
            continue
        w = picked.histogram.window(*tail.windows.incident)
        for key in ("p50", "p95", "p99"):
            p = float(key[1:])
            if key not in edge or w.count <= 0:
                continue
            q = w.quantile(p)
            if math.isfinite(q.value):
                out.append(EdgeVsEngine(metric, p, edge[key], q.value, str(picked.family), q.upper))
    return out
