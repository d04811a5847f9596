"""The before/after view of a ``compare`` report, read from ``report.extra["compare"]``.

That section is written by ``pipeline.compare`` (milliseconds, one row per SLO with both
percentiles, their confidence intervals, the interval of the difference and a verdict).  It is
read defensively: a missing or differently shaped field shows as "–", never as an error."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tailtriage.report import Report


def compare_rows(report: Report) -> list[Mapping[str, Any]]:
    """The per-SLO rows of a compare report (empty for any other report)."""
    section = report.extra.get("compare") if report.kind == "compare" else None
    if not isinstance(section, Mapping):
        return []
    rows = section.get("slos")
    if not isinstance(rows, Sequence) or isinstance(rows, str):
        return []
    return [r for r in rows if isinstance(r, Mapping)]


def changed_stages(report: Report) -> list[str]:
    section = report.extra.get("compare")
    stages = section.get("changed_stages") if isinstance(section, Mapping) else None
    return [str(s) for s in stages] if isinstance(stages, list) else []


def ms(row: Mapping[str, Any], key: str) -> float | None:
    """A number of milliseconds from ``row`` as seconds (None when absent or not a number)."""
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v) / 1000.0


def ms_pair(row: Mapping[str, Any], key: str) -> tuple[float | None, float | None]:
    v = row.get(key)
    if not isinstance(v, Sequence) or isinstance(v, str) or len(v) != 2:
        return (None, None)
    return ms({"a": v[0]}, "a"), ms({"b": v[1]}, "b")


def label(row: Mapping[str, Any]) -> str:
    metric = str(row.get("metric", "?")).upper()
    pct = row.get("percentile")
    return f"p{pct:g} {metric}" if isinstance(pct, int | float) else metric


def verdict_class(verdict: str) -> str:
    return {"improved": "ok", "regressed": "bad", "too few requests": "warn"}.get(
        verdict, "neutral"
    )
