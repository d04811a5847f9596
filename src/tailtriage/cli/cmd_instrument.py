"""`tailtriage instrument --gateway G --engine E [--namespace N] [--exporter X] --out DIR`
(design 3.4): the configs that make a serving stack triage-ready, each commented with why."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tailtriage.cli._app import app
from tailtriage.cli._options import slos_from

console = Console(highlight=False)


@app.command()
def instrument(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the files into.")],
    gateway: Annotated[
        str, typer.Option("--gateway", help="istio | envoy | knative | nginx")
    ] = "istio",
    engine: Annotated[str, typer.Option("--engine", help="vllm | sglang | dynamo")] = "vllm",
    namespace: Annotated[
        str, typer.Option("--namespace", help="Namespace of the engine and the Collector.")
    ] = "default",
    exporter: Annotated[
        str,
        typer.Option(
            "--exporter",
            help="Where the Collector sends traces: file | clickhouse | tempo | jaeger",
        ),
    ] = "file",
    slo: Annotated[
        str | None,
        typer.Option(
            "--slo",
            help="SLOs for the tail-sampling threshold and the burn-rate "
            'alerts (default "p95 ttft < 500ms, p95 itl < 50ms").',
        ),
    ] = None,
    json: Annotated[
        Path | None,
        typer.Option("--json", help="Write the list of files written (and the choices) here."),
    ] = None,
) -> None:
    """Write the configs that make a stack triage-ready, each commented with why.

    An OpenTelemetry Collector with tail sampling, the gateway's and the engine's tracing,
    Prometheus scrapes, recording rules that split queueing from execution, SLO burn-rate
    alerts, and the HPA / KEDA objects that scale on the engine queue.

    Examples:

        tailtriage instrument --gateway istio --engine vllm --out instrument/

        tailtriage instrument --gateway nginx --engine sglang --exporter clickhouse \\
            --namespace llm --slo "p99 ttft < 1s" --out instrument/
    """
    from tailtriage.instrument.render import InstrumentOptions, render_all, with_defaults, write_all
    from tailtriage.renderers.jsonrenderer import dumps

    opts = with_defaults(
        InstrumentOptions(
            gateway=gateway,
            engine=engine,
            namespace=namespace,
            exporter=exporter,
            slos=slos_from(slo) if slo else (),
        )
    )
    rendered = render_all(opts)
    paths = write_all(rendered, out)
    table = Table("file", "why", title=Text(f"written to {out}"), title_justify="left")
    for f, p in zip(rendered, paths, strict=True):
        why = next(
            (ln.lstrip("# ").strip() for ln in f.text.splitlines() if ln.startswith("#")), ""
        )
        table.add_row(Text(str(p)), Text(why))
    console.print(table)
    if json is not None:
        json.parent.mkdir(parents=True, exist_ok=True)
        json.write_text(
            dumps(
                {
                    "files": [str(p) for p in paths],
                    "gateway": gateway,
                    "engine": engine,
                    "namespace": namespace,
                    "exporter": exporter,
                    "slos": [str(s) for s in opts.slos],
                }
            ),
            encoding="utf-8",
        )
