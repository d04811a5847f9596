"""analyze / triage / ingest / export wired for ClickHouse ``otel_traces`` (issue 8).

The per-span work (stage rules, critical path, per-request TTFT) runs inside ClickHouse when
the store opens; the analyses and the diagnosis send their SQL to it and get aggregates and the
tail band back.  Only the simulator's what-if needs requests in Python: it gets those of the
incident and baseline windows (never spans), and is skipped with a warning when they are more
than ``max_local_requests``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.slo import parse_slos
from tailtriage.analyses.tail import TailOptions
from tailtriage.diagnosis import build_context, diagnose
from tailtriage.errors import InputError
from tailtriage.model import Capture, FileProvenance, Metadata
from tailtriage.pipeline.analyze import analyze_store
from tailtriage.pipeline.triage import Progress, remediate, with_warnings
from tailtriage.remediation import Predictor
from tailtriage.report import Report
from tailtriage.report_sections import TriageSection
from tailtriage.simulator.config import ScenarioConfig
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_bundle, read_file
from tailtriage.sources.clickhouse import ClickHouseStore, connect, ingest, open_store
from tailtriage.sources.clickhouse_export import export_spans
from tailtriage.sources.clickhouse_url import parse_url

#: requests of the incident + baseline windows the what-if may pull into Python
MAX_LOCAL_REQUESTS = 200_000

Time = str | float | None


def _metadata(store: ClickHouseStore) -> Metadata:
    return store.repairs().merged(
        Metadata(
            provenance=(
                FileProvenance(path=store.target.display(), format="clickhouse_otel_traces"),
            ),
            extra={"clickhouse": {"url": store.target.display(), "window": store.window}},
        )
    )


def _options(
    incident: tuple[float, float] | None, baseline: tuple[float, float] | None
) -> TailOptions:
    return TailOptions(incident=incident, baseline=baseline)


def analyze_url(
    url: str,
    slos: Sequence[SloSpec] | str,
    *,
    since: Time = None,
    until: Time = None,
    rules: str | None = None,
    incident: tuple[float, float] | None = None,
    baseline: tuple[float, float] | None = None,
) -> Report:
    """The analyze Report of the spans in ClickHouse, computed there."""
    specs = parse_slos(slos) if isinstance(slos, str) else tuple(slos)
    with open_store(url, rules=rules, since=since, until=until) as store:
        return analyze_store(store, specs, _options(incident, baseline), _metadata(store))


def triage_url(
    url: str,
    slos: Sequence[SloSpec] | str,
    *,
    since: Time = None,
    until: Time = None,
    rules: str | None = None,
    incident: tuple[float, float] | None = None,
    baseline: tuple[float, float] | None = None,
    whatif: bool = True,
    base: ScenarioConfig | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    predictor: Predictor | None = None,
    max_local_requests: int = MAX_LOCAL_REQUESTS,
) -> Report:
    """The triage Report of the spans in ClickHouse: analysis and diagnosis run as SQL there;
    the what-if replays the requests of the incident and baseline windows."""
    specs = parse_slos(slos) if isinstance(slos, str) else tuple(slos)
    step = progress or (lambda name, detail: None)
    with open_store(url, rules=rules, since=since, until=until) as store:
        step("analyze", f"in ClickHouse at {store.target.where}")
        report = analyze_store(store, specs, _options(incident, baseline), _metadata(store))
        report = dataclasses.replace(report, kind="triage", title="tailtriage triage")
        if report.windows is None:
            return report
        step("diagnose", "rules over the signals in ClickHouse")
        wins = [report.windows.incident]
        if report.windows.baseline is not None:
            wins.append(report.windows.baseline)
        # the rules read their signals through the store; no capture crosses the wire
        ctx = build_context(
            Capture(),
            store,
            report.slos,
            report.windows,
            report.decomposition,
            report.attribution,
        )
        findings = diagnose(ctx)
        local, warnings = Capture(), list[str]()
        actionable = any(f.category != "insufficient_telemetry" for f in findings)
        if predictor is None and whatif and actionable:
            local, warnings = _local_requests(store, wins, max_local_requests)
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
    quality = with_warnings(report.data_quality, [*warnings, *more])
    section = TriageSection(whatif_seed=seed, calibrated=runs > 0)
    return dataclasses.replace(
        report,
        findings=findings,
        remediations=remediations,
        data_quality=quality,
        sections=dataclasses.replace(report.sections, triage=section),
    )


def _local_requests(
    store: ClickHouseStore, windows: Sequence[tuple[float, float]], limit: int
) -> tuple[Capture, list[str]]:
    """Requests (and stages) arriving in ``windows``, when there are at most ``limit``."""
    cond = " OR ".join(f"(arrival >= {lo!r} AND arrival < {hi!r})" for lo, hi in windows)
    n = int(store.query(f"SELECT count() AS n FROM requests WHERE {cond}").column("n")[0].as_py())
    if n > limit:
        return Capture(), [
            f"no predictions: {n} requests in the incident and baseline windows exceed the "
            f"what-if limit of {limit}; narrow --since/--until or --incident"
        ]
    return ingest(store, where=cond), []


def ingest_url(
    url: str, *, since: Time = None, until: Time = None, rules: str | None = None
) -> Capture:
    """Requests and stages derived in ClickHouse, as a local Capture (no spans)."""
    with open_store(url, rules=rules, since=since, until=until) as store:
        return ingest(store)


def export_bundle(path: str | Path, url: str, *, old_spelling: bool = False) -> int:
    """Load the spans of a bundle (folder or file) into the ``otel_traces`` table ``url``
    names (created with the exporter's DDL); return the number of spans written."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", path=str(p))
    options = ReadOptions()
    capture = read_bundle(p, options) if p.is_dir() else read_file(p, options)
    target = parse_url(url)
    engine = connect(target)
    try:
        return export_spans(engine, target, capture.spans, old_spelling=old_spelling)
    finally:
        engine.close()
