"""The before/after view of a ``compare`` report, read from ``report.sections.compare``.

That section is written by ``pipeline.compare`` (one row per SLO with both percentiles, their
confidence intervals, the interval of the difference and a verdict).  Figures are shown as the
JSON report rounds them, so every view prints the same number."""

from __future__ import annotations

from tailtriage.report import Report
from tailtriage.report_sections import SloDelta
from tailtriage.report_sections import ms as _json_ms


def compare_rows(report: Report) -> tuple[SloDelta, ...]:
    """The per-SLO rows of a compare report (empty for any other report)."""
    section = report.sections.compare if report.kind == "compare" else None
    return () if section is None else section.slos


def changed_stages(report: Report) -> list[str]:
    section = report.sections.compare
    return [] if section is None else list(section.changed_stages)


def ms(v: float | None) -> float | None:
    """Seconds as the JSON report rounds them (None when absent or not finite)."""
    m = _json_ms(v)
    return None if m is None else m / 1000.0


def ms_pair(v: tuple[float | None, float | None] | None) -> tuple[float | None, float | None]:
    return (None, None) if v is None else (ms(v[0]), ms(v[1]))


def verdict_class(verdict: str) -> str:
    return {"improved": "ok", "regressed": "bad", "too few requests": "warn"}.get(
        verdict, "neutral"
    )
