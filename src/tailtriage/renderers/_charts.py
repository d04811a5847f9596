"""The HTML report's charts, drawn as inline SVG from the Report's pre-aggregated data.

Time charts share one x domain and one left margin, so the percentile chart, the Kubernetes
events and the HPA replicas line up vertically on the page.  Durations arrive in seconds and
are drawn in milliseconds (the unit is on every axis)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tailtriage.model.vocabulary import EVENT_KINDS, PRE_FIRST_TOKEN_STAGES
from tailtriage.renderers._format import fmt_ms, fmt_time, fmt_value, stage_color
from tailtriage.renderers._svg import (
    Scale,
    Svg,
    ms_label,
    nice_max,
    nice_ticks,
    time_label,
    time_ticks,
    truncate,
)
from tailtriage.report import Decomposition, PercentilePoint, Windows, is_duration_key

W = 960.0  # viewBox width of every full-width chart
LEFT = 140.0  # shared left margin of the time charts (room for event lane names)
RIGHT = 20.0
Domain = tuple[float, float]


def _time_axis(svg: Svg, x: Scale, top: float, bottom: float, labels: bool = True) -> None:
    span = x.d1 - x.d0
    for t in time_ticks(x.d0, x.d1):
        svg.line(x(t), top, x(t), bottom, "grid")
        if labels:
            svg.text(x(t), bottom + 16, time_label(t, span), "tick", "middle")


def _y_axis(svg: Svg, y: Scale, left: float, right: float, fmt: str = "ms", n: int = 4) -> None:
    for v in nice_ticks(y.d0, y.d1, n):
        svg.line(left, y(v), right, y(v), "grid")
        label = ms_label(v) if fmt == "ms" else f"{v:g}"
        svg.text(left - 8, y(v) + 4, label, "tick", "end")


def _windows(
    svg: Svg, x: Scale, windows: Windows | None, top: float, bottom: float, labels: bool
) -> None:
    if windows is None:
        return
    spans = [("baseline", windows.baseline), ("incident", windows.incident)]
    for name, w in spans:
        if w is None:
            continue
        x0, x1 = max(x(w[0]), x.r0), min(x(w[1]), x.r1)
        if x1 <= x0:
            continue
        tip = f"{name} window\n{fmt_time(w[0])} → {fmt_time(w[1])} UTC"
        svg.rect(x0, top, x1 - x0, bottom - top, f"win win-{name}", tip=tip)
        if labels:
            svg.text(x0 + 4, top + 12, name, f"winlabel winlabel-{name}")


def percentile_chart(
    points: Sequence[PercentilePoint],
    slo_percentile: float | None,
    threshold: float | None,
    windows: Windows | None,
    domain: Domain,
    metric: str,
) -> str:
    h, top, bottom = 306.0, 30.0, 280.0
    svg = Svg(
        W,
        h,
        f"{metric.upper()} percentiles over time",
        "percentile of each time bin, SLO line dashed",
    )
    x = Scale(domain[0], domain[1], LEFT, W - RIGHT)
    peak = max((v for p in points for _, v in p.values), default=0.0)
    ymax = nice_max(max(peak, threshold or 0.0) * 1000 * 1.08)
    y = Scale(0.0, ymax, bottom, top)
    _windows(svg, x, windows, top, bottom, labels=True)
    _y_axis(svg, y, LEFT, W - RIGHT)
    _time_axis(svg, x, top, bottom)
    svg.text(LEFT, 14, f"{metric.upper()} by time bin", "axislabel")
    qs = sorted({q for p in points for q, _ in p.values})
    for rank, q in enumerate(qs):
        line = [
            (x((p.start + p.end) / 2), y(v * 1000)) for p in points for qq, v in p.values if qq == q
        ]
        cls = "qline qmain" if q == slo_percentile else f"qline q{min(rank, 3)}"
        svg.path(line, cls)
    if threshold is not None:
        ty = y(threshold * 1000)
        svg.line(LEFT, ty, W - RIGHT, ty, "slo")
        svg.text(LEFT + 4, ty - 5, f"SLO {ms_label(threshold * 1000)}", "slolabel")
    for p in points:  # invisible hover targets, one per bin
        vals = " · ".join(f"p{q:g} {fmt_ms(v)}" for q, v in p.values)
        tip = f"{fmt_time(p.start)[11:19]}–{fmt_time(p.end)[11:19]} UTC · n={p.count:,}\n{vals}"
        svg.rect(x(p.start), top, max(x(p.end) - x(p.start), 1.0), bottom - top, "hover", tip=tip)
    _legend(
        svg,
        [
            (f"p{q:g}", "qmain" if q == slo_percentile else f"q{min(i, 3)}")
            for i, q in enumerate(qs)
        ],
        14,
    )
    return str(svg)


def _legend(svg: Svg, items: list[tuple[str, str]], y: float) -> None:
    """Line-style legend, right-aligned above the plot."""
    widths = [34 + 7 * len(label) for label, _ in items]
    xpos = W - RIGHT - sum(widths)
    for (label, cls), w in zip(items, widths, strict=True):
        svg.line(xpos, y - 4, xpos + 18, y - 4, f"qline {cls}")
        svg.text(xpos + 24, y, label, "legend")
        xpos += w


_EVENT_CLASS = {
    "hpa_rescale": "ev-scale",
    "replicaset_scaled": "ev-scale",
    "node_scale_up": "ev-scale",
    "failed_scheduling": "ev-bad",
    "pod_unhealthy": "ev-bad",
    "pod_killing": "ev-bad",
    "pod_pending": "ev-wait",
    "cold_start": "ev-wait",
    "rollout": "ev-rollout",
}


def event_class(kind: str) -> str:
    return _EVENT_CLASS.get(kind, "ev-other" if kind not in EVENT_KINDS else "ev-pod")


def timeline_chart(
    events: Sequence[tuple[float, str, str, str]],
    series: Mapping[str, Sequence[tuple[float, float]]],
    windows: Windows | None,
    domain: Domain,
) -> str:
    """Kubernetes events (one lane per kind) above the named series (HPA replicas first),
    on the same time axis as the percentile chart."""
    kinds = sorted(
        {e[1] for e in events}, key=lambda k: (EVENT_KINDS.index(k) if k in EVENT_KINDS else 99, k)
    )
    names = sorted(series, key=lambda n: (0 if "replica" in n else 1, n))[:4]
    lane, panel, gap = 22.0, 84.0, 34.0
    ev_h = lane * len(kinds)
    h = (
        (10 if kinds else 24)
        + ev_h
        + (gap if kinds and names else 0)
        + (panel + gap) * len(names)
        + 14
    )
    svg = Svg(
        W,
        h,
        "Kubernetes events and scaling",
        "events by kind and metric series on the incident time axis",
    )
    x = Scale(domain[0], domain[1], LEFT, W - RIGHT)
    top = 10.0 if kinds else 24.0
    if kinds:
        _windows(svg, x, windows, top, top + ev_h, labels=False)
        _time_axis(svg, x, top, top + ev_h, labels=not names)
        for i, k in enumerate(kinds):
            cy = top + lane * i + lane / 2
            svg.line(LEFT, cy, W - RIGHT, cy, "lane")
            svg.text(LEFT - 8, cy + 4, truncate(k, 20), "lanelabel", "end", tip=k)
        for t, k, obj, msg in events:
            if not domain[0] <= t <= domain[1]:
                continue
            cy = top + lane * kinds.index(k) + lane / 2
            tip = f"{fmt_time(t)} UTC · {k}\n{obj}\n{msg}"
            svg.circle(x(t), cy, 5.0, f"ev {event_class(k)}", tip=tip)
        for i, k in enumerate(kinds):
            times = [e[0] for e in events if e[1] == k]
            _clip_marks(svg, x, top + lane * i + lane / 2, k, times)
        top += ev_h + gap
    for j, name in enumerate(names):
        _series_panel(
            svg, x, name, series[name], windows, top, top + panel, last=j == len(names) - 1
        )
        top += panel + gap
    return str(svg)


def _clip_marks(svg: Svg, x: Scale, cy: float, kind: str, times: Sequence[float]) -> None:
    """A marker at each edge of a lane for its events outside the time axis, with their count
    and time span in the tooltip (the axis shows the capture's window, not every event)."""
    for side, out in (
        ("earlier", [t for t in times if t < x.d0]),
        ("later", [t for t in times if t > x.d1]),
    ):
        if not out:
            continue
        first = side == "earlier"
        tip = (
            f"{len(out)} {kind} event{'s' if len(out) > 1 else ''} {side} than the capture's "
            f"window\n{fmt_time(min(out))} → {fmt_time(max(out))} UTC"
        )
        label = f"◀ {len(out)}" if first else f"{len(out)} ▶"
        xe = x.r0 + 2 if first else x.r1 - 2
        svg.text(xe, cy + 4, label, "clipmark", "start" if first else "end", tip=tip)


def _series_panel(
    svg: Svg,
    x: Scale,
    name: str,
    pts: Sequence[tuple[float, float]],
    windows: Windows | None,
    top: float,
    bottom: float,
    last: bool,
) -> None:
    vals = [v for _, v in pts]
    y = Scale(0.0, nice_max(max(vals, default=1.0) * 1.1, 3), bottom, top)
    _windows(svg, x, windows, top, bottom, labels=False)
    _y_axis(svg, y, LEFT, W - RIGHT, fmt="n", n=3)
    _time_axis(svg, x, top, bottom, labels=last)
    svg.text(LEFT, top - 8, truncate(name, 80), "panellabel", tip=name)
    inside = [(x(min(max(t, x.d0), x.d1)), y(v)) for t, v in sorted(pts)]
    step = "replica" in name
    svg.path(inside, "series step" if step else "series", step=step)
    for t, v in pts[:: max(1, len(pts) // 120)]:
        if x.d0 <= t <= x.d1:
            svg.circle(
                x(t), y(v), 6.0, "hoverdot", tip=f"{fmt_time(t)} UTC\n{name} = {fmt_value(v)}"
            )


def stage_bars(
    d: Decomposition, threshold: float | None, labels: tuple[str, str] = ("baseline", "incident")
) -> str:
    """Stacked stage bars of the tail band: baseline above incident, one colour per stage."""
    rows = [(labels[0], d.baseline_total, [(s.stage, s.baseline_seconds or 0.0) for s in d.stages])]
    if d.baseline_total is None:
        rows = []
    rows.append((labels[1], d.total, [(s.stage, s.seconds) for s in d.stages]))
    left, bar, gap, top = 100.0, 40.0, 22.0, 26.0
    h = top + len(rows) * (bar + gap) - gap + 30
    svg = Svg(
        W,
        h,
        f"p{d.percentile:g} {d.metric.upper()} by stage",
        "stacked stage shares, baseline vs incident",
    )
    # room on the right for the total's label
    xmax = nice_max(max(d.total, d.baseline_total or 0.0, threshold or 0.0) * 1000 * 1.12)
    x = Scale(0.0, xmax, left, W - RIGHT)
    bottom = top + len(rows) * (bar + gap) - gap + 6
    for v in nice_ticks(0.0, xmax, 8):
        svg.line(x(v), top - 4, x(v), bottom, "grid")
        svg.text(x(v), bottom + 16, ms_label(v), "tick", "middle")
    for i, (label, total, parts) in enumerate(rows):
        y0 = top + i * (bar + gap)
        svg.text(left - 10, y0 + bar / 2 + 5, label, "rowlabel", "end")
        acc = 0.0
        for stage, secs in parts:
            if not (secs > 0 and math.isfinite(secs)):
                continue
            x0, x1 = x(acc * 1000), x((acc + secs) * 1000)
            share = secs / total if total else 0.0
            tip = f"{label} · {stage}\n{fmt_ms(secs)} ({share:.0%} of {fmt_ms(total)})"
            svg.rect(x0, y0, x1 - x0, bar, "seg", stage_color(stage), tip)
            if x1 - x0 > 46:
                svg.text(
                    (x0 + x1) / 2, y0 + bar / 2 + 4, f"{secs * 1000:.0f}", "seglabel", "middle"
                )
            acc += secs
        svg.text(x(acc * 1000) + 6, y0 + bar / 2 + 4, fmt_ms(total), "total")
    if threshold is not None:
        tx = x(threshold * 1000)
        svg.line(tx, top - 10, tx, bottom, "slo")
        svg.text(tx, top - 14, f"SLO {ms_label(threshold * 1000)}", "slolabel", "middle")
    return str(svg)


def waterfall_chart(rows: Sequence[tuple[str, float, float, str]], threshold: float | None) -> str:
    """Gantt view of one tail request; the first-token mark ends the pre-first-token stages."""
    left, row_h, top = 230.0, 22.0, 8.0
    h = top + row_h * len(rows) + 34
    end = max((o + d for _, o, d, _ in rows), default=0.0)
    first_token = max(
        (o + d for s, o, d, _ in rows if s in PRE_FIRST_TOKEN_STAGES and s != "unattributed"),
        default=None,
    )
    svg = Svg(
        W,
        h,
        "Waterfall of a representative tail request",
        "spans by start offset, coloured by stage",
    )
    x = Scale(0.0, nice_max(max(end, threshold or 0.0) * 1000 * 1.02), left, W - RIGHT)
    bottom = top + row_h * len(rows)
    for v in nice_ticks(x.d0, x.d1, 8):
        svg.line(x(v), top, x(v), bottom, "grid")
        svg.text(x(v), bottom + 16, ms_label(v), "tick", "middle")
    for i, (stage, off, dur, span) in enumerate(rows):
        y0 = top + i * row_h
        svg.text(
            left - 10,
            y0 + 15,
            truncate(f"{span or stage}", 30),
            "rowlabel",
            "end",
            tip=f"{span}\nstage {stage}",
        )
        x0 = x(off * 1000)
        tip = f"{span}\nstage {stage} · starts +{fmt_ms(off)} · lasts {fmt_ms(dur)}"
        svg.rect(
            x0,
            y0 + 3,
            max(x((off + dur) * 1000) - x0, 1.5),
            row_h - 6,
            "seg",
            stage_color(stage),
            tip,
        )
        svg.text(
            min(x((off + dur) * 1000) + 5, W - RIGHT - 60), y0 + 15, fmt_ms(dur), "seglabel-out"
        )
    if first_token is not None:
        fx = x(first_token * 1000)
        svg.line(fx, top - 4, fx, bottom, "marker")
        svg.text(fx + 4, bottom + 30, f"first token {fmt_ms(first_token)}", "markerlabel")
    if threshold is not None:
        tx = x(threshold * 1000)
        svg.line(tx, top - 4, tx, bottom, "slo")
    return str(svg)


def nines(f: float) -> float:
    """Percentile position on a tail-stretching scale: p50 -> 0.3, p90 -> 1, p99 -> 2, p99.9 -> 3."""
    return -math.log10(max(1.0 - f, 1e-6))


_NINES_TICKS = (
    (0.0, "p0"),
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (0.9999, "p99.99"),
)


def cdf_chart(
    metric: str,
    pts: Sequence[tuple[float, float]],
    threshold: float | None,
    marks: Mapping[str, float],
) -> str:
    """Latency by percentile (HdrHistogram style): the y axis stretches the tail so p90, p99
    and p99.9 are equally far apart; log x when the values span more than 1.5 decades."""
    w, h, left, top, bottom = 470.0, 280.0, 62.0, 14.0, 236.0
    svg = Svg(
        w,
        h,
        f"{metric.upper()} by percentile",
        "latency at each percentile, tail stretched",
        "chart half",
    )
    inner = [(v, f) for v, f in pts if f < 1.0]
    vals = [v * 1000 for v, _ in pts if v > 0]
    lo, hi = (min(vals), max(vals)) if vals else (1.0, 10.0)
    hi = max(hi, (threshold or 0) * 1000)
    log = hi / max(lo, 1e-9) > 30
    x = (
        Scale(lo * 0.9, hi * 1.1, left, w - 12, log=True)
        if log
        else Scale(0.0, nice_max(hi * 1.02), left, w - 12)
    )
    top_nines = max((nines(f) for _, f in inner), default=2.0)
    y = Scale(0.0, max(1.0, math.ceil(top_nines * 2) / 2), bottom, top)
    for v in x.ticks(6):
        svg.line(x(v), top, x(v), bottom, "grid")
        svg.text(x(v), bottom + 16, ms_label(v), "tick", "middle")
    for f, label in _NINES_TICKS:
        if nines(f) <= y.d1 + 1e-9:
            svg.line(left, y(nines(f)), w - 12, y(nines(f)), "grid")
            svg.text(left - 6, y(nines(f)) + 4, label, "tick", "end")
    svg.text(
        (left + w) / 2,
        h - 6,
        f"{metric.upper()} (ms{', log scale' if log else ''})",
        "axislabel",
        "middle",
    )
    line = [(x(v * 1000), y(min(nines(f), y.d1))) for v, f in pts if v > 0 or not log]
    svg.path(line, "cdf")
    for name, v in marks.items():
        digits = name.lstrip("p")
        if not digits.replace(".", "", 1).isdigit() or v <= 0 or float(digits) >= 100:
            continue
        q = float(digits) / 100
        cx, cy = x(v * 1000), y(min(nines(q), y.d1))
        svg.circle(cx, cy, 4.0, "mark", tip=f"{name} {metric.upper()} = {fmt_ms(v)}")
        svg.text(cx + 8, cy + 4, f"{name} {fmt_ms(v)}", "marklabel")
    if threshold is not None:
        svg.line(x(threshold * 1000), top, x(threshold * 1000), bottom, "slo")
        svg.text(x(threshold * 1000) + 4, top + 12, f"SLO {ms_label(threshold * 1000)}", "slolabel")
    return str(svg)


def replica_chart(
    replicas: Mapping[str, Mapping[str, float]], key: str, threshold: float | None
) -> str:
    """Per-replica bars of ``key`` (slowest first), request count on the right."""
    names = sorted(replicas, key=lambda r: -replicas[r].get(key, 0.0))
    left, row_h, top = 200.0, 20.0, 8.0
    h = top + row_h * len(names) + 30
    is_time = key != "count"
    vmax = max((replicas[r].get(key, 0.0) for r in names), default=0.0)
    scale_max = max(vmax, threshold or 0.0) * (1000 if is_time else 1)
    svg = Svg(W, h, f"{key} per replica", "one bar per replica, slowest first")
    x = Scale(0.0, nice_max(scale_max * 1.04), left, W - 110)
    bottom = top + row_h * len(names)
    for v in nice_ticks(x.d0, x.d1, 6):
        svg.line(x(v), top, x(v), bottom, "grid")
        svg.text(x(v), bottom + 16, ms_label(v) if is_time else f"{v:g}", "tick", "middle")
    for i, name in enumerate(names):
        y0 = top + i * row_h
        v = replicas[name].get(key, 0.0)
        over = threshold is not None and is_time and v > threshold
        tip = (
            name
            + "\n"
            + "\n".join(
                f"{k} = {fmt_ms(s) if is_duration_key(k) else fmt_value(s)}"
                for k, s in replicas[name].items()
            )
        )
        svg.text(left - 10, y0 + 14, truncate(name, 28), "rowlabel", "end", tip=tip)
        svg.rect(
            left,
            y0 + 3,
            x(v * (1000 if is_time else 1)) - left,
            row_h - 6,
            "bar over" if over else "bar",
            tip=tip,
        )
        count = replicas[name].get("count")
        if count is not None:
            svg.text(W - 100, y0 + 14, f"{fmt_value(int(count))} req", "tick")
    if threshold is not None and is_time:
        svg.line(x(threshold * 1000), top - 4, x(threshold * 1000), bottom, "slo")
    return str(svg)


def prediction_chart(label: str, current: float, predicted: float, threshold: float) -> str:
    """Current vs predicted percentile against the SLO threshold: two short bars."""
    w, h, left = 420.0, 62.0, 80.0
    svg = Svg(
        w, h, f"{label}: current {fmt_ms(current)}, predicted {fmt_ms(predicted)}", cls="chart pred"
    )
    x = Scale(0.0, nice_max(max(current, predicted, threshold) * 1000 * 1.05, 4), left, w - 70)
    meets = predicted < threshold
    for i, (name, v, cls) in enumerate(
        (
            ("current", current, "bar now"),
            ("predicted", predicted, "bar ok" if meets else "bar warn"),
        )
    ):
        y0 = 6 + i * 24
        svg.text(left - 8, y0 + 13, name, "rowlabel small", "end")
        svg.rect(left, y0, x(v * 1000) - left, 16, cls, tip=f"{label} {name} {fmt_ms(v)}")
        svg.text(x(v * 1000) + 5, y0 + 13, fmt_ms(v), "seglabel-out")
    tx = x(threshold * 1000)
    svg.line(tx, 2, tx, 50, "slo")
    svg.text(tx, 60, f"SLO {ms_label(threshold * 1000)}", "slolabel small", "middle")
    return str(svg)
