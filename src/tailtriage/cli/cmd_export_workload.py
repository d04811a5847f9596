"""`tailtriage export-workload CAPTURE -o FILE`: the incident's arrival schedule at its full
rate, for a load generator to replay on the real stack (``tailtriage bench URL --replay``,
AIPerf's ``mooncake_trace``, inference-perf's ``trace_replay``), so a fix is checked under the
same load that broke the SLO."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console

from tailtriage.cli._app import app

console = Console(highlight=False)


@app.command("export-workload")
def export_workload(
    capture: Annotated[Path, typer.Argument(help="bundle folder, telemetry file or capture")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Write the schedule here.")],
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            help="tailtriage (JSONL t/prompt_tokens/output_tokens), mooncake (JSONL timestamp "
            "ms/input_length/output_length/hash_ids) or inference-perf (the Azure trace CSV)",
        ),
    ] = "tailtriage",
    seed: Annotated[int, typer.Option(help="Seed of the rebuilt arrivals (sampled traces).")] = 0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write a JSON summary (requests, sampling).")
    ] = None,
) -> None:
    """Write the capture's full-rate arrival schedule (timestamps, prompt and output lengths).

    When only a share of requests was traced, the schedule is rebuilt at the rate the
    request counters show (vllm:request_success_total), lengths drawn from the traced ones.

    Examples: `tailtriage export-workload incident/ -o incident.jsonl` then
    `tailtriage bench http://127.0.0.1:8000 --replay incident.jsonl`;
    `tailtriage export-workload incident/ --format mooncake -o trace.jsonl` for AIPerf;
    `tailtriage export-workload incident/ --format inference-perf -o trace.csv`.
    """
    from tailtriage.errors import ConfigError
    from tailtriage.loadgen.replay_formats import FORMATS, ReplayItem, write_replay
    from tailtriage.remediation.calibrate.sampling import incident_workload
    from tailtriage.store.input import load_capture

    if format_ not in FORMATS:
        raise ConfigError(f"--format {format_!r}: use one of {', '.join(FORMATS)}")
    cap = load_capture(capture)
    workload, t0, part = incident_workload(cap, seed=seed)
    items = [
        ReplayItem(float(a), int(p), int(o))
        for a, p, o in zip(
            workload.arrival, workload.prompt_tokens, workload.output_tokens, strict=True
        )
    ]
    n = write_replay(items, output, format_, start_unix_s=t0)
    span = items[-1].at if items else 0.0
    summary = {
        "requests": n,
        "duration_s": round(span, 3),
        "rate_rps": round(n / span, 4) if span > 0 else None,
        "format": format_,
        "output": str(output),
        "start_unix_s": t0,
        "sampling": part,
    }
    how = (
        f"rebuilt at the counted rate from {part['traced']:,} traces "
        f"({part['ratio']:.1%} of requests traced)"
        if part.get("rebuilt")
        else "the traced requests as they arrived"
    )
    console.print(
        f"wrote {n:,} requests over {span:,.0f} s ({summary['rate_rps']} req/s; {how}) "
        f"to {output} [{format_}]"
    )
    if json_out is not None:
        json_out.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
