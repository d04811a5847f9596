"""Tiny inline-SVG toolkit for the HTML report: scales, nice ticks and an element builder.

Every text and attribute value goes through :func:`esc`, so strings from input (span names,
replica names, event messages) are inert.  Charts are drawn in a fixed ``viewBox`` and scale
with the page; colours come from CSS classes, so the report follows the page's theme."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from tailtriage.renderers._format import fmt_time


def esc(value: object) -> str:
    """HTML-escape text and attribute values (quotes included)."""
    return escape(str(value), quote=True)


def num(v: float) -> str:
    """Compact coordinates: two decimals are sub-pixel at our sizes and keep files small.
    A non-finite value (which the data should never reach here with) becomes 0, so the SVG
    stays valid."""
    if not math.isfinite(v):
        return "0"
    s = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


@dataclass(frozen=True)
class Scale:
    """Maps a data interval onto a pixel interval, linear or log10."""

    d0: float
    d1: float
    r0: float
    r1: float
    log: bool = False

    def __call__(self, v: float) -> float:
        a, b, x = self.d0, self.d1, v
        if self.log:
            a, b, x = math.log10(a), math.log10(b), math.log10(max(v, self.d0))
        if b == a:
            return (self.r0 + self.r1) / 2
        return self.r0 + (x - a) / (b - a) * (self.r1 - self.r0)

    def ticks(self, n: int = 5) -> list[float]:
        return log_ticks(self.d0, self.d1) if self.log else nice_ticks(self.d0, self.d1, n)


def nice_step(span: float, n: int) -> float:
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    step = nice_step(hi - lo, n)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def nice_max(v: float, n: int = 5) -> float:
    """A round upper bound for an axis that starts at zero."""
    if v <= 0 or not math.isfinite(v):
        return 1.0
    step = nice_step(v, n)
    return math.ceil(v / step - 1e-9) * step


def log_ticks(lo: float, hi: float) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        return []
    out = []
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if k1 - k0 > 8:  # a very wide range: powers of ten only, and at most about eight of them
        return [10.0**k for k in range(k0, k1 + 1, -(-(k1 - k0) // 8)) if lo <= 10.0**k <= hi]
    for k in range(k0, k1 + 1):
        for m in (1, 2, 5):
            t = m * 10.0**k
            if lo <= t * (1 + 1e-9) and t <= hi * (1 + 1e-9):
                out.append(t)
    return out


_DAY = 86400
# (1 s ... 12 h, then days and weeks): wall-clock steps people read without effort
_SUB_DAY = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)
_TIME_STEPS: tuple[int, ...] = (*_SUB_DAY, _DAY, 2 * _DAY, 7 * _DAY, 14 * _DAY, 28 * _DAY)


def time_ticks(lo: float, hi: float, n: int = 7) -> list[float]:
    """Unix-time ticks on round wall-clock steps (UTC)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    step = next((s for s in _TIME_STEPS if (hi - lo) / s <= n), None) or nice_step(hi - lo, n)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def time_label(t: float, span: float) -> str:
    if span >= 2 * _DAY:
        return fmt_time(t)[5:10]  # MM-DD
    return fmt_time(t)[11:19] if span < 120 else fmt_time(t)[11:16]


def ms_label(ms: float) -> str:
    if ms >= 10_000:
        return f"{ms / 1000:g} s"
    return f"{ms:g} ms" if ms >= 1 or ms == 0 else f"{ms:.2g} ms"


class Svg:
    """Collects SVG elements; ``str(svg)`` gives the ``<svg>`` element."""

    def __init__(self, width: float, height: float, title: str, desc: str = "", cls: str = "chart"):
        self.width = width
        self.height = height
        self.title = title
        self.desc = desc
        self.cls = cls
        self.parts: list[str] = []

    def add(self, fragment: str) -> None:
        self.parts.append(fragment)

    def rect(
        self, x: float, y: float, w: float, h: float, cls: str = "", fill: str = "", tip: str = ""
    ) -> None:
        self.add(
            f'<rect x="{num(x)}" y="{num(y)}" width="{num(max(w, 0))}" height="{num(max(h, 0))}"{_a(cls, fill, tip)}/>'
        )

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        cls: str = "",
        stroke: str = "",
        tip: str = "",
    ) -> None:
        extra = f' stroke="{esc(stroke)}"' if stroke else ""
        self.add(
            f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}"{_a(cls, "", tip)}{extra}/>'
        )

    def path(
        self, points: list[tuple[float, float]], cls: str = "", stroke: str = "", step: bool = False
    ) -> None:
        if not points:
            return
        d = [f"M{num(points[0][0])},{num(points[0][1])}"]
        for x, y in points[1:]:
            # a step line holds each value until the next sample (replica counts, queue depth)
            d.append(f"H{num(x)}V{num(y)}" if step else f"L{num(x)},{num(y)}")
        extra = f' stroke="{esc(stroke)}"' if stroke else ""
        self.add(f'<path d="{"".join(d)}"{_a(cls, "", "")}{extra}/>')

    def circle(
        self, x: float, y: float, r: float, cls: str = "", fill: str = "", tip: str = ""
    ) -> None:
        self.add(f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}"{_a(cls, fill, tip)}/>')

    def text(
        self, x: float, y: float, s: object, cls: str = "", anchor: str = "start", tip: str = ""
    ) -> None:
        a = "" if anchor == "start" else f' text-anchor="{anchor}"'
        self.add(f'<text x="{num(x)}" y="{num(y)}"{a}{_a(cls, "", tip)}>{esc(s)}</text>')

    def __str__(self) -> str:
        head = (
            f'<svg class="{esc(self.cls)}" viewBox="0 0 {num(self.width)} {num(self.height)}" '
            f'role="img" xmlns="http://www.w3.org/2000/svg" preserveAspectRatio="xMidYMin meet">'
            f"<title>{esc(self.title)}</title>"
        )
        desc = f"<desc>{esc(self.desc)}</desc>" if self.desc else ""
        return head + desc + "".join(self.parts) + "</svg>"


def _a(cls: str, fill: str, tip: str) -> str:
    out = f' class="{esc(cls)}"' if cls else ""
    if fill:
        out += f' fill="{esc(fill)}"'
    if tip:
        out += f' data-tip="{esc(tip)}"'
    return out


def truncate(s: str, n: int) -> str:
    """Shorten a label to ``n`` characters (the full text stays in the tooltip)."""
    return s if len(s) <= n else s[: max(n - 1, 1)] + "…"
