"""Formatting shared by the renderers: one stage palette, one way to print a duration,
a timestamp or an evidence value, so the terminal and the HTML report tell the same story."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tailtriage.model.vocabulary import STAGES
from tailtriage.report import Remediation, SloResult, SloSpec

#: one colour per stage, in path order (colour-blind-safe Okabe-Ito-like hues, then greys);
#: the HTML report and the terminal both use it
STAGE_COLORS: Mapping[str, str] = {
    "client": "#8c8c8c",
    "ingress": "#56b4e9",
    "gateway_queue": "#0072b2",
    "pending": "#e69f00",
    "api_server": "#cc79a7",
    "engine_queue": "#d55e00",
    "prefill": "#009e73",
    "decode": "#6a51a3",
    "unattributed": "#bdbdbd",
}
OTHER_COLOR = "#999999"


def stage_color(stage: str) -> str:
    return STAGE_COLORS.get(stage, OTHER_COLOR)


def stage_order(stage: str) -> int:
    """Sort key: canonical stages in path order, unknown names after them."""
    return STAGES.index(stage) if stage in STAGES else len(STAGES)


def fmt_ms(seconds: float | None, signed: bool = False) -> str:
    """``0.8123`` -> ``"812.3 ms"``; sub-millisecond values keep more digits; seconds beyond 10 s."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    ms = seconds * 1000.0
    if ms == 0:
        return "0 ms"
    sign = "+" if signed and ms > 0 else ("−" if ms < 0 else "")
    a = abs(ms)
    if a >= 10_000:
        return f"{sign}{a / 1000:.2f} s"
    if a >= 100:
        return f"{sign}{a:.1f} ms"
    if a >= 1:
        return f"{sign}{a:.2f} ms" if a < 10 else f"{sign}{a:.1f} ms"
    return f"{sign}{a:.3f} ms"


def fmt_time(unix_s: float, with_date: bool = True) -> str:
    """UTC wall clock of a unix time (deterministic: never the local zone)."""
    try:
        dt = datetime.fromtimestamp(unix_s, UTC)
    except (ValueError, OverflowError, OSError):
        return f"t={unix_s:g}"  # not a date any calendar can show: print the number
    return dt.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S")


def fmt_window(window: tuple[float, float]) -> str:
    start, end = window
    same_day = fmt_time(start)[:10] == fmt_time(end)[:10]
    return f"{fmt_time(start)} → {fmt_time(end, with_date=not same_day)} UTC ({end - start:.0f} s)"


def fmt_value(value: Any) -> str:
    """An evidence value: numbers with 4 significant digits, anything else as text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        if abs(value) >= 1e4:
            return f"{value:,.0f}"
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:.4g}"
    if value is None:
        return "–"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(fmt_value(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={fmt_value(v)}" for k, v in value.items())
    return str(value)


def fmt_pct(change: float | None) -> str:
    if change is None:
        return "–"
    if not change:
        return "±0.0%"
    return f"{'+' if change > 0 else '−'}{abs(change):.1f}%"


def predicted_key(spec: SloSpec) -> str:
    """The key of ``Remediation.predicted`` for an SLO, e.g. ``ttft_p95``."""
    return f"{spec.metric}_p{spec.percentile:g}"


def slo_label(spec: SloSpec) -> str:
    return clean(f"p{spec.percentile:g} {spec.metric.upper()}")


def predicted_for(rem: Remediation, slo: SloResult) -> float | None:
    v = rem.predicted.get(predicted_key(slo.spec))
    return None if v is None else float(v)


def parameters_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={fmt_value(v)}" for k, v in params.items())


_CONTROL = {
    c: f"\\x{c:02x}"
    for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
    if c not in (0x09, 0x0A)
}


def clean(value: object) -> str:
    """Text from input with control characters made visible (``\\x1b``), so a hostile span
    name cannot move the cursor or recolour a terminal."""
    return str(value).translate(_CONTROL)
