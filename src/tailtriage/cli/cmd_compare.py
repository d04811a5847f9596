"""`tailtriage compare BEFORE AFTER --slo ... [--json OUT] [--html OUT]` (design 3.4): which SLOs
changed, which stage changed, and whether each tail-percentile change is statistically real."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tailtriage.cli._app import app
from tailtriage.cli._options import JsonOption, SloOption, slos_from, window_from
from tailtriage.cli.cmd_triage import HtmlOption, write_outputs
from tailtriage.outputs import check_outputs
from tailtriage.report import Report
from tailtriage.report_sections import ms

console = Console(highlight=False)
err = Console(stderr=True, highlight=False)


@app.command()
def compare(
    before: Annotated[Path, typer.Argument(help="Capture, bundle or file before the change.")],
    after: Annotated[Path, typer.Argument(help="Capture, bundle or file after the change.")],
    slo: SloOption = "p95 ttft < 500ms",
    before_window: Annotated[
        str | None, typer.Option("--before-window", help="START..END within BEFORE.")
    ] = None,
    after_window: Annotated[
        str | None, typer.Option("--after-window", help="START..END within AFTER.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
    json: JsonOption = None,
    html: HtmlOption = None,
) -> None:
    """Before/after: SLO changes with confidence intervals, per-stage deltas, throughput."""
    from tailtriage.pipeline.compare import compare as run_compare
    from tailtriage.store.input import open_input

    specs = slos_from(slo)
    check_outputs(inputs=[before, after], outputs=[json, html])
    with err.status("reading telemetry ..."), open_input(before) as b, open_input(after) as a:
        report = run_compare(
            b,
            a,
            specs,
            before_window=window_from(before_window, "--before-window"),
            after_window=window_from(after_window, "--after-window"),
            seed=seed,
        )
    for part in renderables(report):
        console.print(part)
    write_outputs(report, json=json, html=html, console=console)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f} ms"


def renderables(report: Report) -> list[Table | Text]:
    data = report.sections.compare
    rows = () if data is None else data.slos
    t = Table(title="SLOs before -> after", title_justify="left")
    for col in ("SLO", "before", "after", "delta (95% CI)", "verdict"):
        t.add_column(col, justify="left" if col in ("SLO", "verdict") else "right")
    for row in rows:
        ci = row.delta_ci
        delta = _ms(ms(row.delta)) + (f" ({_ms(ms(ci[0]))} .. {_ms(ms(ci[1]))})" if ci else "")
        style = {"improved": "green", "regressed": "red"}.get(row.verdict, "yellow")
        slo = f"p{row.percentile:g} {row.metric} < {ms(row.threshold):g}ms"
        met = "meets" if not row.after_breached else "breaches"
        t.add_row(
            slo,
            _ms(ms(row.before)),
            _ms(ms(row.after)),
            delta,
            Text(f"{row.verdict}; now {met} the SLO", style=style),
        )
    out: list[Table | Text] = [t]
    for row in rows:
        if row.warning:
            out.append(Text(f"! {row.warning}", style="yellow"))
    stages = () if data is None else data.stages
    if stages:
        s = Table(title="Stage share of the percentile, before -> after", title_justify="left")
        for col in ("stage", "before", "after", "delta"):
            s.add_column(col, justify="left" if col == "stage" else "right")
        for r in stages:
            s.add_row(r.stage, _ms(ms(r.before)), _ms(ms(r.after)), _ms(ms(r.delta)))
        out.append(s)
    if data is not None:
        b, a = data.throughput_before, data.throughput_after
        out.append(
            Text(
                f"Throughput (separately from latency): {b.get('requests_per_s', 0):.2f} -> "
                f"{a.get('requests_per_s', 0):.2f} req/s, {b.get('output_tokens_per_s', 0):.0f} -> "
                f"{a.get('output_tokens_per_s', 0):.0f} output tokens/s"
            )
        )
    return out
