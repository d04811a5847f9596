"""Doctor's terminal view (rich): the verdict for the SLOs, then one row per gap.

Shared with the triage report, which shows the gaps that limit its diagnosis.  Every string
goes into ``rich.text.Text``, never into markup: a service name like ``[bold]`` prints as is."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tailtriage.doctor.gap import DoctorResult, Gap

#: gaps a triage report shows (the JSON report keeps every one)
MAX_TRIAGE_GAPS: Final = 3


def gap_table(gaps: Sequence[Gap], title: str) -> Group:
    """One block per gap: what is missing, then what it leaves undecidable, the fix and the
    cost under it (reads in 80 columns, unlike a four-column table)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for g in gaps:
        body = Text(g.what)
        for label, value, style in (
            ("undecidable", ", ".join(g.undecidable) or "-", ""),
            ("fix", g.fix, ""),
            ("cost", g.cost, "dim"),
        ):
            body.append(f"\n{label}: ", style="dim").append(value, style=style)
        grid.add_row(Text("-"), body)
    return Group(Text(title, style="bold"), grid)


def doctor_renderables(result: DoctorResult) -> Iterator[RenderableType]:
    """The `tailtriage doctor` screen."""
    slos = ", ".join(str(s) for s in result.slos)
    if result.triage_ready:
        verdict = Text("triage-ready for ", style="bold green")
    else:
        verdict = Text("not triage-ready for ", style="bold red")
    verdict.append(slos)
    yield verdict
    stack = Text(
        f"gateway: {result.gateway or 'none seen'}, engine: {result.engine or 'none seen'}",
        style="dim",
    )
    yield stack
    if result.blocking:
        n = len(result.blocking)
        yield gap_table(result.blocking, f"\n{n} gap{'s limit' if n > 1 else ' limits'} triage:")
    advice = [g for g in result.gaps if not g.limits(result.slos)]
    if advice:
        yield gap_table(advice, "\nadvice (does not limit triage of these SLOs):")
    if result.not_checked:
        yield Text(
            "not checked (no span attributes in this input): " + ", ".join(result.not_checked),
            style="dim",
        )
    if result.gaps:
        yield Text("\nevery config that closes them: " + result.instrument_command)


def triage_gaps_section(gaps: Sequence[Gap]) -> Iterator[RenderableType]:
    """The short section of the triage report: the top gaps that limit this diagnosis (each
    fix names the `tailtriage instrument` command and file that close it)."""
    if not gaps:
        return
    shown = list(gaps[:MAX_TRIAGE_GAPS])
    more = len(gaps) - len(shown)
    title = "telemetry gaps limit this diagnosis" + (f" ({more} more in the JSON)" if more else "")
    yield gap_table(shown, title)
