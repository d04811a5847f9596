"""Requests and engine histograms together: which answers, and where they disagree.

* No request has the SLO's metric (a bundle of Prometheus files and kubectl output): the
  whole analysis comes from the engine histograms (``engine_metrics.analyze_histograms``).
* Requests without token times and an ITL SLO: the per-request mean gap hides stalls, the
  engine's per-gap ITL histogram does not, so the ITL SLO comes from the histogram.
* Both: the request percentiles stand (they are what the user sees), and the engine's own
  percentile over the same window is set beside them.  Edge TTFT minus engine TTFT is the time
  before the engine saw the request: gateway, pending capacity, API server."""

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
from tailtriage.analyses.results import SloResult, SloSpec
from tailtriage.analyses.tail import TailAnalysis, TailOptions
from tailtriage.store.base import Store

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
    tail = _itl_from_histogram(tail, found)
    comparisons = tuple(_compare(tail, found))
    notes = tuple(c.sentence() for c in comparisons if c.disagrees and c.percentile == 95.0)
    if notes:
        tail = dataclasses.replace(tail, notes=(*tail.notes, *notes))
    return Combined(tail, comparisons=comparisons)


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
