"""`tailtriage analyze PATH --slo ... [--incident A..B] [--baseline A..B] [--json OUT]` (design 3.4).

Where the tail time goes: SLO status over the incident window, the percentile table, the stage
decomposition of the SLO percentile against the baseline, and the stages that explain the breach.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tailtriage.cli._app import app
from tailtriage.cli._options import (
    BaselineOption,
    IncidentOption,
    JsonOption,
    PathArgument,
    SloOption,
    slos_from,
    window_from,
)
from tailtriage.outputs import check_outputs, write_text
from tailtriage.report import Report

console = Console(highlight=False, soft_wrap=False)


@app.command()
def analyze(
    path: PathArgument,
    slo: SloOption,
    incident: IncidentOption = None,
    baseline: BaselineOption = None,
    json: JsonOption = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the self-contained HTML report here.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="ClickHouse PATH only: spans from (unix, RFC 3339, 30m)."),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="ClickHouse PATH only: spans until.")
    ] = None,
) -> None:
    """Tail analysis: SLO percentiles, incident/baseline windows, decomposition and attribution."""
    from tailtriage.pipeline.analyze import analyze as run_analysis
    from tailtriage.renderers.jsonrenderer import dumps
    from tailtriage.store.input import open_input

    specs = slos_from(slo)
    inc = window_from(incident, "--incident")
    base = window_from(baseline, "--baseline")
    check_outputs(inputs=[path], outputs=[json, html])
    # a ClickHouse PATH stays there: every scan runs in ClickHouse, aggregates come back
    with open_input(path, since, until) as store:
        report = run_analysis(store, specs, incident=inc, baseline=base)
    for part in renderables(report):
        console.print(part)
    if json is not None:
        write_text(json, dumps(report.to_dict()))
        console.print(f"JSON report written to {json}", markup=False)
    if html is not None:
        from tailtriage.renderers import write_report

        write_report(report, html, "html")
        console.print(f"HTML report written to {html}", markup=False)


def _ms(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v * 1000:,.1f} ms" if v < 100 else f"{v:,.2f} s"


def _signed_ms(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return ("+" if v >= 0 else "-") + _ms(abs(v))


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def renderables(report: Report) -> Iterator[RenderableType]:
    """The analyze view, top to bottom."""
    yield _windows_text(report)
    yield _slo_table(report)
    if report.percentiles:
        yield _percentile_table(report.percentiles)
    if report.decomposition is not None:
        yield _decomposition_table(report)
    if report.attribution:
        yield _contributors_table(report)
    if report.stage_percentiles:
        yield _stage_percentile_table(report.stage_percentiles)
    yield from _tail_concentration(report)
    for w in report.data_quality.warnings:
        yield Text(f"! {w}", style="yellow")


def _windows_text(report: Report) -> Text:
    w = report.windows
    text = Text(f"{report.data_quality.requests} requests. ", style="bold")
    if w is None:
        return text
    how = "detected" if w.detected else "given"
    text.append(f"Incident ({how}): {_when(w.incident[0])} .. {_when(w.incident[1])} UTC")
    if w.baseline:
        text.append(f"; baseline: {_when(w.baseline[0])} .. {_when(w.baseline[1])} UTC")
    elif any(s.breached for s in report.slos):
        text.append("; no healthy baseline window")
    else:
        text.append("; nothing breaches, so no baseline to compare with")
    return text


def _slo_table(report: Report) -> Table:
    t = Table(title="SLOs over the incident window", title_justify="left")
    for col in ("SLO", "observed", "95% CI", "n", "status"):
        t.add_column(col, justify="left" if col in ("SLO", "status") else "right")
    for s in report.slos:
        status = (
            Text("no data", style="yellow")
            if s.observed is None
            else Text("BREACHED", style="bold red")
            if s.breached
            else Text("ok", style="green")
        )
        ci = f"{_ms(s.ci_low)} .. {_ms(s.ci_high)}"
        t.add_row(str(s.spec), _ms(s.observed), ci, str(s.count), status)
    return t


def _percentile_table(pcts: Mapping[str, Mapping[str, float]]) -> Table:
    keys = list(next(iter(pcts.values())).keys())
    t = Table(title="Latency percentiles (incident window)", title_justify="left")
    t.add_column("metric")
    for k in keys:
        t.add_column(k, justify="right")
    for metric, vals in pcts.items():
        t.add_row(metric, *(_ms(vals.get(k)) for k in keys))
    return t


def _decomposition_table(report: Report) -> Table:
    d = report.decomposition
    assert d is not None
    t = Table(
        title=f"p{d.percentile:g} {d.metric} by stage (band p{d.band[0]:g}-p{d.band[1]:g}, "
        f"{d.count} requests)",
        title_justify="left",
    )
    for col in ("stage", "incident", "baseline", "delta"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for s in d.stages:
        delta = None if s.baseline_seconds is None else s.seconds - s.baseline_seconds
        t.add_row(s.stage, _ms(s.seconds), _ms(s.baseline_seconds), _signed_ms(delta))
    total_delta = None if d.baseline_total is None else d.total - d.baseline_total
    t.add_row(
        Text("total", style="bold"), _ms(d.total), _ms(d.baseline_total), _signed_ms(total_delta)
    )
    return t


def _contributors_table(report: Report) -> Table:
    d = report.decomposition
    metric = f"p{d.percentile:g} {d.metric}" if d else "percentile"
    gap = (d.total - d.baseline_total) if d and d.baseline_total is not None else None
    t = Table(title=f"What explains the {metric} breach (vs baseline)", title_justify="left")
    for col in ("stage", "contribution", "share", f"{metric} if only this stage were healthy"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    ranked = sorted(report.attribution.items(), key=lambda kv: -kv[1]["shapley"])
    for stage, a in ranked:
        share = "-" if not gap else f"{a['shapley'] / gap:.0%}".replace("-0%", "0%")
        t.add_row(stage, _signed_ms(a["shapley"]), share, _ms(a["counterfactual"]))
    return t


def _stage_percentile_table(stages: Mapping[str, Mapping[str, float]]) -> Table:
    keys = list(next(iter(stages.values())).keys())
    t = Table(
        title="Per-stage percentiles (each over its own requests: not additive)",
        title_justify="left",
    )
    t.add_column("stage")
    for k in keys:
        t.add_column(k, justify="right")
    for stage, vals in stages.items():
        t.add_row(stage, *(_ms(vals.get(k)) for k in keys))
    return t


def _tail_concentration(report: Report) -> Iterator[Text]:
    """Groups (replica, node, model, prompt size) over-represented among the tail requests."""
    analysis = report.sections.analysis
    for b in () if analysis is None else analysis.breakdowns:
        for row in b.rows:
            # the shares as the JSON report rounds them, so both say the same
            share, tail = round(row.share, 4), round(row.tail_share, 4)
            if len(b.rows) > 1 and tail >= 0.2 and tail >= 2 * share:
                yield Text(
                    f"{b.dimension} {row.key}: {share:.0%} of requests but {tail:.0%} of the "
                    f"{b.metric} tail",
                    style="magenta",
                )
