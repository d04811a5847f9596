"""`tailtriage demo [--json OUT] [--html OUT]` (design 3.4): the worked example end to end."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from tailtriage.cli._app import app
from tailtriage.cli._options import JsonOption
from tailtriage.cli.cmd_triage import HtmlOption
from tailtriage.outputs import check_outputs, write_bytes
from tailtriage.report import Report
from tailtriage.report_sections import ms

console = Console(highlight=False)

#: how the stages group into the three places the worked example names
GROUPS = {
    "the ingress gateway": ("client", "ingress", "gateway_queue"),
    "waiting for a pod": ("pending",),
    "the engine": ("api_server", "engine_queue", "prefill", "unattributed"),
}


@app.command()
def demo(
    json: JsonOption = None,
    html: HtmlOption = None,
    keep: Annotated[
        Path | None, typer.Option("--keep", help="Keep the two simulated bundles in this folder.")
    ] = None,
) -> None:
    """The worked example: simulate a breaching stack, triage it, apply the fixes, verify."""
    from tailtriage.pipeline.demo import SLO, run_demo

    after_html = None if html is None else html.with_name(f"{html.stem}-after{html.suffix}")
    check_outputs(inputs=[], outputs=[json, html, after_html])
    console.print(
        Panel(
            Text(
                "An LLM API is paged: p95 time-to-first-token breaches its 500 ms SLO. tailtriage "
                "simulates that stack, exports its telemetry as real files (OTLP traces, "
                "Prometheus, kubectl events), and triages them like yours.",
            ),
            title="tailtriage demo",
        )
    )
    started = time.perf_counter()
    with console.status("starting ...") as status:

        def say(step: str, msg: str) -> None:
            if step in ("simulate", "bundle", "apply"):
                console.print(f"[bold cyan]>[/] {msg}")
            status.update(f"{step}: {msg}")

        result = run_demo(workdir=keep, say=say)
    console.print(_story(result.before, result.after, result.comparison, SLO))
    top = result.before.remediations[0] if result.before.remediations else None
    if top is not None and result.applied and top is not result.applied[0]:
        console.print(
            f"[dim]tailtriage's top single fix was {top.action}; the worked example applies "
            "its fixes together:[/]"
        )
    for line in _applied(result.applied):
        console.print(line)
    console.print(
        f"[dim]Demo finished in {time.perf_counter() - started:.0f} s. "
        "Next: tailtriage triage YOUR_BUNDLE --slo 'p95 ttft < 500ms' --html report.html[/]"
    )
    if json is not None:
        write_bytes(
            json,
            orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY),
        )
        console.print(f"JSON written to {json}", markup=False)
    if html is not None and after_html is not None:
        from tailtriage.renderers import write_report

        write_report(result.before, html, "html")
        write_report(result.after, after_html, "html")
        console.print(f"HTML reports written to {html} and {after_html}", markup=False)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms"


def _groups(report: Report) -> str:
    d = report.decomposition
    if d is None:
        return "no stage timings"
    by = {s.stage: s.seconds for s in d.stages}
    parts = [
        f"{_ms(sum(by.get(s, 0.0) for s in stages))} in {name}" for name, stages in GROUPS.items()
    ]
    return ", ".join(parts)


def _story(before: Report, after: Report, comparison: Report, slo: str) -> Panel:
    text = Text()
    b = before.slos[0] if before.slos else None
    a = after.slos[0] if after.slos else None
    if b is not None:
        text.append("Before: ", style="bold")
        text.append(
            f"p{b.spec.percentile:g} TTFT {_ms(b.observed)} against {_ms(b.spec.threshold)}"
        )
        text.append(
            " BREACHED" if b.breached else " ok", style="bold red" if b.breached else "green"
        )
        text.append(f"\n  the p95 request spends {_groups(before)}.\n")
    for i, f in enumerate(before.findings[:2], 1):
        text.append(f"Finding {i}: ", style="bold")
        text.append(f"{f.category}", style="bold yellow")
        text.append(f" ({f.confidence:.2f}) {f.summary}\n")
    if a is not None:
        text.append("After the fixes: ", style="bold")
        text.append(f"p{a.spec.percentile:g} TTFT {_ms(a.observed)}")
        text.append(
            " SLO met" if not a.breached else " still breached",
            style="bold green" if not a.breached else "bold red",
        )
        text.append(f"\n  the p95 request spends {_groups(after)}.\n")
    section = comparison.sections.compare
    for r in () if section is None else section.slos:
        ci = r.delta_ci
        ci_s = f" (95% CI {ms(ci[0]):.0f} .. {ms(ci[1]):.0f} ms)" if ci else ""
        text.append(f"Change: {ms(r.delta):+.0f} ms{ci_s}: {r.verdict}.\n")
    if section is not None:
        bt = section.throughput_before.get("output_tokens_per_s", 0.0)
        at = section.throughput_after.get("output_tokens_per_s", 0.0)
        if bt:
            text.append(
                f"Throughput, reported apart from latency: {bt:.0f} -> {at:.0f} output tokens/s "
                f"({(at - bt) / bt:+.1%}).\n"
            )
    return Panel(text, title=f"Worked example: {slo}")


def _applied(applied: tuple[object, ...]) -> list[Text]:
    from tailtriage.remediation import Remediation

    out: list[Text] = []
    for r in applied:
        if not isinstance(r, Remediation):
            continue
        out.append(Text.assemble(("Applied: ", "bold"), r.summary))
        pred = ", ".join(
            f"{k} {v * 1000:.0f} ms" if k != "throughput_change_pct" else f"throughput {v:+.1f}%"
            for k, v in r.predicted.items()
        )
        if pred:
            out.append(Text(f"  predicted before applying: {pred}", style="dim"))
        if r.config:
            out.append(Text(r.config.rstrip(), style="dim"))
    return out
