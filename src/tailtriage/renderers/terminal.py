"""The terminal report (rich): the triage story on one screen.

SLO status first, then where the tail time goes (stage decomposition with baseline and delta),
the ranked findings with their evidence, the remediations with their predicted effect, and one
line of data quality.  Every string from input goes into ``rich.text.Text`` objects, never into
markup, so a span name like ``[bold]`` or ``[link=...]`` is printed as it is."""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tailtriage.renderers import _compare as cmp
from tailtriage.renderers._format import (
    clean,
    fmt_ms,
    fmt_pct,
    fmt_value,
    fmt_window,
    parameters_text,
    predicted_for,
    slo_label,
    stage_color,
)
from tailtriage.renderers._rollout import terminal_section
from tailtriage.renderers.base import register
from tailtriage.renderers.doctor import triage_gaps_section
from tailtriage.report import DataQuality, Decomposition, Finding, Report, SloResult
from tailtriage.report_sections import SloDelta

BAR_WIDTH = 24
MAX_EVIDENCE = 4


@register("terminal")
class TerminalRenderer:
    """Rich terminal output.

    :param width: console width in characters (``None``: the terminal's).
    :param color: emit ANSI colours (False gives plain text, as in the golden tests).
    :param max_findings: findings shown (the JSON and HTML reports keep all of them).
    """

    name = "terminal"
    output_file_extension = "txt"

    def __init__(self, width: int | None = None, color: bool = False, max_findings: int = 5):
        self.width = width
        self.color = color
        self.max_findings = max_findings

    def render(self, report: Report) -> str:
        console = Console(
            file=io.StringIO(),
            width=self.width or 100,
            color_system="truecolor" if self.color else None,
            force_terminal=self.color,
            record=True,
            highlight=False,
            emoji=False,
            _environ={},  # no COLUMNS/NO_COLOR/TERM from the caller: output is reproducible
        )
        for part in self.renderables(report):
            console.print(part)
        text = console.export_text(styles=self.color)
        # rich pads table rows to their width; trailing blanks only make diffs noisy
        return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"

    def renderables(self, report: Report) -> Iterator[RenderableType]:
        """The report as rich renderables, for a CLI that prints to its own console."""
        yield _header(report)
        rows = cmp.compare_rows(report)
        if rows:
            yield _compare_table(rows, cmp.changed_stages(report))
        if report.decomposition is not None:
            labels = ("before", "after") if report.kind == "compare" else ("baseline", "incident")
            yield _decomposition_table(report.decomposition, labels)
        yield from terminal_section(report)
        yield from _findings(report.findings[: self.max_findings], len(report.findings))
        yield from triage_gaps_section(report.telemetry_gaps)
        yield from _remediations(report)
        yield _quality_line(report.data_quality)


def _header(report: Report) -> Panel:
    lines: list[Text] = [_slo_line(s) for s in report.slos]
    if not report.slos:
        lines.append(Text("no SLO given", style="dim"))
    if report.windows is not None:
        w = report.windows
        detected = ", detected" if w.detected else ""
        lines.append(Text.assemble(("incident  ", "bold"), fmt_window(w.incident), detected))
        if w.baseline is not None:
            lines.append(Text.assemble(("baseline  ", "bold"), fmt_window(w.baseline)))
    throughput = _throughput_text(report.throughput)
    if throughput is not None:
        lines.append(throughput)
    return Panel(
        Group(*lines), title=Text(clean(report.title), style="bold"), box=box.ROUNDED, expand=True
    )


def _slo_line(s: SloResult) -> Text:
    if s.observed is None:  # nothing measured: neither met nor breached
        mark, style = ("? no data", "bold yellow")
    else:
        mark, style = ("✗ BREACHED", "bold red") if s.breached else ("✓ met", "bold green")
    text = Text.assemble((f"{slo_label(s.spec)} < {fmt_ms(s.spec.threshold)}", "bold"), "   ")
    text.append(Text.assemble("observed ", (fmt_ms(s.observed), "bold")))
    if s.breached and s.observed is not None:
        mark += f" by {fmt_ms(s.observed - s.spec.threshold)}"
    text.append("  ").append(mark, style=style)
    if s.ci_low is not None and s.ci_high is not None:
        text.append(f"   CI {fmt_ms(s.ci_low)}–{fmt_ms(s.ci_high)}", style="dim")
    text.append(f", n={s.count:,}", style="dim")
    if s.warning:
        text.append(f"\n  ⚠ {clean(s.warning)}", style="yellow")
    return text


def _throughput_text(tp: Mapping[str, float]) -> Text | None:
    if not tp:
        return None
    parts = [
        f"{clean(k).replace('_per_s', '/s').replace('_', ' ')} {fmt_value(v)}"
        for k, v in tp.items()
    ]
    return Text.assemble(("throughput ", "bold"), " · ".join(parts), style="")


def _bar(seconds: float, scale: float, color: str) -> Text:
    cells = 0.0 if scale <= 0 else max(0.0, seconds) / scale * BAR_WIDTH
    full = int(cells)
    partial = " ▏▎▍▌▋▊▉"[int((cells - full) * 8)] if full < BAR_WIDTH else ""
    return Text("█" * full + partial.strip(), style=color)


def _compare_table(rows: Sequence[SloDelta], changed: list[str]) -> Table:
    table = Table(
        title=Text("Before and after (95% intervals)", style="bold"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        caption=Text("stages that moved: " + ", ".join(clean(s) for s in changed))
        if changed
        else None,
        caption_justify="left",
    )
    for name, justify in (
        ("SLO", "left"),
        ("before", "right"),
        ("after", "right"),
        ("change", "right"),
        ("verdict", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        verdict = clean(row.verdict or "–")
        style = {"ok": "green", "bad": "bold red", "warn": "yellow"}.get(
            cmp.verdict_class(verdict), ""
        )
        lo, hi = cmp.ms_pair(row.delta_ci)
        ci = (
            f" [{fmt_ms(lo, signed=True)}, {fmt_ms(hi, signed=True)}]"
            if lo is not None and hi is not None
            else ""
        )
        table.add_row(
            Text(clean(row.label)),
            fmt_ms(cmp.ms(row.before)),
            fmt_ms(cmp.ms(row.after)),
            fmt_ms(cmp.ms(row.delta), signed=True) + ci,
            Text(verdict, style=style),
        )
    return table


def _decomposition_table(
    d: Decomposition, labels: tuple[str, str] = ("baseline", "incident")
) -> Table:
    title = Text.assemble(
        (clean(f"Where the p{d.percentile:g} {d.metric.upper()} goes"), "bold"),
        f"  {d.basis}; stages add up to {fmt_ms(d.total)}",
    )
    has_base = any(s.baseline_seconds is not None for s in d.stages)
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, expand=False, pad_edge=False
    )
    table.add_column("stage")
    table.add_column(labels[1], justify="right")
    table.add_column("share", justify="right")
    table.add_column("", width=BAR_WIDTH, no_wrap=True)
    if has_base:
        table.add_column(labels[0], justify="right")
        table.add_column("delta", justify="right")
    scale = max((s.seconds for s in d.stages), default=0.0)
    for s in d.stages:
        share = f"{s.seconds / d.total:.0%}" if d.total > 0 else "–"
        row: list[RenderableType] = [Text(clean(s.stage)), fmt_ms(s.seconds), share]
        row.append(_bar(s.seconds, scale, stage_color(s.stage)))
        if has_base:
            row += [fmt_ms(s.baseline_seconds), _delta(s.seconds, s.baseline_seconds)]
        table.add_row(*row)
    if has_base:
        table.add_section()
        table.add_row(
            Text("total", style="bold"),
            fmt_ms(d.total),
            "",
            "",
            fmt_ms(d.baseline_total),
            _delta(d.total, d.baseline_total),
        )
    return table


def _delta(now: float, base: float | None) -> Text:
    if base is None:
        return Text("–")
    diff = now - base
    # a change under 10% of the baseline (or 1 ms) is noise for a p95 band average
    notable = abs(diff) > max(0.001, 0.1 * abs(base))
    return Text(
        fmt_ms(diff, signed=True), style=("bold red" if diff > 0 else "green") if notable else "dim"
    )


def _findings(findings: tuple[Finding, ...], total: int) -> Iterator[RenderableType]:
    if not findings:
        yield Text("No findings.", style="dim")
        return
    yield Text("Findings (most important first)", style="bold underline")
    for i, f in enumerate(findings, 1):
        head = Text.assemble(f"{i}. ", (clean(f.category), "bold"))
        if f.stage:
            head.append(" · stage ").append(clean(f.stage), style=stage_color(f.stage))
        head.append(f" · confidence {f.confidence:.2f}", style="dim")
        yield head
        yield _indent(Text(clean(f.summary)))
        if f.rank_reason:
            yield _indent(Text(clean(f.rank_reason), style="dim"))
        for e in f.evidence[:MAX_EVIDENCE]:
            line = Text("• ").append(clean(e.signal), style="cyan")
            line.append(f" = {clean(fmt_value(e.value))}")
            yield _indent(
                line.append(f" — {clean(e.detail)}").append(f" [{clean(e.source)}]", style="dim"), 5
            )
        if len(f.evidence) > MAX_EVIDENCE:
            more = len(f.evidence) - MAX_EVIDENCE
            yield _indent(Text(f"• … {more} more in the JSON/HTML report", style="dim"), 5)
        for step in f.next_steps:
            yield _indent(Text("→ measure next: ", style="yellow").append(clean(step)), 5)
    if total > len(findings):
        yield Text(
            f"   … {total - len(findings)} more findings in the JSON/HTML report", style="dim"
        )


def _indent(text: Text, left: int = 3) -> Padding:
    return Padding(text, (0, 0, 0, left))


def _remediations(report: Report) -> Iterator[RenderableType]:
    rems, slos = report.remediations, report.slos
    if not rems:
        return
    yield Text("")
    yield Text(
        "Remediations (predicted effect, from the simulator calibrated on this capture)",
        style="bold underline",
    )
    if any(r.predicted for r in rems):
        best, maybe = report.recommended_fix(), report.tentative_fix()
        if best is not None:
            yield Text.assemble("Recommended fix: ", (clean(best.action), "bold green"))
        elif maybe is not None:
            yield Text.assemble(
                ("No confident prediction", "bold yellow"),
                ": the calibrated model does not reproduce the incident within tolerance. ",
                (clean(maybe.action), "bold"),
                " is predicted to meet the SLO; read it as a direction and verify it on the "
                "incident's load (tailtriage export-workload, then tailtriage bench --replay).",
            )
        elif (held := report.accuracy_held_fix()) is not None:
            yield Text.assemble(
                ("Accuracy check first", "bold yellow"),
                ": ",
                (clean(held.action), "bold"),
                " is predicted to meet the SLO but changes the model's numerics; run "
                "tailtriage quantgate on your own evaluation set before applying it. "
                "No fix without that check is predicted to meet the SLO.",
            )
        else:
            yield Text("No fix predicted to meet the SLO.", style="bold red")
    for i, r in enumerate(rems, 1):
        yield Text.assemble(f"{i}. ", (clean(r.action), "bold"), " — ", Text(clean(r.summary)))
        r_lines: list[Text] = []
        for s in slos:
            pred = predicted_for(r, s)
            if pred is None or s.observed is None:
                continue
            ok = pred < s.spec.threshold
            r_lines.append(
                Text.assemble(
                    f"{slo_label(s.spec)} {fmt_ms(s.observed)} → ",
                    (fmt_ms(pred), "bold"),
                    f" ({fmt_ms(pred - s.observed, signed=True)})  ",
                    ("meets SLO" if ok else "still breaches", "green" if ok else "red"),
                )
            )
        if r.model_error_pct:
            errors = ", ".join(f"{k} {v:+.0f}%" for k, v in r.model_error_pct.items())
            basis = {
                "anchored": "observed × replay after / replay before",
                "low_confidence": "low confidence, not ranked by it",
                "raw": "the replay itself",
            }.get(r.prediction_basis, r.prediction_basis)
            r_lines.append(Text(f"model error {errors} · prediction: {basis}", style="dim"))
        tp = r.predicted.get("throughput_change_pct")
        detail = Text(f"throughput {fmt_pct(tp)}", style="dim")
        if r.parameters:
            detail.append(" · set ").append(clean(parameters_text(r.parameters)))
        r_lines.append(detail)
        r_lines += [Text("⚠ ", style="yellow").append(clean(c)) for c in r.caveats]
        yield from (_indent(line) for line in r_lines)


def _quality_line(q: DataQuality) -> Text:
    text = Text.assemble("\n", ("Data quality: ", "bold"))
    text.append(
        f"{q.requests:,} requests · {q.spans:,} spans · {q.series:,} series · {q.events:,} events"
    )
    text.append(f" · unattributed {q.unattributed_share:.1%}")
    if q.clock_adjustments:
        text.append(f" · {q.clock_adjustments} clock adjustment(s)")
    for f in q.skipped_files:
        text.append("\n  skipped ", style="yellow").append(clean(f.get("path", "?")))
        text.append(f": {clean(f.get('reason', ''))}")
    for w in q.warnings:
        text.append("\n  ⚠ ", style="yellow").append(clean(w))
    return text
