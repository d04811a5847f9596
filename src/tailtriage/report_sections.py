"""The typed sections a Report carries beside its core (design 3.5: the JSON ``extra`` object).

``analyze`` adds :class:`AnalysisSection` (definitions, counts, baseline percentiles, the
per-group breakdowns), metrics-only captures add :class:`EngineHistograms` (edge vs engine
percentiles), ``triage`` adds :class:`TriageSection` (timings, the signals read, the what-if
seed) and ``compare`` adds :class:`CompareSection` (per-SLO verdicts, stage deltas,
throughput).  Seconds inside, milliseconds in JSON (unit in the key name), exactly as
:class:`tailtriage.report.Report`; :func:`extra_dict` writes the ``extra`` object and
:func:`sections_from` reads it back."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from tailtriage.analyses.decomposition import Breakdown, BreakdownRow


def ms(v: float | None) -> float | None:
    """Seconds as the JSON report writes them: milliseconds rounded to the microsecond, None
    when absent or not finite.  Views that print a section's figures go through it too, so
    the terminal, the HTML and the JSON show the same number."""
    return None if v is None or not math.isfinite(v) else round(v * 1000.0, 3)


def _s(v: Any) -> float | None:
    return None if v is None else float(v) / 1000.0


def _s_pair(v: Any) -> tuple[float | None, float | None]:
    a, b = v if v is not None else (None, None)
    return (_s(a), _s(b))


# -- analyze -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AttributionSummary:
    """How the breach attribution was computed (the per-stage values are ``Report.attribution``)."""

    metric: str
    percentile: float
    observed: float | None
    baseline: float | None
    resampled_baseline: float | None
    seed: int
    population: int


@dataclass(frozen=True)
class AnalysisSection:
    """What ``analyze`` measured beyond the core report, and how."""

    series_metric: str
    bin_width_s: float
    #: metric -> the definition actually used
    definitions: Mapping[str, str] = field(default_factory=dict)
    #: metric -> sample count
    counts: Mapping[str, int] = field(default_factory=dict)
    #: metric -> {"p50": s, ...} over the baseline window
    baseline_percentiles: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    breakdowns: tuple[Breakdown, ...] = ()
    stage_percentiles_note: str = "per-stage percentiles are not additive"
    attribution: AttributionSummary | None = None
    notes: tuple[str, ...] = ()


_PCT_MS = re.compile(r"^p(\d+(?:\.\d+)?)_ms$")


def _breakdown_rows(b: Breakdown) -> list[dict[str, Any]]:
    return [
        {
            "key": r.key,
            "count": r.count,
            "share": round(r.share, 4),
            "tail_share": round(r.tail_share, 4),
            **{f"p{p:g}_ms": ms(v) for p, v in r.values},
        }
        for r in b.rows
    ]


def _analysis_dict(a: AnalysisSection) -> dict[str, Any]:
    at = a.attribution
    return {
        "series_metric": a.series_metric,
        "bin_width_s": a.bin_width_s,
        "definitions": dict(a.definitions),
        "counts": dict(a.counts),
        "baseline_percentiles_ms": {
            m: {k: ms(v) for k, v in vals.items()} for m, vals in a.baseline_percentiles.items()
        },
        "breakdowns": {
            b.dimension: {"metric": b.metric, "rows": _breakdown_rows(b)} for b in a.breakdowns
        },
        "stage_percentiles_note": a.stage_percentiles_note,
        "attribution": None
        if at is None
        else {
            "metric": at.metric,
            "percentile": at.percentile,
            "observed_ms": ms(at.observed),
            "baseline_ms": ms(at.baseline),
            "resampled_baseline_ms": ms(at.resampled_baseline),
            "seed": at.seed,
            "population": at.population,
        },
        "notes": list(a.notes),
    }


def _row_from(d: Mapping[str, Any]) -> BreakdownRow:
    values = []
    for k, v in d.items():
        m = _PCT_MS.match(str(k))
        if m and v is not None:
            values.append((float(m.group(1)), float(v) / 1000.0))
    return BreakdownRow(
        key=str(d["key"]),
        count=int(d.get("count", 0)),
        share=float(d.get("share", 0.0)),
        tail_share=float(d.get("tail_share", 0.0)),
        values=tuple(values),
    )


def _analysis_from(d: Mapping[str, Any]) -> AnalysisSection:
    at = d.get("attribution")
    return AnalysisSection(
        series_metric=str(d.get("series_metric", "")),
        bin_width_s=float(d.get("bin_width_s", 0.0)),
        definitions={str(k): str(v) for k, v in (d.get("definitions") or {}).items()},
        counts={str(k): int(v) for k, v in (d.get("counts") or {}).items()},
        baseline_percentiles={
            str(m): {str(k): _s(v) for k, v in vals.items()}
            for m, vals in (d.get("baseline_percentiles_ms") or {}).items()
        },
        breakdowns=tuple(
            Breakdown(
                dimension=str(dim),
                metric=str(b["metric"]),
                rows=tuple(_row_from(r) for r in b.get("rows") or ()),
            )
            for dim, b in (d.get("breakdowns") or {}).items()
        ),
        stage_percentiles_note=str(
            d.get("stage_percentiles_note", "per-stage percentiles are not additive")
        ),
        attribution=None
        if at is None
        else AttributionSummary(
            metric=str(at["metric"]),
            percentile=float(at["percentile"]),
            observed=_s(at.get("observed_ms")),
            baseline=_s(at.get("baseline_ms")),
            resampled_baseline=_s(at.get("resampled_baseline_ms")),
            seed=int(at.get("seed", 0)),
            population=int(at.get("population", 0)),
        ),
        notes=tuple(str(n) for n in d.get("notes") or ()),
    )


# -- metrics-only captures -----------------------------------------------------------------


@dataclass(frozen=True)
class EdgeEngineRow:
    """One latency percentile at the edge (requests) and in the engine (its histogram)."""

    metric: str
    percentile: float
    edge: float | None
    engine: float | None
    before_engine: float | None  # edge - engine: gateway + pending + API server
    engine_histogram: str


@dataclass(frozen=True)
class EngineHistograms:
    """What the engine's own histograms said beside the requests."""

    metrics_only: bool
    edge_vs_engine: tuple[EdgeEngineRow, ...] = ()


def _engine_dict(e: EngineHistograms) -> dict[str, Any]:
    return {
        "metrics_only": e.metrics_only,
        "edge_vs_engine": [
            {
                "metric": c.metric,
                "percentile": c.percentile,
                "edge_ms": ms(c.edge),
                "engine_ms": ms(c.engine),
                "before_engine_ms": ms(c.before_engine),
                "engine_histogram": c.engine_histogram,
            }
            for c in e.edge_vs_engine
        ],
    }


def _engine_from(d: Mapping[str, Any]) -> EngineHistograms:
    return EngineHistograms(
        metrics_only=bool(d.get("metrics_only", False)),
        edge_vs_engine=tuple(
            EdgeEngineRow(
                metric=str(c["metric"]),
                percentile=float(c["percentile"]),
                edge=_s(c.get("edge_ms")),
                engine=_s(c.get("engine_ms")),
                before_engine=_s(c.get("before_engine_ms")),
                engine_histogram=str(c.get("engine_histogram", "")),
            )
            for c in d.get("edge_vs_engine") or ()
        ),
    )


# -- triage --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignalsRead:
    """Which signals the diagnosis could read (so a user sees what was missing)."""

    metrics: tuple[str, ...]
    hpa_metrics: tuple[str, ...]
    events: int
    incident_arrival_rps: float
    incident_completion_rps: float
    baseline_arrival_rps: float | None
    token_times: bool


@dataclass(frozen=True)
class TriageSection:
    """How triage ran: step timings, the signals read, and the what-if's seed."""

    whatif_seed: int
    calibrated: bool
    #: step -> seconds (``whatif_runs`` is a count); None when the path does not time itself
    timings: Mapping[str, float] | None = None
    signals: SignalsRead | None = None


def _triage_dict(t: TriageSection) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.timings is not None:
        out["timings"] = {k: round(v, 3) for k, v in t.timings.items()}
    if t.signals is not None:
        s = t.signals
        out["signals"] = {
            "metrics": list(s.metrics),
            "hpa_metrics": list(s.hpa_metrics),
            "events": s.events,
            "incident_arrival_rps": round(s.incident_arrival_rps, 4),
            "incident_completion_rps": round(s.incident_completion_rps, 4),
            "baseline_arrival_rps": None
            if s.baseline_arrival_rps is None
            else round(s.baseline_arrival_rps, 4),
            "token_times": s.token_times,
        }
    out["whatif"] = {"seed": t.whatif_seed, "calibrated": t.calibrated}
    return out


def _triage_from(d: Mapping[str, Any]) -> TriageSection:
    w = d.get("whatif") or {}
    s = d.get("signals")
    timings = d.get("timings")
    return TriageSection(
        whatif_seed=int(w.get("seed", 0)),
        calibrated=bool(w.get("calibrated", False)),
        timings=None if timings is None else {str(k): float(v) for k, v in timings.items()},
        signals=None
        if s is None
        else SignalsRead(
            metrics=tuple(str(m) for m in s.get("metrics") or ()),
            hpa_metrics=tuple(str(m) for m in s.get("hpa_metrics") or ()),
            events=int(s.get("events", 0)),
            incident_arrival_rps=float(s.get("incident_arrival_rps", 0.0)),
            incident_completion_rps=float(s.get("incident_completion_rps", 0.0)),
            baseline_arrival_rps=None
            if s.get("baseline_arrival_rps") is None
            else float(s["baseline_arrival_rps"]),
            token_times=bool(s.get("token_times", False)),
        ),
    )


# -- compare -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SloDelta:
    """One SLO percentile before and after, each with its interval, and the verdict."""

    metric: str
    percentile: float
    threshold: float
    before: float | None
    after: float | None
    delta: float | None
    before_ci: tuple[float | None, float | None]
    after_ci: tuple[float | None, float | None]
    delta_ci: tuple[float | None, float | None] | None  # bootstrap interval of after - before
    n_before: int
    n_after: int
    before_breached: bool
    after_breached: bool
    significant: bool
    verdict: str  # improved | regressed | no significant change | too few requests
    method: str
    warning: str | None = None

    @property
    def label(self) -> str:
        """``p95 TTFT``."""
        return f"p{self.percentile:g} {self.metric.upper()}"


@dataclass(frozen=True)
class StageDelta:
    """One stage's share of the percentile, before and after."""

    stage: str
    before: float | None
    after: float
    delta: float


@dataclass(frozen=True)
class CompareSection:
    """Which SLOs changed, which stages moved, and throughput on its own."""

    slos: tuple[SloDelta, ...]
    stages: tuple[StageDelta, ...]
    throughput_before: Mapping[str, float]
    throughput_after: Mapping[str, float]
    window_before: tuple[float, float]
    window_after: tuple[float, float]
    seed: int
    #: stages whose share moved by more than 10 % of the percentile, largest first
    changed_stages: tuple[str, ...] = ()


def _slo_delta_dict(r: SloDelta) -> dict[str, Any]:
    return {
        "metric": r.metric,
        "percentile": r.percentile,
        "threshold_ms": ms(r.threshold),
        "before_ms": ms(r.before),
        "after_ms": ms(r.after),
        "delta_ms": ms(r.delta),
        "before_ci_ms": [ms(r.before_ci[0]), ms(r.before_ci[1])],
        "after_ci_ms": [ms(r.after_ci[0]), ms(r.after_ci[1])],
        "delta_ci_ms": None if r.delta_ci is None else [ms(v) for v in r.delta_ci],
        "n_before": r.n_before,
        "n_after": r.n_after,
        "before_breached": r.before_breached,
        "after_breached": r.after_breached,
        "significant": r.significant,
        "verdict": r.verdict,
        "method": r.method,
        "warning": r.warning,
    }


def _compare_dict(c: CompareSection) -> dict[str, Any]:
    return {
        "slos": [_slo_delta_dict(r) for r in c.slos],
        "stages": [
            {
                "stage": s.stage,
                "before_ms": ms(s.before),
                "after_ms": ms(s.after),
                "delta_ms": ms(s.delta),
            }
            for s in c.stages
        ],
        "throughput": {"before": dict(c.throughput_before), "after": dict(c.throughput_after)},
        "windows": {"before": list(c.window_before), "after": list(c.window_after)},
        "seed": c.seed,
        "changed_stages": list(c.changed_stages),
    }


def _slo_delta_from(d: Mapping[str, Any]) -> SloDelta:
    delta_ci = d.get("delta_ci_ms")
    return SloDelta(
        metric=str(d["metric"]),
        percentile=float(d["percentile"]),
        threshold=float(d["threshold_ms"]) / 1000.0,
        before=_s(d.get("before_ms")),
        after=_s(d.get("after_ms")),
        delta=_s(d.get("delta_ms")),
        before_ci=_s_pair(d.get("before_ci_ms")),
        after_ci=_s_pair(d.get("after_ci_ms")),
        delta_ci=None if delta_ci is None else _s_pair(delta_ci),
        n_before=int(d.get("n_before", 0)),
        n_after=int(d.get("n_after", 0)),
        before_breached=bool(d.get("before_breached", False)),
        after_breached=bool(d.get("after_breached", False)),
        significant=bool(d.get("significant", False)),
        verdict=str(d.get("verdict", "")),
        method=str(d.get("method", "")),
        warning=None if d.get("warning") is None else str(d["warning"]),
    )


def _window(v: Sequence[Any]) -> tuple[float, float]:
    a, b = v
    return (float(a), float(b))


def _compare_from(d: Mapping[str, Any]) -> CompareSection:
    tp = d.get("throughput") or {}
    w = d.get("windows") or {}
    return CompareSection(
        slos=tuple(_slo_delta_from(r) for r in d.get("slos") or ()),
        stages=tuple(
            StageDelta(
                stage=str(s["stage"]),
                before=_s(s.get("before_ms")),
                after=float(s["after_ms"]) / 1000.0,
                delta=float(s["delta_ms"]) / 1000.0,
            )
            for s in d.get("stages") or ()
        ),
        throughput_before={str(k): float(v) for k, v in (tp.get("before") or {}).items()},
        throughput_after={str(k): float(v) for k, v in (tp.get("after") or {}).items()},
        window_before=_window(w.get("before") or (0.0, 0.0)),
        window_after=_window(w.get("after") or (0.0, 0.0)),
        seed=int(d.get("seed", 0)),
        changed_stages=tuple(str(s) for s in d.get("changed_stages") or ()),
    )


# -- rollout -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutVersion:
    """One ReplicaSet's requests during a rolling update (milliseconds, as in the JSON)."""

    replicaset: str
    new: bool
    pods: int
    requests: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    e2e_p95_ms: float | None
    models: tuple[str, ...]


@dataclass(frozen=True)
class RolloutWarmup:
    """A new pod's first seconds after Ready against its later requests."""

    pod: str
    ready: float
    window_s: float
    requests: int
    ttft_p95_ms: float | None
    steady_requests: int
    steady_ttft_p95_ms: float | None
    slowdown: float | None


@dataclass(frozen=True)
class RolloutPod:
    pod: str
    replicaset: str
    created: float | None
    ready: float | None
    killed: float | None
    load_s: float | None


@dataclass(frozen=True)
class RolloutDip:
    desired: int
    min_ready: int
    lost: int
    seconds_below: float
    source: str


@dataclass(frozen=True)
class RolloutSection:
    """A rolling update seen in the capture (``analyses.rollout.RolloutAnalysis`` in the
    report's units; field order is the JSON's key order)."""

    start: float
    end: float
    duration_s: float
    new_replicaset: str
    old_replicasets: tuple[str, ...]
    max_surge: int
    max_unavailable: int
    weight_load_s: float | None
    model_swap: bool
    ttft_p95_during_ms: float | None
    ttft_p95_before_ms: float | None
    capacity_dip: RolloutDip | None
    versions: tuple[RolloutVersion, ...]
    warmups: tuple[RolloutWarmup, ...]
    pods: tuple[RolloutPod, ...]
    notes: tuple[str, ...]


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def rollout_from(d: Mapping[str, Any]) -> RolloutSection:
    """The section from its JSON form (``RolloutAnalysis.to_dict()`` writes the same)."""
    dip = d.get("capacity_dip")
    return RolloutSection(
        start=float(d["start"]),
        end=float(d["end"]),
        duration_s=float(d["duration_s"]),
        new_replicaset=str(d["new_replicaset"]),
        old_replicasets=tuple(str(x) for x in d.get("old_replicasets") or ()),
        max_surge=int(d["max_surge"]),
        max_unavailable=int(d["max_unavailable"]),
        weight_load_s=_opt(d.get("weight_load_s")),
        model_swap=bool(d.get("model_swap")),
        ttft_p95_during_ms=_opt(d.get("ttft_p95_during_ms")),
        ttft_p95_before_ms=_opt(d.get("ttft_p95_before_ms")),
        capacity_dip=None
        if not isinstance(dip, Mapping)
        else RolloutDip(
            int(dip["desired"]),
            int(dip["min_ready"]),
            int(dip["lost"]),
            float(dip["seconds_below"]),
            str(dip["source"]),
        ),
        versions=tuple(
            RolloutVersion(
                str(v["replicaset"]),
                bool(v["new"]),
                int(v["pods"]),
                int(v["requests"]),
                _opt(v.get("ttft_p50_ms")),
                _opt(v.get("ttft_p95_ms")),
                _opt(v.get("e2e_p95_ms")),
                tuple(str(m) for m in v.get("models") or ()),
            )
            for v in d.get("versions") or ()
        ),
        warmups=tuple(
            RolloutWarmup(
                str(w["pod"]),
                float(w["ready"]),
                float(w["window_s"]),
                int(w["requests"]),
                _opt(w.get("ttft_p95_ms")),
                int(w["steady_requests"]),
                _opt(w.get("steady_ttft_p95_ms")),
                _opt(w.get("slowdown")),
            )
            for w in d.get("warmups") or ()
        ),
        pods=tuple(
            RolloutPod(
                str(p["pod"]),
                str(p["replicaset"]),
                _opt(p.get("created")),
                _opt(p.get("ready")),
                _opt(p.get("killed")),
                _opt(p.get("load_s")),
            )
            for p in d.get("pods") or ()
        ),
        notes=tuple(str(n) for n in d.get("notes") or ()),
    )


def rollout_dict(r: RolloutSection) -> dict[str, Any]:
    """The JSON form (lists for tuples, nested objects for the parts)."""

    def plain(v: Any) -> Any:
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        if is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in fields(v)}
        return v

    return {f.name: plain(getattr(r, f.name)) for f in fields(r)}


# -- the extra object ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sections:
    """Every section a report may carry beside its core; each None when the command that
    writes it did not run."""

    analysis: AnalysisSection | None = None
    engine_histograms: EngineHistograms | None = None
    triage: TriageSection | None = None
    compare: CompareSection | None = None
    rollout: RolloutSection | None = None


def extra_dict(s: Sections) -> dict[str, Any]:
    """The JSON ``extra`` object (design 3.5), in the order the sections are added."""
    out: dict[str, Any] = {}
    if s.analysis is not None:
        out["analysis"] = _analysis_dict(s.analysis)
    if s.engine_histograms is not None:
        out["engine_histograms"] = _engine_dict(s.engine_histograms)
    if s.triage is not None:
        out["triage"] = _triage_dict(s.triage)
    if s.compare is not None:
        out["compare"] = _compare_dict(s.compare)
    if s.rollout is not None:
        out["rollout"] = rollout_dict(s.rollout)
    return out


def sections_from(d: Mapping[str, Any]) -> Sections:
    """The inverse of :func:`extra_dict` (keys it does not know are ignored)."""
    a, e, t, c = (d.get(k) for k in ("analysis", "engine_histograms", "triage", "compare"))
    r = d.get("rollout")
    return Sections(
        analysis=None if a is None else _analysis_from(a),
        engine_histograms=None if e is None else _engine_from(e),
        triage=None if t is None else _triage_from(t),
        compare=None if c is None else _compare_from(c),
        rollout=rollout_from(r) if isinstance(r, Mapping) else None,
    )
