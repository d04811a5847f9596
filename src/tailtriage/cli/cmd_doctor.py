"""`tailtriage doctor PATH|URL [--prometheus URL] [--slo ...] [--json OUT]` (design 3.4): which
telemetry is missing for triage, what it leaves undecidable, the fix and its cost."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

import typer
from rich.console import Console

from tailtriage.cli._app import app
from tailtriage.cli._options import IncidentOption, SloOption, slos_from, window_from
from tailtriage.errors import AnalysisError

#: exit status when the stack cannot be triaged for the given SLOs (the AnalysisError branch)
NOT_READY_EXIT: Final = AnalysisError.exit_code

console = Console(highlight=False)
err = Console(stderr=True, highlight=False)


@app.command()
def doctor(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Bundle folder, single file, saved capture (.duckdb), or clickhouse:// / "
            "chdb:// URL."
        ),
    ] = None,
    slo: SloOption = "p95 ttft < 500ms",
    incident: IncidentOption = None,
    json: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help='Write {"triage_ready", "gaps": [{"what", "undecidable", "fix", "cost", ...}]} '
            "to this file.",
        ),
    ] = None,
    prometheus: Annotated[
        str | None, typer.Option("--prometheus", help="Read a live Prometheus at this URL too.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Range start for --prometheus or a ClickHouse PATH."),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Range end for --prometheus or a ClickHouse PATH.")
    ] = None,
) -> None:
    """Which telemetry is missing for triage: what, what it leaves undecidable, the fix, the cost.

    Exits 0 when the SLOs can be triaged from this telemetry, 5 when they cannot.

    Examples:

        tailtriage doctor incident-bundle/ --slo "p99 ttft < 800ms"

        tailtriage doctor --prometheus http://127.0.0.1:9090 --since 1h --json gaps.json

        tailtriage doctor "chdb:///var/traces?table=otel_traces" --slo "p95 itl < 50ms"
    """
    from tailtriage.pipeline.doctor import doctor as run_doctor
    from tailtriage.renderers.doctor import doctor_renderables
    from tailtriage.renderers.jsonrenderer import dumps
    from tailtriage.store.input import load_capture

    specs = slos_from(slo)
    window = window_from(incident, "--incident")
    with err.status("reading telemetry ..."):
        capture = load_capture(path, prometheus=prometheus, since=since, until=until)
        result = run_doctor(capture, specs, incident=window)
    for part in doctor_renderables(result):
        console.print(part)
    if json is not None:
        json.parent.mkdir(parents=True, exist_ok=True)
        json.write_text(dumps(result.to_dict()), encoding="utf-8")
        console.print(f"JSON written to {json}")
    if not result.triage_ready:
        raise typer.Exit(NOT_READY_EXIT)
