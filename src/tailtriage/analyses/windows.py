"""Percentiles over time and the incident / baseline windows.

The percentile series is one SQL ``GROUP BY`` over time bins of the request arrival (30 s by
default, wider when there are too few requests per bin, narrower for short captures).  The
incident window is the longest stretch of bins where an SLO's percentile breaches its threshold
(one healthy bin inside a stretch does not split it); the baseline is the healthy stretch right
before it (or, when the incident starts the capture, right after it), cut where the arrivals
rose when a surge was absorbed for a while before the SLO broke.  A request belongs to the
window that contains its arrival; windows are half-open ``[start, end)``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tailtriage.analyses.metrics import MetricSource
from tailtriage.analyses.results import PercentilePoint, SloSpec, Windows
from tailtriage.store.base import Store
from tailtriage.store.dialect import dialect_of, literal, window_filter

DEFAULT_BIN = 30.0
MIN_PER_BIN = 20  # requests per bin on average before bins get wider
MIN_BINS = 8  # short captures get narrower bins, down to this many
MAX_BINS = 200  # long captures get wider bins, so charts stay small


def bin_width(
    n: int,
    duration: float,
    preferred: float = DEFAULT_BIN,
    min_per_bin: int = MIN_PER_BIN,
) -> float:
    """An adaptive bin width: ``preferred`` unless that leaves too few requests per bin, too few
    bins (short capture) or too many (long capture).  Rounded up to a nice width."""
    if n <= 0 or duration <= 0:
        return preferred
    width = min(preferred, duration / MIN_BINS)
    width = max(width, duration * min_per_bin / n, duration / MAX_BINS)
    return _nice_ceil(width)


#: bin widths a person reads easily on a time axis (seconds)
NICE_WIDTHS: tuple[float, ...] = (
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0,
    1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0,
)  # fmt: skip


def _nice_ceil(x: float) -> float:
    """The smallest nice width >= x (whole days beyond one day)."""
    for v in NICE_WIDTHS:
        if v >= x * (1 - 1e-12):
            return v
    return float(math.ceil(x / 86400.0) * 86400.0)


@dataclass(frozen=True)
class TimeRange:
    """First and last arrival of the requests that count (seconds)."""

    start: float
    end: float
    count: int


def arrival_range(store: Store, source: MetricSource) -> TimeRange | None:
    row = store.query(
        f"SELECT min(arrival) AS lo, max(arrival) AS hi, count(*) AS n FROM ({source.sql}) AS s"
    ).to_pylist()[0]
    if not row["n"]:
        return None
    return TimeRange(float(row["lo"]), float(row["hi"]), int(row["n"]))


def percentile_series(
    store: Store,
    source: MetricSource,
    ps: Sequence[float],
    origin: float,
    width: float,
    window: tuple[float, float] | None = None,
) -> tuple[PercentilePoint, ...]:
    """Exact percentiles per time bin ``[origin + k*width, origin + (k+1)*width)``; bins without
    requests are present with ``count = 0`` and no values, so gaps show."""
    d = dialect_of(store)
    ps = tuple(sorted(set(float(p) for p in ps)))
    bin_expr = d.to_int(f"floor((arrival - {literal(origin)}) / {literal(width)})")
    sql = (
        f"SELECT {bin_expr} AS bin, count(*) AS n, "
        f"{d.quantiles('value', [p / 100 for p in ps])} AS qs "
        f"FROM ({source.sql}) AS s WHERE {window_filter('arrival', window)} "
        "GROUP BY bin ORDER BY bin"
    )
    rows = {int(r["bin"]): r for r in store.query(sql).to_pylist()}
    if not rows:
        return ()
    points = []
    for b in range(min(rows), max(rows) + 1):
        r = rows.get(b)
        values = tuple(zip(ps, (float(q) for q in r["qs"]), strict=True)) if r else ()
        start = origin + b * width
        points.append(PercentilePoint(start, start + width, int(r["n"]) if r else 0, values))
    return tuple(points)


def bin_breaches(
    series: Sequence[PercentilePoint], slos: Sequence[SloSpec]
) -> tuple[tuple[bool, ...], ...]:
    """Per SLO, per bin: does the bin's percentile exceed the threshold?"""
    out = []
    for spec in slos:
        flags = []
        for pt in series:
            value = dict(pt.values).get(spec.percentile)
            flags.append(value is not None and pt.count > 0 and value > spec.threshold)
        out.append(tuple(flags))
    return tuple(out)


@dataclass(frozen=True)
class DetectedWindows:
    windows: Windows
    notes: tuple[str, ...] = ()


def _runs(flags: Sequence[bool], value: bool) -> list[tuple[int, int]]:
    """Maximal runs [i, j) of ``flags == value``."""
    runs, i = [], 0
    while i < len(flags):
        if flags[i] != value:
            i += 1
            continue
        j = i
        while j < len(flags) and flags[j] == value:
            j += 1
        runs.append((i, j))
        i = j
    return runs


def _merge_single_gaps(breached: list[bool]) -> list[bool]:
    """A single healthy bin between two breached ones belongs to the incident."""
    out = list(breached)
    for i in range(1, len(out) - 1):
        if not breached[i] and breached[i - 1] and breached[i + 1]:
            out[i] = True
    return out


def baseline_before(
    series: Sequence[PercentilePoint],
    breaches: Sequence[Sequence[bool]],
    incident: tuple[float, float],
) -> DetectedWindows:
    """For a user-given incident: the last healthy stretch of bins that ends before it."""
    breached = [any(col) for col in zip(*breaches, strict=True)] if breaches else []
    usable = [k for k, pt in enumerate(series) if pt.end <= incident[0]]
    flags = [breached[k] for k in usable]
    runs = [r for r in _runs(flags, False) if sum(series[k].count for k in range(*r)) > 0]
    if not runs:
        note = "no healthy time bins before the given incident window: no baseline"
        return DetectedWindows(Windows(incident, None, False), (note,))
    i, j = runs[-1]
    return DetectedWindows(Windows(incident, (series[i].start, series[j - 1].end), False))


#: a bin twice the threshold weighs as much as any worse one: a short spike far over the line
#: does not outweigh a long breach, and a long stretch of near-misses does not outweigh either
BREACH_WEIGHT_CAP = 1.0


def _breach_mass(pt: PercentilePoint, slo: SloSpec | None) -> float:
    """A breaching bin's weight: its requests times how far its percentile is over the
    threshold (capped at BREACH_WEIGHT_CAP); its requests alone without an SLO."""
    if slo is None:
        return float(pt.count)
    value = dict(pt.values).get(slo.percentile)
    if value is None or not slo.threshold > 0 or value <= slo.threshold:
        return 0.0
    return pt.count * min(value / slo.threshold - 1.0, BREACH_WEIGHT_CAP)


def detect_windows(
    series: Sequence[PercentilePoint],
    breaches: Sequence[Sequence[bool]],
    capture: TimeRange,
    slo: SloSpec | None = None,
) -> DetectedWindows:
    """The incident and the healthy baseline before it.  The incident is the breaching stretch
    with the most breach mass (requests times how far over ``slo``'s threshold their bin's
    percentile is; requests alone without ``slo``): two bins of noise just over the line in a
    healthy baseline must not win over a shorter stretch at twice the threshold."""
    whole = (capture.start, math.nextafter(capture.end, math.inf))
    if not series:
        return DetectedWindows(Windows(whole, None, True), ("no requests to place in time",))
    breached = _merge_single_gaps([any(col) for col in zip(*breaches, strict=True)])
    runs = _runs(breached, True)
    if not runs:
        note = "no time bin breaches the SLO: the incident window is the whole capture"
        return DetectedWindows(Windows(whole, None, True), (note,))

    def requests_in(run: tuple[int, int]) -> int:
        return sum(pt.count for pt in series[run[0] : run[1]])

    def mass(run: tuple[int, int]) -> float:
        return sum(_breach_mass(pt, slo) for pt in series[run[0] : run[1]])

    i, j = max(runs, key=lambda r: (mass(r), requests_in(r), r[1] - r[0]))
    incident = (series[i].start, series[j - 1].end)
    before = [r for r in _runs(breached, False) if r[1] == i and requests_in(r) > 0]
    after = [r for r in _runs(breached, False) if r[0] == j and requests_in(r) > 0]
    if before:
        k = before[0][0]
        end, notes = _before_load_rise(series, k, i)
        return DetectedWindows(Windows(incident, (series[k].start, end), True), notes)
    if after:
        k = after[0][1]
        note = "nothing healthy before the incident: the baseline is the healthy stretch after it"
        return DetectedWindows(Windows(incident, (incident[1], series[k - 1].end), True), (note,))
    note = "the SLO breaches throughout the capture: no healthy baseline window"
    return DetectedWindows(Windows(incident, None, True), (note,))


#: arrivals after a split this many times those before it are a load rise, not drift
LOAD_RISE_MIN = 1.25
#: ... and that far outside Poisson noise (standard errors of the difference of the two rates)
LOAD_RISE_Z = 4.0
#: bins the baseline keeps at least before a load rise (90 s at the default width)
MIN_BASELINE_BINS = 3


def _before_load_rise(
    series: Sequence[PercentilePoint], lo: int, hi: int
) -> tuple[float, tuple[str, ...]]:
    """The healthy stretch ``[lo, hi)`` ends where the load rose most clearly, when it did and
    MIN_BASELINE_BINS came before it: a surge absorbed for minutes before the SLO breaks is
    part of the incident, and a baseline that holds it hides the rise every capacity rule
    compares against.  Returns when the baseline ends (the incident's start when no rise: a
    step in the arrivals per bin that clears both LOAD_RISE_MIN and LOAD_RISE_Z) and a note."""
    counts = [pt.count for pt in series[lo:hi]]
    best, best_z = len(counts), LOAD_RISE_Z
    for k in range(1, len(counts)):
        before, after = counts[:k], counts[k:]
        r1, r2 = sum(before) / len(before), sum(after) / len(after)
        if r1 <= 0 or r2 < LOAD_RISE_MIN * r1:
            continue
        z = (r2 - r1) / math.sqrt(r1 / len(before) + r2 / len(after))
        if z > best_z:
            best, best_z = k, z
    if best < MIN_BASELINE_BINS or best == len(counts):
        return series[hi].start, ()  # no rise, or too little before it to compare against
    rise = series[lo + best].start
    note = (
        f"arrivals rose {series[hi].start - rise:.0f} s before the SLO broke: the baseline"
        " ends where they rose"
    )
    return rise, (note,)
