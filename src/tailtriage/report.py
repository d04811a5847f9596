"""The Report: the one object every renderer reads (terminal, JSON, HTML).

Built by ``pipeline`` from analysis results, findings and remediations.  Seconds inside;
:meth:`Report.to_dict` gives the JSON report of design section 3.5 (milliseconds, unit in
the key name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tailtriage.analyses.results import Decomposition, PercentilePoint, SloResult, Windows
from tailtriage.diagnosis.findings import Finding
from tailtriage.remediation.actions import Remediation

REPORT_SCHEMA_VERSION = 1


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000.0, 3)


@dataclass(frozen=True)
class DataQuality:
    requests: int = 0
    spans: int = 0
    unattributed_share: float = 0.0
    skipped_files: tuple[Mapping[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    series: int = 0
    events: int = 0
    clock_adjustments: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)  # dropped / repaired records


@dataclass(frozen=True)
class Charts:
    """Pre-aggregated data for plots (aggregated before plotting, so reports stay small)."""

    #: percentile over time of the SLO metric
    percentile_series: tuple[PercentilePoint, ...] = ()
    #: metric -> ((value_seconds, cumulative_fraction), ...)
    cdfs: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    #: representative tail request: (stage, start offset s, duration s, span name)
    waterfall: tuple[tuple[str, float, float, str], ...] = ()
    waterfall_request_id: str | None = None
    #: per-replica: replica -> {"count": n, "ttft_p95": s, ...}
    replicas: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: Kubernetes events: (time, kind, object, message)
    events: tuple[tuple[float, str, str, str], ...] = ()
    #: named numeric series on the time axis, e.g. "hpa_replicas", "queue_depth": ((t, v), ...)
    series: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    kind: str  # triage | analyze | compare
    slos: tuple[SloResult, ...]
    windows: Windows | None
    decomposition: Decomposition | None
    findings: tuple[Finding, ...] = ()
    remediations: tuple[Remediation, ...] = ()
    data_quality: DataQuality = field(default_factory=DataQuality)
    charts: Charts = field(default_factory=Charts)
    #: per-stage percentiles (not additive): stage -> {"p50": s, "p95": s, "p99": s}
    stage_percentiles: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: attribution of the breach: stage -> {"counterfactual": s, "shapley": s}
    attribution: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: latency percentiles table: metric -> {"p50": s, ...}
    percentiles: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: throughput is reported separately from latency
    throughput: Mapping[str, float] = field(default_factory=dict)
    #: free-form sections other commands add (compare deltas, breakdowns, ...)
    extra: Mapping[str, Any] = field(default_factory=dict)
    title: str = "tailtriage report"
    schema_version: int = REPORT_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (design 3.5)."""
        return {
            "schema_version": self.schema_version,
            "kind": self.kind,
            "title": self.title,
            "slos": [_slo_dict(s) for s in self.slos],
            "windows": _windows_dict(self.windows),
            "decomposition": _decomposition_dict(self.decomposition),
            "findings": [_finding_dict(f) for f in self.findings],
            "remediations": [_remediation_dict(r) for r in self.remediations],
            "data_quality": _quality_dict(self.data_quality),
            "percentiles_ms": _nested_ms(self.percentiles),
            "stage_percentiles_ms": _nested_ms(self.stage_percentiles),
            "attribution_ms": _nested_ms(self.attribution),
            "throughput": dict(self.throughput),
            "extra": dict(self.extra),
        }


def _nested_ms(d: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float | None]]:
    return {k: {kk: _ms(vv) for kk, vv in v.items()} for k, v in d.items()}


def _slo_dict(s: SloResult) -> dict[str, Any]:
    return {
        "metric": s.spec.metric,
        "percentile": s.spec.percentile,
        "threshold_ms": _ms(s.spec.threshold),
        "observed_ms": _ms(s.observed),
        "breached": s.breached,
        "count": s.count,
        "ci_ms": [_ms(s.ci_low), _ms(s.ci_high)],
        "definition": s.definition,
        "warning": s.warning,
    }


def _windows_dict(w: Windows | None) -> dict[str, Any]:
    if w is None:
        return {"incident": None, "baseline": None, "detected": False}
    return {
        "incident": list(w.incident),
        "baseline": list(w.baseline) if w.baseline else None,
        "detected": w.detected,
    }


def _decomposition_dict(d: Decomposition | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {
        "metric": d.metric,
        "percentile": d.percentile,
        "total_ms": _ms(d.total),
        "baseline_total_ms": _ms(d.baseline_total),
        "band": list(d.band),
        "requests_in_band": d.count,
        "stages": [
            {"stage": s.stage, "ms": _ms(s.seconds), "baseline_ms": _ms(s.baseline_seconds)}
            for s in d.stages
        ],
    }


def _finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "category": f.category,
        "stage": f.stage,
        "confidence": round(f.confidence, 3),
        "summary": f.summary,
        "evidence": [
            {
                "signal": e.signal,
                "value": e.value,
                "detail": e.detail,
                "source": e.source,
                "threshold": e.threshold,
            }
            for e in f.evidence
        ],
        "next_steps": list(f.next_steps),
    }


def _remediation_dict(r: Remediation) -> dict[str, Any]:
    predicted: dict[str, float | None] = {}
    for k, v in r.predicted.items():
        predicted[k if k == "throughput_change_pct" or k.endswith("_ms") else f"{k}_ms"] = (
            v if k == "throughput_change_pct" or k.endswith("_ms") else _ms(v)
        )
    return {
        "action": r.action,
        "addresses": list(r.addresses),
        "summary": r.summary,
        "parameters": dict(r.parameters),
        "predicted": predicted,
        "config": r.config,
        "caveats": list(r.caveats),
    }


def _quality_dict(q: DataQuality) -> dict[str, Any]:
    return {
        "requests": q.requests,
        "spans": q.spans,
        "series": q.series,
        "events": q.events,
        "unattributed_share": round(q.unattributed_share, 4),
        "skipped_files": [dict(s) for s in q.skipped_files],
        "warnings": list(q.warnings),
        "clock_adjustments": q.clock_adjustments,
        "counts": dict(q.counts),
    }


def reports_pair_dict(before: Report, after: Report, applied: Sequence[str]) -> dict[str, Any]:
    """The ``demo --json`` document."""
    return {"before": before.to_dict(), "after": after.to_dict(), "applied": list(applied)}
