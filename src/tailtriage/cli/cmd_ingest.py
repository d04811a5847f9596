"""`tailtriage ingest` (see design 3.4): read telemetry into a saved capture and summarise it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import pyarrow.compute as pc
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from tailtriage.cli._app import app
from tailtriage.cli._options import KeepContentOption, TimeoutOption
from tailtriage.model import Capture
from tailtriage.model.vocabulary import STAGES
from tailtriage.outputs import check_outputs, write_bytes
from tailtriage.renderers._format import fmt_time
from tailtriage.sources._safety import using_timeout
from tailtriage.store.input import load_capture

#: inputs at least this big get a progress bar
PROGRESS_MIN_BYTES = 32 * 1024 * 1024


def summarize(capture: Capture, output: str | None = None) -> dict[str, Any]:
    """The ingest summary (the ``--json`` document); times in seconds, shares in 0..1."""
    st = capture.stages
    totals: dict[str, float] = {}
    if st.num_rows:
        grouped = st.group_by("stage").aggregate([("duration", "sum")])
        totals = dict(
            zip(grouped["stage"].to_pylist(), grouped["duration_sum"].to_pylist(), strict=True)
        )
    stages = {s: round(totals[s], 6) for s in STAGES if s in totals}
    total = sum(totals.values())
    tr = capture.time_range
    meta = capture.metadata
    return {
        "output": output,
        "requests": capture.requests.num_rows,
        "spans": capture.spans.num_rows,
        "series": capture.series.num_rows,
        "events": capture.events.num_rows,
        "token_times": capture.token_times.num_rows,
        "stages_s": stages,
        "unattributed_share": round(totals.get("unattributed", 0.0) / total, 6) if total else 0.0,
        "time_range": list(tr) if tr else None,
        "ttft_known": int(pc.sum(pc.is_valid(capture.requests["ttft"])).as_py() or 0)
        if capture.requests.num_rows
        else 0,
        "skipped_files": [{"path": s.path, "reason": s.reason} for s in meta.skipped_files],
        "clock_adjustments": int(meta.quality.get("spans.clock_skew_adjusted", 0))
        or len(meta.clock_adjustments),
        "quality": dict(meta.quality),
        "files": [
            {"path": p.path, "format": p.format, "records": p.records} for p in meta.provenance
        ],
        "warnings": list(meta.warnings),
    }


def _input_bytes(path: Path | None) -> int:
    if path is None or not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _load(path: Path | None, console: Console, **kwargs: Any) -> Capture:
    size = _input_bytes(path)
    if size < PROGRESS_MIN_BYTES or not console.is_terminal:
        return load_capture(path, **kwargs)
    columns = ("{task.description}", BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("reading", total=size)
        cap = load_capture(path, progress=lambda n: bar.advance(task, n), **kwargs)
        bar.update(task, description="deriving")
    return cap


def _print(summary: dict[str, Any], console: Console) -> None:
    console.print(
        f"[bold]{summary['requests']}[/] requests, [bold]{summary['spans']}[/] spans, "
        f"{summary['series']} series samples, {summary['events']} events"
        + (f" -> {escape(summary['output'])}" if summary["output"] else "")
    )
    if summary["time_range"]:
        lo, hi = summary["time_range"]
        console.print(f"time range: {fmt_time(lo)} → {fmt_time(hi)} UTC ({hi - lo:.1f} s)")
    if summary["stages_s"]:
        table = Table(title="stages covered (critical path, all requests)")
        table.add_column("stage")
        table.add_column("total s", justify="right")
        table.add_column("share", justify="right")
        total = sum(summary["stages_s"].values()) or 1.0
        for stage, secs in summary["stages_s"].items():
            table.add_row(stage, f"{secs:.3f}", f"{secs / total:.1%}")
        console.print(table)
    console.print(f"unattributed share: {summary['unattributed_share']:.2%}")
    console.print(f"clock-skew corrections: {summary['clock_adjustments']}")
    for s in summary["skipped_files"]:
        console.print(
            f"[yellow]skipped[/] {escape(s['path'])}: {escape(s['reason'])}", highlight=False
        )
    for w in summary["warnings"][:20]:
        console.print(f"[yellow]warning[/] {escape(w)}", highlight=False)
    _next_step(summary, console)


def _next_step(summary: dict[str, Any], console: Console) -> None:
    """What to run next, or why there is nothing to triage yet."""
    out = summary["output"] or "capture.duckdb"
    if summary["requests"]:
        console.print(
            f"Next: tailtriage triage {escape(out)} --slo 'p95 ttft < 500ms' --html report.html",
            highlight=False,
        )
    elif summary["spans"]:
        console.print(
            "[yellow]No span is an inference request[/], so there are no stages to triage: a "
            "request needs an engine span (vLLM's llm_request), a gen_ai.* span or a SERVER span "
            "on an OpenAI route such as /v1/chat/completions. If your services name theirs "
            "otherwise, map them with --rules FILE (docs/model.md, stage mapping rules).",
            highlight=False,
        )
    elif summary["series"]:
        console.print(
            "[yellow]Metrics only[/]: per-request stages come from traces; add the traces (OTLP, "
            "Jaeger, Zipkin) to the bundle, then: tailtriage triage BUNDLE --slo 'p95 ttft < "
            "500ms'",
            highlight=False,
        )


@app.command()
def ingest(
    path: Annotated[
        Path | None, typer.Argument(help="bundle folder, telemetry file or saved capture")
    ] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="capture file to write")] = Path(
        "capture.duckdb"
    ),
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the summary as JSON here")
    ] = None,
    rules: Annotated[
        Path | None, typer.Option("--rules", help="extra stage-mapping rules (YAML)")
    ] = None,
    prometheus: Annotated[
        str | None, typer.Option("--prometheus", help="live Prometheus base URL")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="start: unix s, RFC 3339, or e.g. 1h (ago)")
    ] = None,
    until: Annotated[str | None, typer.Option("--until", help="end (default: now)")] = None,
    keep_content: KeepContentOption = False,
    timeout: TimeoutOption = None,
) -> None:
    """Read telemetry (bundle folder, file, saved capture, live Prometheus) into a capture file."""
    console = Console(stderr=json_out is not None and str(json_out) == "-")
    check_outputs(inputs=[path, rules], outputs=[output, json_out])
    with using_timeout(timeout):
        cap = _load(
            path,
            console,
            rules=rules,
            prometheus=prometheus,
            since=since,
            until=until,
            keep_content=keep_content,
        )
    cap.save(output)
    summary = summarize(cap, str(output))
    _print(summary, console)
    if json_out is not None:
        blob = orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
        if str(json_out) == "-":
            typer.echo(blob.decode())
        else:
            write_bytes(json_out, blob + b"\n")
