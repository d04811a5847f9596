"""Building blocks of the HTML report: the view every section reads, and escaped HTML
helpers (sections, panels, tables, tabs, stage swatches).  Cell HTML passed to ``table`` is
already escaped; headers and titles are escaped here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tailtriage.renderers._format import fmt_ms, stage_color
from tailtriage.renderers._svg import esc
from tailtriage.report import Report, SloResult


@dataclass(frozen=True)
class View:
    """What several sections need: the headline SLO and the shared time axis."""

    report: Report
    main_slo: SloResult | None
    domain: tuple[float, float] | None
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, report: Report, notes: tuple[str, ...] = ()) -> View:
        slos = report.slos
        main = next((s for s in slos if s.breached), slos[0] if slos else None)
        return cls(report, main, _time_domain(report), notes)

    @property
    def labels(self) -> tuple[str, str]:
        """Names of the two sides of a decomposition: a comparison has runs, not windows."""
        return ("before", "after") if self.report.kind == "compare" else ("baseline", "incident")

    def threshold_for(self, metric: str, percentile: float | None = None) -> float | None:
        same = [s for s in self.report.slos if s.spec.metric == metric]
        exact = [s for s in same if percentile is None or s.spec.percentile == percentile]
        picks = exact or same
        return picks[0].spec.threshold if picks else None


def _time_domain(r: Report) -> tuple[float, float] | None:
    """The capture's window: the requests' windows and percentile bins.  Events and series
    outside it (a pod created hours before the capture) are clipped at the edge with a marker
    rather than stretching the axis; only a report without requests falls back to them."""
    ts: list[float] = []
    if r.windows is not None:
        ts += list(r.windows.incident) + (list(r.windows.baseline) if r.windows.baseline else [])
    c = r.charts
    ts += [p.start for p in c.percentile_series] + [p.end for p in c.percentile_series]
    if not ts:
        ts += [e[0] for e in c.events]
        ts += [t for pts in c.series.values() for t, _ in pts]
    if not ts:
        return None
    lo, hi = min(ts), max(ts)
    return (lo, hi) if hi > lo else (lo - 30.0, hi + 30.0)


def section(sid: str, title: str, body: str, sub: str = "") -> str:
    subtitle = f' <span class="sub">{esc(sub)}</span>' if sub else ""
    return f'<section id="{sid}"><h2>{esc(title)}{subtitle}</h2>{body}</section>'


def panel(body: str, cls: str = "") -> str:
    return f'<div class="panel {cls}">{body}</div>' if cls else f'<div class="panel">{body}</div>'


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    num_cols: Iterable[int] = (),
    cls: str = "",
) -> str:
    """``rows`` hold already-escaped cell HTML; ``headers`` are escaped here."""
    nums = set(num_cols)
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if i in nums else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{c}</td>' if i in nums else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return (
        f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    )


def swatch(stage: str) -> str:
    # an SVG swatch keeps colours out of style attributes (the page's CSP forbids them)
    return f'<svg class="swatch" viewBox="0 0 10 10" aria-hidden="true"><rect width="10" height="10" rx="2" fill="{esc(stage_color(stage))}"/></svg>'


def delta(now: float, base: float | None) -> str:
    if base is None:
        return "–"
    diff = now - base
    notable = abs(diff) > max(0.001, 0.1 * abs(base))
    cls = ("delta-up" if diff > 0 else "delta-down") if notable else "delta-flat"
    return f'<span class="{cls}">{esc(fmt_ms(diff, signed=True))}</span>'


def tabs_html(prefix: str, tabs: Sequence[tuple[str, str]]) -> str:
    """An accessible tab set (the inline script switches it; without script the first shows)."""
    buttons, panels = [], []
    for i, (label, content) in enumerate(tabs):
        tid, pid = f"{prefix}-tab-{i}", f"{prefix}-panel-{i}"
        sel = "true" if i == 0 else "false"
        buttons.append(
            f'<button type="button" role="tab" id="{tid}" aria-selected="{sel}" aria-controls="{pid}" tabindex="{0 if i == 0 else -1}">{esc(label)}</button>'
        )
        hidden = "" if i == 0 else " hidden"
        panels.append(
            f'<div role="tabpanel" id="{pid}" aria-labelledby="{tid}"{hidden}>{content}</div>'
        )
    return f'<div role="tablist">{"".join(buttons)}</div>{"".join(panels)}'


def nav_links(sections: Sequence[tuple[str, str]]) -> str:
    return (
        '<nav class="toc">'
        + "".join(f'<a href="#{sid}">{esc(t)}</a>' for sid, t in sections)
        + "</nav>"
    )
