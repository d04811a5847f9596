"""`tailtriage exporter CAPTURE [--port N] [--speed S] [--loop]`: a Prometheus exporter of
per-stage latency (queueing and execution as separate series), fed by a capture
(docs/exporter.md)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from tailtriage.cli._app import app


@app.command()
def exporter(
    path: Annotated[str, typer.Argument(help="Bundle folder, file or saved capture to feed.")],
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0: any).")] = 9464,
    speed: Annotated[
        float,
        typer.Option(
            "--speed",
            help="Replay speed: 0 files everything at once; 10 replays "
            "the capture ten times faster than it happened.",
        ),
    ] = 0.0,
    loop: Annotated[bool, typer.Option("--loop", help="Start the replay over at its end.")] = False,
    duration: Annotated[
        float | None, typer.Option("--duration", help="Stop after this many seconds.")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write what was exported as JSON at exit.")
    ] = None,
) -> None:
    """Serve /metrics on 127.0.0.1 with one latency histogram per stage — gateway_queue,
    pending, api_server, engine_queue, prefill, kv_transfer, decode — labelled
    kind="queue" or kind="execution", plus TTFT, each sample with its trace id as an
    OpenMetrics exemplar. Point Prometheus at it and load the dashboards of
    `tailtriage dashboards`.

    Examples:

    `tailtriage exporter bundle/ --port 9464`

    `tailtriage exporter capture.duckdb --speed 60 --loop`   (one hour replayed per minute)
    """
    from tailtriage.exporter.metrics import StageMetrics
    from tailtriage.exporter.observations import CaptureSource, capture_observations, stage_kind
    from tailtriage.exporter.server import replay, serve
    from tailtriage.store.input import load_capture

    capture = load_capture(path)
    observations = capture_observations(capture)
    counts: dict[str, int] = {}
    for obs in observations:
        counts[obs.stage] = counts.get(obs.stage, 0) + 1
    metrics = StageMetrics()
    served = serve(metrics, port)
    console = Console(highlight=False)
    console.print(f"exporting {path} on [bold]http://127.0.0.1:{served.port}/metrics[/]")
    table = Table()
    for col in ("stage", "kind", "samples"):
        table.add_column(col, justify="right" if col == "samples" else "left")
    for stage, n in counts.items():
        table.add_row(stage, "—" if stage == "ttft" else stage_kind(stage), f"{n:,}")
    console.print(table)
    stop = threading.Event()
    timer = threading.Timer(duration, stop.set) if duration else None
    if timer is not None:
        timer.start()
    filed = 0
    try:
        filed = replay(metrics, CaptureSource(capture), speed=speed, loop=loop, stop=stop)
        if duration and not stop.is_set():
            console.print(f"{filed:,} observations filed; serving until --duration ends")
            stop.wait()
        elif not duration and not loop:
            console.print(f"{filed:,} observations filed; serving until Ctrl-C")
            stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        if timer is not None:
            timer.cancel()
        served.shutdown()
    if json_out is not None:
        doc = {"port": served.port, "filed": filed, "samples_per_pass": counts}
        json_out.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
