"""`tailtriage dashboards --out DIR [--slo ...]`: Grafana dashboard JSON plus Prometheus
recording and alert rules over the exporter's series (docs/exporter.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from tailtriage.cli._app import app

#: the TTFT SLO the alert uses when --slo names none
DEFAULT_TTFT_SLO_S = 1.0


@app.command()
def dashboards(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the files into.")],
    slo: Annotated[
        str | None, typer.Option("--slo", help='The TTFT SLO to alert on, e.g. "p95 ttft < 500ms".')
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the list of files written as JSON.")
    ] = None,
) -> None:
    """Write the queue-vs-execution Grafana dashboard (p95 of queueing vs execution, the p95
    split per stage over time, replicas and HPA against queue depth) and the recording and
    alert rules, for Prometheus scraping `tailtriage exporter`.

    Example: `tailtriage dashboards --out monitoring/ --slo "p95 ttft < 500ms"`, then
    `promtool check rules monitoring/tailtriage-rules.yml` and import the JSON in Grafana."""
    from tailtriage.analyses.slo import parse_slos
    from tailtriage.errors import InputError
    from tailtriage.exporter.dashboards import dashboard_files

    ttft = [s.threshold for s in parse_slos(slo) if s.metric == "ttft"] if slo else []
    files = dashboard_files(min(ttft) if ttft else DEFAULT_TTFT_SLO_S)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.files.items():
            (out / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the dashboards ({exc.strerror})", path=str(out)) from None
    console = Console(highlight=False)
    for name in files.files:
        console.print(f"wrote {out / name}")
    if json_out is not None:
        json_out.write_bytes(orjson.dumps({"files": [str(out / n) for n in files.files]}))
