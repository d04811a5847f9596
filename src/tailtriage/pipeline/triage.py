"""Capture or Store -> Report of kind "triage": analyze, diagnose, remediate in one pass.

    with open_input("bundle/") as store:  # or "chdb:///data/ch?table=otel_traces"
        report = triage(store, "p95 ttft < 500ms")

The analysis (``pipeline.analyze``) gives the SLO status, windows and tail decomposition; the
diagnosis rules read them plus the signals, all as SQL through the store; the remediation
catalog proposes fixes for the top findings and the simulator, calibrated on the requests
(``store.local_requests``: a ClickHouse store sends those of the incident and baseline windows,
never spans), predicts each one (``remediation.whatif.Replay``: one calibration, one baseline
run, one run per candidate)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tailtriage.analyses.decomposition import reclassify
from tailtriage.analyses.engine_metrics import request_rates
from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.slo import parse_slos
from tailtriage.diagnosis import DiagnosisContext, build_context, diagnose
from tailtriage.diagnosis.findings import Finding
from tailtriage.diagnosis.signals import WindowSignals
from tailtriage.doctor import examine
from tailtriage.doctor.gap import Gap
from tailtriage.errors import InsufficientDataError, TailtriageError
from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze
from tailtriage.remediation import Predictor, Target, plan
from tailtriage.remediation.actions import Remediation
from tailtriage.remediation.forecast import Forecast
from tailtriage.report import DataQuality, Report
from tailtriage.report_sections import SignalsRead, TriageSection
from tailtriage.simulator.config import ScenarioConfig
from tailtriage.simulator.parallel import shared_workers
from tailtriage.store import InputStore, Store, opened

#: progress callback: (step name, detail)
Progress = Callable[[str, str], None]

#: requests of the incident + baseline windows a server store may send for the what-if (a
#: calibration on more is slow and their Python tables large; narrower windows are the fix)
MAX_LOCAL_REQUESTS = 200_000


class ReplayPredictor:
    """Adapts ``remediation.whatif.Replay`` to the planner's Predictor protocol."""

    def __init__(
        self,
        capture: Capture,
        slos: Sequence[SloSpec],
        *,
        base: ScenarioConfig | None = None,
        seed: int = 0,
        corrected: bool = True,
        progress: Progress | None = None,
        window: tuple[float, float] | None = None,
    ) -> None:
        from tailtriage.remediation.whatif import Replay

        # ``window``: the percentiles (observed, replayed, predicted) over the requests that
        # arrived in it - the incident window the report shows - rather than the whole capture
        self._replay = Replay(capture, slos, base=base, seed=seed, window=window)
        self._corrected = corrected
        self._progress = progress
        self.runs = 0
        # what the calibration could not read from the telemetry, one line each, first
        self.warnings: list[str] = [g.line() for g in self._replay.calibration.fit.gaps]

    def current(self, key: str) -> Any:
        node: Any = self._replay.config
        for part in key.split("."):
            if part.isdigit() and isinstance(node, Sequence):
                idx = int(part)
                if idx >= len(node):
                    return None
                node = node[idx]
            elif dataclasses.is_dataclass(node) and hasattr(node, part):
                node = getattr(node, part)
            else:
                return None
        return node

    def prefetch(self, overrides: Sequence[Mapping[str, Any]]) -> None:
        if self._progress is not None and overrides:
            self._progress("whatif", f"{len(overrides)} candidate fixes, replayed together")
        self._replay.prefetch(overrides)

    def predict(self, overrides: Mapping[str, Any]) -> Forecast | None:
        if self._progress is not None:
            self._progress("whatif", ", ".join(f"{k}={v}" for k, v in overrides.items()))
        self.runs += 1
        try:
            pred = self._replay.predict(overrides)
        except TailtriageError as exc:
            self.warnings.append(f"what-if {dict(overrides)} failed: {exc}")
            return None
        self.warnings.extend(w for w in pred.warnings if w not in self.warnings)
        # The correction factor (observed / calibrated baseline) carries the model's own error
        # into the forecast the way the Dynamo planner does; the raw run is kept in its facts.
        return pred.forecast(corrected=self._corrected)

    def close(self) -> None:
        self._replay.close()


def target_of(capture: Capture) -> Target:
    """Deployment name and namespace for the config snippets, from the capture's events."""
    ev = capture.events
    if ev.num_rows == 0:
        return Target()
    names = [
        n
        for n, k in zip(ev["object_name"].to_pylist(), ev["object_kind"].to_pylist(), strict=True)
        if n and k in ("HorizontalPodAutoscaler", "Deployment")
    ]
    spaces = [n for n in ev["namespace"].to_pylist() if n]
    return Target(
        deployment=names[0] if names else "vllm",
        namespace=spaces[0] if spaces else "default",
    )


def triage(
    source: Capture | InputStore,
    slos: Sequence[SloSpec] | str,
    *,
    incident: tuple[float, float] | None = None,
    baseline: tuple[float, float] | None = None,
    whatif: bool = True,
    base: ScenarioConfig | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    predictor: Predictor | None = None,
    max_local_requests: int = MAX_LOCAL_REQUESTS,
) -> Report:
    """The triage Report: analysis + ranked findings + ranked remediations with predictions.

    ``source`` is the Store ``open_input`` gave, or a Capture (run on an embedded DuckDB).
    ``base`` is what the telemetry cannot show about the deployment (engine flags, model, GPU);
    without it the simulator's defaults stand in.  ``whatif=False`` skips the simulator;
    ``predictor`` replaces the calibrated simulator (tests, other models); a store sends at
    most ``max_local_requests`` requests for the what-if, else it is skipped with a warning."""
    specs = parse_slos(slos) if isinstance(slos, str) else tuple(slos)
    with opened(source) as store:
        return _triage(
            store,
            specs,
            incident=incident,
            baseline=baseline,
            whatif=whatif,
            base=base,
            seed=seed,
            step=progress or (lambda name, detail: None),
            predictor=predictor,
            max_local_requests=max_local_requests,
        )


def _triage(
    store: InputStore,
    specs: Sequence[SloSpec],
    *,
    incident: tuple[float, float] | None,
    baseline: tuple[float, float] | None,
    whatif: bool,
    base: ScenarioConfig | None,
    seed: int,
    step: Progress,
    predictor: Predictor | None,
    max_local_requests: int,
) -> Report:
    if not _has_telemetry(store):
        raise InsufficientDataError(
            "nothing to triage: the capture has no requests, spans, metrics or events"
        )
    capture = store.capture
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    step("analyze", "SLO percentiles, windows and the tail decomposition")
    report = analyze(store, specs, incident=incident, baseline=baseline)
    timings["analyze_s"] = time.perf_counter() - t0
    # the telemetry gaps that limit this diagnosis (doctor), judged on the same window over the
    # tables held here (a server store holds none: its gaps are not examined)
    gaps: tuple[Gap, ...] = ()
    if _holds_tables(capture):
        window = report.windows.incident if report.windows is not None else capture.time_range
        gaps = examine(capture, specs, window).blocking
    if report.windows is None:
        return dataclasses.replace(
            report, kind="triage", title="tailtriage triage", telemetry_gaps=gaps
        )
    t1 = time.perf_counter()
    step("diagnose", "rules over the signals")
    ctx = build_context(
        capture,
        store,
        report.slos,
        report.windows,
        report.decomposition,
        report.attribution,
    )
    engine = report.sections.engine_histograms
    metrics_only = engine is not None and engine.metrics_only
    if metrics_only:
        ctx = with_histogram_rates(ctx, store)
    findings = diagnose(ctx)
    timings["diagnose_s"] = time.perf_counter() - t1
    # band time a finding proved to be another stage (a queue its span was not named for)
    moves = [m for f in findings for m in f.moves]
    decomposition = report.decomposition
    if decomposition is not None and moves:
        decomposition = reclassify(decomposition, moves)
    t2 = time.perf_counter()
    local, warnings = capture, list[str]()
    actionable = any(f.category != "insufficient_telemetry" for f in findings)
    if predictor is None and whatif and actionable:
        wins = [report.windows.incident]
        if report.windows.baseline is not None:
            wins.append(report.windows.baseline)
        local, warnings = store.local_requests(wins, max_local_requests)
    # the planner's guardrails read the signals too: the store stays open
    remediations, more, runs = remediate(
        ctx,
        findings,
        specs,
        local,
        predictor=predictor,
        whatif=whatif,
        base=base,
        seed=seed,
        step=step,
    )
    warnings += more
    timings["remediate_s"] = time.perf_counter() - t2
    timings["whatif_runs"] = float(runs)
    section = TriageSection(
        whatif_seed=seed, calibrated=runs > 0, timings=dict(timings), signals=_signals_read(ctx)
    )
    if metrics_only and remediations:
        warnings = [*warnings, NO_PREDICTION_METRICS_ONLY]
    quality = with_warnings(report.data_quality, warnings)
    return dataclasses.replace(
        report,
        kind="triage",
        title="tailtriage triage",
        decomposition=decomposition,
        findings=findings,
        remediations=remediations,
        data_quality=quality,
        sections=dataclasses.replace(report.sections, triage=section),
        telemetry_gaps=gaps,
    )


def _holds_tables(capture: Capture) -> bool:
    return any(
        t.num_rows for t in (capture.requests, capture.spans, capture.series, capture.events)
    )


def _has_telemetry(store: Store) -> bool:
    """Whether any of requests, spans, metrics or events has a row (one row read of each)."""
    return any(
        store.query(f"SELECT count(*) AS n FROM (SELECT 1 FROM {table} LIMIT 1) AS t")
        .column(0)[0]
        .as_py()
        for table in ("requests", "spans", "series", "events")
    )


def remediate(
    ctx: DiagnosisContext,
    findings: Sequence[Finding],
    specs: Sequence[SloSpec],
    local: Capture,
    *,
    predictor: Predictor | None,
    whatif: bool,
    base: ScenarioConfig | None,
    seed: int,
    step: Progress,
) -> tuple[tuple[Remediation, ...], list[str], int]:
    """Remediations for ``findings``, each predicted by ``predictor`` or by the simulator
    calibrated on ``local`` (the requests of the capture); returns them, the warnings, and how
    many what-if runs were made.  One pool of simulator workers serves every round of runs."""
    replay: ReplayPredictor | None = None
    warnings: list[str] = []
    actionable = any(f.category != "insufficient_telemetry" for f in findings)
    with shared_workers():
        if predictor is None and whatif and actionable and local.requests.num_rows:
            step("calibrate", f"fitting the simulator to {local.requests.num_rows} requests")
            try:
                replay = ReplayPredictor(
                    local, specs, base=base, seed=seed, progress=step, window=ctx.windows.incident
                )
            except TailtriageError as exc:
                warnings.append(f"no predictions: the simulator could not be calibrated ({exc})")
        try:
            remediations = plan(ctx, findings, predictor or replay, target=target_of(local))
        finally:
            if replay is not None:
                warnings.extend(replay.warnings)
                replay.close()
    return tuple(remediations), warnings, (replay.runs if replay else 0)


NO_PREDICTION_METRICS_ONLY = (
    "no predicted effects: the simulator calibrates on per-request timings, which a capture "
    "of metrics without traces does not have; add traces to get predictions"
)


def with_histogram_rates(ctx: DiagnosisContext, store: Store) -> DiagnosisContext:
    """A metrics-only context whose arrival and completion rates come from the engine
    histograms' counts (the requests table is empty, so the rules would read zero load)."""
    sig = ctx.signals

    def rated(w: WindowSignals) -> WindowSignals:
        rates = request_rates(store, (w.start, w.end))
        if rates is None:
            return w
        return dataclasses.replace(w, arrival_rps=rates[0], completion_rps=rates[1])

    base = None if sig.baseline is None else rated(sig.baseline)
    signals = dataclasses.replace(sig, incident=rated(sig.incident), baseline=base)
    return dataclasses.replace(ctx, signals=signals)


def with_warnings(quality: DataQuality, warnings: Sequence[str]) -> DataQuality:
    """``quality`` with ``warnings`` added (each once)."""
    if not warnings:
        return quality
    return dataclasses.replace(
        quality, warnings=tuple(dict.fromkeys((*quality.warnings, *warnings)))
    )


def _signals_read(ctx: DiagnosisContext) -> SignalsRead:
    """Which signals the diagnosis could read (so a user sees what was missing)."""
    sig = ctx.signals
    inc = sig.incident
    return SignalsRead(
        metrics=tuple(sorted({g.metric for g in inc.gauges.values()} | set(inc.counters))),
        hpa_metrics=tuple(sig.hpa_metrics),
        events=len(sig.events),
        incident_arrival_rps=inc.arrival_rps,
        incident_completion_rps=inc.completion_rps,
        baseline_arrival_rps=None if sig.baseline is None else sig.baseline.arrival_rps,
        token_times=sig.has_token_times,
    )
