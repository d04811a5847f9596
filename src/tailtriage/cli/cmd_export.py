"""`tailtriage export PATH --clickhouse URL` (design 3.4, issue 8): a bundle's spans into an
``otel_traces`` table, so the scale path can be tried on one's own files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tailtriage.cli._app import app
from tailtriage.outputs import check_output_folder


@app.command()
def export(
    path: Annotated[Path, typer.Argument(help="bundle folder or telemetry file with traces")],
    clickhouse: Annotated[
        str,
        typer.Option(
            "--clickhouse",
            help="clickhouse://user@host:8123/db?table=otel_traces or chdb:///dir?table=... "
            "(password from TAILTRIAGE_CLICKHOUSE_PASSWORD)",
        ),
    ],
    old_spelling: Annotated[
        bool,
        typer.Option(
            "--old-spelling",
            help="SPAN_KIND_SERVER / STATUS_CODE_OK, as older exporter releases wrote",
        ),
    ] = False,
) -> None:
    """Load the spans of a bundle into an otel_traces table (the Collector exporter's DDL)."""
    from tailtriage.store.clickhouse_export import export_bundle
    from tailtriage.store.clickhouse_url import parse_url

    target = parse_url(clickhouse)
    if target.in_process:  # chDB writes its database folder: never into the input
        check_output_folder(target.path, inputs=[path])
    t0 = time.perf_counter()
    n = export_bundle(path, clickhouse, old_spelling=old_spelling)
    Console().print(
        f"exported {n} spans to {escape(target.display())} in {time.perf_counter() - t0:.1f} s",
        highlight=False,
    )
