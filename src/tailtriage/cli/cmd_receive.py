"""`tailtriage receive --otlp HOST:PORT -o capture.duckdb` (design 3.4): an OTLP/HTTP trace
receiver that streams spans into a capture until SIGTERM or Ctrl-C, then derives the
requests and stages."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from tailtriage.cli._app import app
from tailtriage.cli._options import DurationOption, parse_listen, stop_event
from tailtriage.errors import ConfigError

console = Console(highlight=False, stderr=True, soft_wrap=True)


@app.command()
def receive(
    otlp: Annotated[
        str, typer.Option("--otlp", help="Listen address of the OTLP/HTTP receiver.")
    ] = "127.0.0.1:4318",
    output: Annotated[Path, typer.Option("-o", "--output", help="Capture file to write.")] = Path(
        "capture.duckdb"
    ),
    max_queued_spans: Annotated[
        int,
        typer.Option(
            "--max-queued-spans",
            help="Spans held in memory before clients get 429 + Retry-After.",
        ),
    ] = 200_000,
    duration: DurationOption = None,
    rules: Annotated[
        Path | None, typer.Option("--rules", help="Extra stage-mapping rules (YAML).")
    ] = None,
    json: Annotated[
        Path | None, typer.Option("--json", help="Write the receive summary as JSON to this file.")
    ] = None,
) -> None:
    """Receive OTLP/HTTP traces (protobuf or JSON on /v1/traces) into a capture file.

    Point any OpenTelemetry exporter at it, e.g.
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces`, or add an
    `otlphttp` exporter to a Collector. Memory stays bounded: when the queue is full clients
    are told to retry (HTTP 429, Retry-After). SIGTERM or Ctrl-C stops it; every span it
    acknowledged is written, then requests and stages are derived.

    Examples:

        tailtriage receive --otlp 127.0.0.1:4318 -o capture.duckdb

        tailtriage receive -o run.duckdb --duration 600 --json receive.json

    Then: `tailtriage triage capture.duckdb --slo 'p95 ttft < 500ms'`.
    """
    from tailtriage.collect.receiver import serve
    from tailtriage.derive.rules import load_rules

    host, port = parse_listen(otlp, "--otlp")
    if max_queued_spans < 1:
        raise ConfigError("--max-queued-spans must be at least 1")
    rule_set = load_rules(rules)

    async def main() -> object:
        stop = stop_event(duration)

        def ready(listen: str) -> None:
            console.print(
                f"receiving OTLP/HTTP on http://{listen}/v1/traces -> {output}; "
                "SIGTERM or Ctrl-C stops"
            )

        return await serve(
            host,
            port,
            output,
            stop=stop,
            max_queued_spans=max_queued_spans,
            rules=rule_set,
            ready=ready,
        )

    result = asyncio.run(main())
    summary = asdict(result)  # type: ignore[call-overload]
    console.print(
        f"{summary['written_spans']} spans from {summary['requests']} export requests -> "
        f"{output} ({summary['derived_requests']} inference requests); throttled "
        f"{summary['throttled']}, invalid {summary['invalid']}, peak queue "
        f"{summary['peak_queued_spans']} spans"
    )
    console.print(f"Next: tailtriage triage {output} --slo 'p95 ttft < 500ms'")
    if json is not None:
        json.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2) + b"\n")
