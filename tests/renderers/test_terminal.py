"""The terminal report: golden output at width 100 without colour, plus facts that hold
whatever the layout (every stage and value present, hostile strings inert)."""

from __future__ import annotations

import re
from dataclasses import replace

from golden_support import assert_golden
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from renderers.report_builders import (
    HOSTILE,
    STAGE_MS,
    make_compare_report,
    make_empty_report,
    make_hostile_report,
    make_nonfinite_report,
    make_report,
)
from tailtriage.diagnosis.findings import Finding
from tailtriage.renderers import render
from tailtriage.renderers.terminal import TerminalRenderer


def plain(report: object) -> str:
    return TerminalRenderer(width=100, color=False).render(report)  # type: ignore[arg-type]


def test_worked_example_matches_golden() -> None:
    assert_golden("terminal_worked_example.txt", plain(make_report()))


def test_empty_report_matches_golden() -> None:
    assert_golden("terminal_empty.txt", plain(make_empty_report()))


def test_hostile_report_matches_golden() -> None:
    assert_golden("terminal_hostile.txt", plain(make_hostile_report()))


def test_compare_report_matches_golden() -> None:
    assert_golden("terminal_compare.txt", plain(make_compare_report()))


def test_compare_shows_verdicts_and_before_after_columns() -> None:
    out = plain(make_compare_report())
    ttft = next(line for line in out.splitlines() if line.strip().startswith("p95 TTFT  "))
    assert "800.0 ms" in ttft and "370.0 ms" in ttft and "improved" in ttft
    assert "no significant change" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("stage "))
    assert header.index("after") < header.index("before")
    assert "incident" not in header


def test_nonfinite_values_do_not_break_the_terminal() -> None:
    out = plain(make_nonfinite_report())
    assert "requests/s –" in out


def test_story_is_complete() -> None:
    out = plain(make_report())
    assert "p95 TTFT < 500.0 ms" in out and "BREACHED by 300.0 ms" in out
    for stage, ms, base in STAGE_MS:
        row = next(line for line in out.splitlines() if line.strip().startswith(stage + " "))
        if ms:
            assert f"{ms:.1f} ms" in row, row
        assert f"{base:.2f} ms" in row or f"{base:.1f} ms" in row or base == 0, row
    # findings in rank order, each with its evidence
    assert out.index("scaling_lag") < out.index("compute_saturation") < out.index("ingress_network")
    assert "vllm:num_requests_waiting = 37" in out
    # the combined fix meets the SLO, the single ones do not
    assert "370.0 ms (−430.0 ms)  meets SLO" in out
    assert out.count("still breaches") == 2


def test_fits_the_width_and_has_no_colour_codes() -> None:
    out = plain(make_hostile_report())
    assert "\x1b[" not in out
    assert max(cell_len(line) for line in out.splitlines()) <= 100


def test_colour_output_uses_ansi() -> None:
    out = TerminalRenderer(width=100, color=True).render(make_report())
    assert "\x1b[" in out


def test_registry_render_equals_direct_render() -> None:
    assert render(make_report(), "terminal", width=100) == plain(make_report())


def test_terminal_escapes_control_characters_and_markup() -> None:
    f = Finding("rollout", None, 0.5, "evil \x1b[2J\x1b[31m [bold red]markup[/] \x07")
    out = plain(replace(make_report(), findings=(f,)))
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out
    assert "[bold red]markup[/]" in out  # markup shown literally, not interpreted
    assert HOSTILE in plain(make_hostile_report())  # shown as text, nothing to run here


@settings(max_examples=30, deadline=None)
@given(
    summary=st.text(max_size=300),
    category=st.text(min_size=1, max_size=30),
    confidence=st.floats(0, 1),
)
def test_any_finding_text_renders(summary: str, category: str, confidence: float) -> None:
    f = Finding(category, "pending", confidence, summary)
    out = plain(replace(make_report(), findings=(f,)))
    assert max(cell_len(line) for line in out.splitlines()) <= 100
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out)


def test_an_slo_without_data_is_neither_met_nor_breached() -> None:
    base = make_report()
    nodata = replace(
        base.slos[0],
        observed=None,
        breached=False,
        count=0,
        ci_low=None,
        ci_high=None,
        warning="no ttft requests in the window",
    )
    out = plain(replace(base, slos=(nodata,)))
    line = next(x for x in out.splitlines() if "p95 TTFT < 500.0 ms" in x)
    assert "no data" in line and "met" not in line and "BREACHED" not in line
    assert "no ttft requests in the window" in out
