"""The Report: the one object every renderer reads (terminal, JSON, HTML).

Built by ``pipeline`` from analysis results, findings and remediations.  Seconds inside;
:meth:`Report.to_dict` gives the JSON report of design section 3.5 (milliseconds, unit in
the key name)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tailtriage.analyses.results import (
    Decomposition,
    PercentilePoint,
    SloResult,
    SloSpec,
    StageMove,
    StageValue,
    Windows,
)
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.doctor.gap import Gap
from tailtriage.model.vocabulary import STAGES, as_action, as_category, as_stage
from tailtriage.remediation.actions import Remediation
from tailtriage.remediation.plan import accuracy_held, headline, tentative
from tailtriage.report_sections import Sections, extra_dict, sections_from

# Renderers read the report only (an import-linter contract): the types a report holds are
# named here for them, so they never import analyses, diagnosis or remediation themselves.
__all__ = [
    "REPORT_SCHEMA_VERSION",
    "Charts",
    "DataQuality",
    "Decomposition",
    "Evidence",
    "Finding",
    "Gap",
    "PercentilePoint",
    "Remediation",
    "Report",
    "SloResult",
    "SloSpec",
    "StageMove",
    "StageValue",
    "Windows",
    "is_duration_key",
    "reports_pair_dict",
]

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
    #: per-replica: replica -> {"count": n, "ttft_p95": s, ...}; keys that are a stage name or
    #: end in ``p<N>`` hold seconds (``_ms`` in JSON), every other key is a plain number
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
    #: the typed sections other commands add (analysis, engine histograms, triage, compare)
    sections: Sections = field(default_factory=Sections)
    title: str = "tailtriage report"
    #: doctor's gaps that limit this diagnosis (triage), each with the fix that closes it
    telemetry_gaps: tuple[Gap, ...] = ()
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
            "extra": extra_dict(self.sections),
            "charts": _charts_dict(self.charts),
            "telemetry_gaps": [g.to_dict() for g in self.telemetry_gaps],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Report:
        """Rebuild a Report from its JSON form (the inverse of :meth:`to_dict`).

        Raises ``ValueError`` / ``KeyError`` / ``TypeError`` on a malformed document; callers
        that read files translate those into ``ParseError`` with the file name."""
        version = int(d.get("schema_version", REPORT_SCHEMA_VERSION))
        if version > REPORT_SCHEMA_VERSION:
            raise ValueError(
                f"report schema_version {version} is newer than {REPORT_SCHEMA_VERSION}"
            )
        return cls(
            kind=str(d.get("kind", "triage")),
            slos=tuple(_slo_from(s) for s in d.get("slos") or ()),
            windows=_windows_from(d.get("windows")),
            decomposition=_decomposition_from(d.get("decomposition")),
            findings=tuple(_finding_from(f) for f in d.get("findings") or ()),
            remediations=tuple(_remediation_from(r) for r in d.get("remediations") or ()),
            data_quality=_quality_from(d.get("data_quality") or {}),
            charts=_charts_from(d.get("charts") or {}),
            stage_percentiles=_nested_s(d.get("stage_percentiles_ms") or {}),
            attribution=_nested_s(d.get("attribution_ms") or {}),
            percentiles=_nested_s(d.get("percentiles_ms") or {}),
            throughput={str(k): float(v) for k, v in (d.get("throughput") or {}).items()},
            sections=sections_from(d.get("extra") or {}),
            title=str(d.get("title", "tailtriage report")),
            schema_version=version,
            telemetry_gaps=tuple(Gap.from_dict(g) for g in d.get("telemetry_gaps") or ()),
        )

    def recommended_fix(self) -> Remediation | None:
        """The fix to headline: the best-ranked recommended one predicted to meet every SLO
        (``remediation.plan.headline``), or None."""
        return headline(self.remediations, tuple(s.spec for s in self.slos))

    def tentative_fix(self) -> Remediation | None:
        """Without a recommended fix, the one a low-confidence model predicts to meet every
        SLO (``remediation.plan.tentative``): a direction to verify, or None."""
        return tentative(self.remediations, tuple(s.spec for s in self.slos))

    def accuracy_held_fix(self) -> Remediation | None:
        """Without a recommended or tentative fix, one predicted to meet every SLO that waits
        only for an accuracy check (``remediation.plan.accuracy_held``), or None."""
        return accuracy_held(self.remediations, tuple(s.spec for s in self.slos))


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
        "source": s.source,
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
        "source": d.source,
        "method": d.method,
        "moved": [
            {
                "from": m.source,
                "to": m.target,
                "ms": _ms(m.seconds),
                "baseline_ms": _ms(m.baseline_seconds),
                "why": m.why,
            }
            for m in d.moves
        ],
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
        "impact_ms": _ms(f.impact),
        "metric": f.metric,
        "rule": f.rule,
        "explained_share": f.explained_share,
        "rank_reason": f.rank_reason,
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
        # added fields (design 3.5 allows more): the calibrated model's own error per SLO,
        # how the prediction was made, and whether the prediction supports the change
        "model_error_pct": dict(r.model_error_pct),
        "prediction_basis": r.prediction_basis,
        "recommended": r.recommended,
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


def _charts_dict(c: Charts) -> dict[str, Any]:
    return {
        "percentile_series": [
            {
                "start": p.start,
                "end": p.end,
                "count": p.count,
                "values_ms": [[q, _ms(v)] for q, v in p.values],
            }
            for p in c.percentile_series
        ],
        "cdfs_ms": {m: [[_ms(v), f] for v, f in pts] for m, pts in c.cdfs.items()},
        "waterfall": [
            {"stage": st, "offset_ms": _ms(off), "duration_ms": _ms(dur), "span": name}
            for st, off, dur, name in c.waterfall
        ],
        "waterfall_request_id": c.waterfall_request_id,
        "replicas": {r: _replica_dict(v) for r, v in c.replicas.items()},
        "events": [{"time": t, "kind": k, "object": o, "message": m} for t, k, o, m in c.events],
        "series": {name: [[t, v] for t, v in pts] for name, pts in c.series.items()},
    }


def is_duration_key(key: str) -> bool:
    """True for per-replica (and similar) keys that hold seconds: a stage name or a
    percentile such as ``ttft_p95``; their JSON key gets an ``_ms`` suffix."""
    return key in STAGES or _PERCENTILE_KEY.search(key) is not None


_PERCENTILE_KEY = re.compile(r"(^|_)p\d+(\.\d+)?$")


def _replica_dict(v: Mapping[str, float]) -> dict[str, float | None]:
    return {
        (f"{k}_ms" if is_duration_key(k) else k): (_ms(x) if is_duration_key(k) else x)
        for k, x in v.items()
    }


# --- from_dict helpers: the inverse of the *_dict functions above (ms -> seconds) ---


def _s(v: Any) -> float | None:
    return None if v is None else float(v) / 1000.0


def _req_s(v: Any) -> float:
    if v is None:
        raise ValueError("a required duration is null")
    return float(v) / 1000.0


def _nested_s(d: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    return {
        str(k): {str(kk): _req_s(vv) for kk, vv in v.items() if vv is not None}
        for k, v in d.items()
    }


def _slo_from(d: Mapping[str, Any]) -> SloResult:
    ci = d.get("ci_ms") or [None, None]
    return SloResult(
        spec=SloSpec(str(d["metric"]), float(d["percentile"]), _req_s(d["threshold_ms"])),
        observed=_s(d.get("observed_ms")),
        breached=bool(d.get("breached", False)),
        count=int(d.get("count", 0)),
        ci_low=_s(ci[0]),
        ci_high=_s(ci[1]),
        definition=str(d.get("definition", "")),
        warning=d.get("warning"),
        source=str(d.get("source", "requests")),
    )


def _pair(v: Any) -> tuple[float, float]:
    a, b = v
    return (float(a), float(b))


def _windows_from(d: Mapping[str, Any] | None) -> Windows | None:
    if not d or d.get("incident") is None:
        return None
    base = d.get("baseline")
    return Windows(_pair(d["incident"]), _pair(base) if base else None, bool(d.get("detected")))


def _decomposition_from(d: Mapping[str, Any] | None) -> Decomposition | None:
    if not d:
        return None
    stages = tuple(
        StageValue(str(s["stage"]), _req_s(s["ms"]), _s(s.get("baseline_ms")))
        for s in d.get("stages") or ()
    )
    total = d.get("total_ms")
    return Decomposition(
        metric=str(d["metric"]),
        percentile=float(d["percentile"]),
        total=_req_s(total) if total is not None else sum(s.seconds for s in stages),
        stages=stages,
        band=_pair(d["band"]) if d.get("band") else (0.0, 0.0),
        count=int(d.get("requests_in_band", 0)),
        baseline_total=_s(d.get("baseline_total_ms")),
        source=str(d.get("source", "spans")),
        method=str(d.get("method", "")),
        moves=tuple(
            StageMove(
                str(m["from"]),
                str(m["to"]),
                _req_s(m["ms"]),
                _s(m.get("baseline_ms")) or 0.0,
                str(m.get("why", "")),
            )
            for m in d.get("moved") or ()
        ),
    )


def _finding_from(d: Mapping[str, Any]) -> Finding:
    return Finding(
        category=as_category(str(d["category"])),
        stage=None if d.get("stage") is None else as_stage(str(d["stage"])),
        confidence=float(d.get("confidence", 0.0)),
        summary=str(d.get("summary", "")),
        evidence=tuple(
            Evidence(
                signal=str(e.get("signal", "")),
                value=e.get("value"),
                detail=str(e.get("detail", "")),
                source=str(e.get("source", "span")),
                threshold=e.get("threshold"),
            )
            for e in d.get("evidence") or ()
        ),
        next_steps=tuple(str(x) for x in d.get("next_steps") or ()),
        impact=float(d.get("impact_ms") or 0.0) / 1000.0,
        metric=d.get("metric"),
        rule=str(d.get("rule") or ""),
        explained_share=None if d.get("explained_share") is None else float(d["explained_share"]),
        rank_reason=str(d.get("rank_reason") or ""),
    )


def _remediation_from(d: Mapping[str, Any]) -> Remediation:
    predicted: dict[str, float] = {}
    for k, v in (d.get("predicted") or {}).items():
        if v is None:
            continue
        if k.endswith("_ms"):
            predicted[k[:-3]] = float(v) / 1000.0
        else:
            predicted[k] = float(v)
    return Remediation(
        action=as_action(str(d["action"])),
        addresses=tuple(as_category(str(a)) for a in d.get("addresses") or ()),
        summary=str(d.get("summary", "")),
        parameters=dict(d.get("parameters") or {}),
        predicted=predicted,
        config=str(d.get("config") or ""),
        caveats=tuple(str(c) for c in d.get("caveats") or ()),
        model_error_pct={
            str(k): float(v) for k, v in (d.get("model_error_pct") or {}).items() if v is not None
        },
        prediction_basis=str(d.get("prediction_basis") or ""),
        recommended=bool(d.get("recommended", True)),
    )


def _quality_from(d: Mapping[str, Any]) -> DataQuality:
    return DataQuality(
        requests=int(d.get("requests", 0)),
        spans=int(d.get("spans", 0)),
        unattributed_share=float(d.get("unattributed_share", 0.0)),
        skipped_files=tuple(
            {str(k): str(v) for k, v in s.items()} for s in d.get("skipped_files") or ()
        ),
        warnings=tuple(str(w) for w in d.get("warnings") or ()),
        series=int(d.get("series", 0)),
        events=int(d.get("events", 0)),
        clock_adjustments=int(d.get("clock_adjustments", 0)),
        counts={str(k): int(v) for k, v in (d.get("counts") or {}).items()},
    )


def _charts_from(d: Mapping[str, Any]) -> Charts:
    return Charts(
        percentile_series=tuple(
            PercentilePoint(
                float(p["start"]),
                float(p["end"]),
                int(p.get("count", 0)),
                tuple((float(q), _req_s(v)) for q, v in p.get("values_ms") or () if v is not None),
            )
            for p in d.get("percentile_series") or ()
        ),
        cdfs={
            str(m): tuple((_req_s(v), float(f)) for v, f in pts)
            for m, pts in (d.get("cdfs_ms") or {}).items()
        },
        waterfall=tuple(
            (
                str(w["stage"]),
                _req_s(w["offset_ms"]),
                _req_s(w["duration_ms"]),
                str(w.get("span", "")),
            )
            for w in d.get("waterfall") or ()
        ),
        waterfall_request_id=d.get("waterfall_request_id"),
        replicas={str(r): _replica_from(v) for r, v in (d.get("replicas") or {}).items()},
        events=tuple(
            (
                float(e["time"]),
                str(e.get("kind", "")),
                str(e.get("object", "")),
                str(e.get("message", "")),
            )
            for e in d.get("events") or ()
        ),
        series={
            str(n): tuple((float(t), float(v)) for t, v in pts)
            for n, pts in (d.get("series") or {}).items()
        },
    )


def _replica_from(v: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, x in v.items():
        if x is None:
            continue
        if k.endswith("_ms") and is_duration_key(k[:-3]):
            out[k[:-3]] = float(x) / 1000.0
        else:
            out[k] = float(x)
    return out


def reports_pair_dict(before: Report, after: Report, applied: Sequence[str]) -> dict[str, Any]:
    """The ``demo --json`` document."""
    return {"before": before.to_dict(), "after": after.to_dict(), "applied": list(applied)}
