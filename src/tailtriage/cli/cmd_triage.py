"""`tailtriage triage PATH --slo ... [--baseline A..B] [--incident A..B] [--json OUT] [--html OUT]`
(design 3.4): ingest, analyze, diagnose and remediate in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from tailtriage.cli._app import app
from tailtriage.cli._options import (
    BaselineOption,
    IncidentOption,
    JsonOption,
    KeepContentOption,
    SloOption,
    TimeoutOption,
    slos_from,
    window_from,
)
from tailtriage.outputs import check_outputs
from tailtriage.report import Report
from tailtriage.sources._safety import using_timeout

console = Console(highlight=False)
err = Console(stderr=True, highlight=False)

HtmlOption = Annotated[
    Path | None, typer.Option("--html", help="Write the self-contained HTML report here.")
]


@app.command()
def triage(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Bundle folder, single file, saved capture (.duckdb), or clickhouse:// / chdb:// URL."
        ),
    ] = None,
    slo: SloOption = "p95 ttft < 500ms",
    incident: IncidentOption = None,
    baseline: BaselineOption = None,
    json: JsonOption = None,
    html: HtmlOption = None,
    prometheus: Annotated[
        str | None, typer.Option("--prometheus", help="Read a live Prometheus at this URL too.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Range start for --prometheus or a ClickHouse PATH (unix, RFC 3339, 30m).",
        ),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Range end for --prometheus or a ClickHouse PATH.")
    ] = None,
    whatif: Annotated[
        bool, typer.Option("--whatif/--no-whatif", help="Predict each fix on the simulator.")
    ] = True,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the what-if runs.")] = 0,
    keep_content: KeepContentOption = False,
    timeout: TimeoutOption = None,
) -> None:
    """Why is the SLO breached, what proves it, and what will each fix do?"""
    from tailtriage.pipeline.triage import triage as run_triage
    from tailtriage.store.input import open_input

    specs = slos_from(slo)
    inc = window_from(incident, "--incident")
    base = window_from(baseline, "--baseline")
    check_outputs(inputs=[path], outputs=[json, html])
    with using_timeout(timeout), err.status("reading telemetry ...") as status:

        def progress(step: str, detail: str) -> None:
            status.update(f"{step}: {detail}")

        # a ClickHouse PATH stays there: per-span and per-request scans run in ClickHouse
        with open_input(
            path, since, until, prometheus=prometheus, keep_content=keep_content
        ) as store:
            report = run_triage(
                store,
                specs,
                incident=inc,
                baseline=base,
                whatif=whatif,
                seed=seed,
                progress=progress,
            )
    print_report(report, console)
    write_outputs(report, json=json, html=html, console=console)


def print_report(report: Report, out: Console) -> None:
    from tailtriage.renderers.terminal import TerminalRenderer

    renderer = TerminalRenderer(width=out.width, color=out.is_terminal)
    for part in renderer.renderables(report):
        out.print(part)


def write_outputs(
    report: Report, *, json: Path | None, html: Path | None, console: Console
) -> None:
    from tailtriage.renderers import write_report

    if json is not None:
        write_report(report, json, "json")
        console.print(f"JSON report written to {json}", markup=False)
    if html is not None:
        write_report(report, html, "html")
        console.print(f"HTML report written to {html}", markup=False)
