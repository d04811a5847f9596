"""Bound what a report plots, whatever the capture's size.

The pipeline already aggregates, but a renderer must not trust its input to be small: a
100,000-request capture must still give a report of a few hundred kilobytes.  Each thinning
keeps what matters for the tail (the CDF's upper end, the spikes of a series, the slowest
replicas, the longest spans) and says what it dropped in ``notes``."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from tailtriage.renderers._format import fmt_value
from tailtriage.report import Charts, PercentilePoint, Report

MAX_CDF_POINTS = 400
MAX_SERIES_POINTS = 800
MAX_PERCENTILE_BINS = 720
MAX_EVENTS = 300
MAX_REPLICAS = 48
MAX_WATERFALL = 60
#: a time or duration beyond this (seconds: ~30,000 years) is corrupt data, not a value to plot
MAX_ABS = 1e12


@dataclass(frozen=True)
class Thinned:
    report: Report
    notes: tuple[str, ...] = ()


def thin_report(report: Report) -> Thinned:
    """A copy of ``report`` whose charts fit the bounds above, with a note per reduction.
    Non-finite values (NaN, inf) cannot be drawn; they are dropped and counted."""
    c, dropped = finite_charts(report.charts)
    notes: list[str] = [f"charts: {dropped:,} non-finite values not drawn"] if dropped else []
    cdfs = {m: thin_cdf(pts) for m, pts in c.cdfs.items()}
    series = {n: thin_series(pts) for n, pts in c.series.items()}
    for name, pts in c.series.items():
        if len(series[name]) < len(pts):
            notes.append(f"series {name}: {len(pts):,} samples drawn as min/max per time bin")
    pseries = thin_percentile_series(c.percentile_series)
    if len(pseries) < len(c.percentile_series):
        notes.append(
            f"percentile over time: {len(c.percentile_series):,} bins merged into {len(pseries):,} "
            "(each shows the largest value of the bins it merges)"
        )
    events, ev_note = thin_events(c.events)
    replicas, rep_note = thin_replicas(c.replicas)
    waterfall, wf_note = thin_waterfall(c.waterfall)
    notes += [n for n in (ev_note, rep_note, wf_note) if n]
    charts = replace(
        c,
        cdfs=cdfs,
        series=series,
        percentile_series=pseries,
        events=events,
        replicas=replicas,
        waterfall=waterfall,
    )
    return Thinned(replace(report, charts=charts), tuple(notes))


def finite_charts(c: Charts) -> tuple[Charts, int]:
    """``c`` without NaN/inf points (nor absurd ones, beyond ``MAX_ABS``), and how many
    values were dropped."""

    def ok(v: float) -> bool:
        return math.isfinite(v) and abs(v) < MAX_ABS

    def pairs(pts: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
        return tuple(p for p in pts if ok(p[0]) and ok(p[1]))

    cdfs = {m: pairs(pts) for m, pts in c.cdfs.items()}
    series = {n: pairs(pts) for n, pts in c.series.items()}
    pseries = tuple(
        replace(p, values=tuple(qv for qv in p.values if ok(qv[0]) and ok(qv[1])))
        for p in c.percentile_series
        if ok(p.start) and ok(p.end)
    )
    events = tuple(e for e in c.events if ok(e[0]))
    waterfall = tuple(w for w in c.waterfall if ok(w[1]) and ok(w[2]))
    replicas = {r: {k: x for k, x in v.items() if ok(x)} for r, v in c.replicas.items()}
    before = _count(c)
    out = replace(
        c,
        cdfs=cdfs,
        series=series,
        percentile_series=pseries,
        events=events,
        waterfall=waterfall,
        replicas=replicas,
    )
    return out, before - _count(out)


def _count(c: Charts) -> int:
    return (
        sum(len(v) for v in c.cdfs.values())
        + sum(len(v) for v in c.series.values())
        + sum(len(p.values) + 1 for p in c.percentile_series)
        + len(c.events)
        + len(c.waterfall)
        + sum(len(v) for v in c.replicas.values())
    )


def thin_cdf(pts: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """At most MAX_CDF_POINTS points: the last quarter of the budget keeps the extreme tail
    point for point, the rest is a grid that gets denser towards the tail; the first point
    and the maximum are always kept."""
    n = len(pts)
    if n <= MAX_CDF_POINTS:
        return pts
    tail_k = MAX_CDF_POINTS // 4
    frac = np.fromiter((f for _, f in pts), float, n)
    head_end = n - tail_k  # indices >= head_end are kept as they are
    budget = MAX_CDF_POINTS - tail_k - 1
    lo, hi = float(frac[0]), float(frac[head_end - 1])
    knee = min(0.9, hi)
    body = np.linspace(lo, knee, budget // 2)
    gap = max(1.0 - hi, 1e-9)
    tail = 1.0 - np.geomspace(max(1.0 - knee, gap), gap, budget - budget // 2)
    grid = np.searchsorted(frac[:head_end], np.concatenate([body, tail]))
    idx = np.unique(np.concatenate([[0], np.clip(grid, 0, head_end - 1), np.arange(head_end, n)]))
    return tuple(pts[i] for i in idx.tolist())


def thin_series(pts: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """Min and max per time bin: spikes survive, which an average would hide."""
    if len(pts) <= MAX_SERIES_POINTS:
        return pts
    arr = np.asarray(pts, dtype=float)
    arr = arr[np.argsort(arr[:, 0], kind="stable")]
    bins = MAX_SERIES_POINTS // 2
    edges = np.linspace(arr[0, 0], arr[-1, 0], bins + 1)
    which = np.clip(np.searchsorted(edges, arr[:, 0], side="right") - 1, 0, bins - 1)
    out: list[tuple[float, float]] = []
    for b in np.unique(which).tolist():
        seg = arr[which == b]
        lo, hi = int(np.argmin(seg[:, 1])), int(np.argmax(seg[:, 1]))
        for i in sorted({lo, hi}):
            out.append((float(seg[i, 0]), float(seg[i, 1])))
    return tuple(out)


def thin_percentile_series(pts: tuple[PercentilePoint, ...]) -> tuple[PercentilePoint, ...]:
    if len(pts) <= MAX_PERCENTILE_BINS:
        return pts
    k = -(-len(pts) // MAX_PERCENTILE_BINS)
    out = []
    for i in range(0, len(pts), k):
        group = pts[i : i + k]
        worst: dict[float, float] = {}
        for p in group:
            for q, v in p.values:
                worst[q] = max(v, worst.get(q, v))
        out.append(
            PercentilePoint(
                group[0].start,
                group[-1].end,
                sum(p.count for p in group),
                tuple(sorted(worst.items())),
            )
        )
    return tuple(out)


def thin_events(
    events: tuple[tuple[float, str, str, str], ...],
) -> tuple[tuple[tuple[float, str, str, str], ...], str]:
    if len(events) <= MAX_EVENTS:
        return events, ""
    # keep every kind represented: round-robin over kinds, in time order within a kind
    by_kind: dict[str, list[tuple[float, str, str, str]]] = {}
    for e in sorted(events, key=lambda e: e[0]):
        by_kind.setdefault(e[1], []).append(e)
    kept: list[tuple[float, str, str, str]] = []
    i = 0
    while len(kept) < MAX_EVENTS:
        row = [lst[i] for lst in by_kind.values() if i < len(lst)]
        if not row:
            break
        kept.extend(row[: MAX_EVENTS - len(kept)])
        i += 1
    counts = Counter(e[1] for e in events)
    summary = ", ".join(f"{k} {fmt_value(n)}" for k, n in counts.most_common())
    note = f"events: {len(kept):,} of {len(events):,} shown (all: {summary})"
    return tuple(sorted(kept, key=lambda e: e[0])), note


def thin_replicas(
    replicas: Mapping[str, Mapping[str, float]],
) -> tuple[Mapping[str, Mapping[str, float]], str]:
    if len(replicas) <= MAX_REPLICAS:
        return replicas, ""
    key = replica_sort_key(replicas)
    worst = sorted(replicas, key=lambda r: -replicas[r].get(key, 0.0))[:MAX_REPLICAS]
    note = f"replicas: the {MAX_REPLICAS} with the highest {key} of {len(replicas):,} shown"
    return {r: replicas[r] for r in worst}, note


def replica_sort_key(replicas: Mapping[str, Mapping[str, float]], prefer: str = "ttft_p95") -> str:
    """The per-replica value to rank and plot: ``prefer`` when present, else the first
    percentile-like key, else ``count``."""
    keys = {k for v in replicas.values() for k in v}
    if prefer in keys:
        return prefer
    pct = sorted(k for k in keys if "_p" in k)
    return pct[0] if pct else "count"


def thin_waterfall(
    rows: tuple[tuple[str, float, float, str], ...],
) -> tuple[tuple[tuple[str, float, float, str], ...], str]:
    if len(rows) <= MAX_WATERFALL:
        return rows, ""
    longest = sorted(rows, key=lambda r: -r[2])[:MAX_WATERFALL]
    note = f"waterfall: the {MAX_WATERFALL} longest of {len(rows):,} spans shown"
    return tuple(sorted(longest, key=lambda r: r[1])), note
