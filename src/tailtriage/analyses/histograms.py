"""Prometheus classic histograms in the capture's ``series`` table, as PromQL reads them.

A histogram family (``vllm:time_to_first_token_seconds``) lands in ``series`` as cumulative
counters: ``_bucket`` rows with an ``le`` label, ``_sum`` and ``_count``, one row per scrape and
per labelled series (pod, engine, ...).  :func:`load_histogram` turns them into per-scrape
increases (counter resets handled as ``increase()`` does), so any window's
``sum by (le) (increase(..._bucket[window]))`` is a sum over the scrapes inside it and
``histogram_quantile`` (``quantiles.histogram_quantile``) gives the percentile with the bucket
that bounds it.

A single snapshot (one scrape time) counts everything since the engine started: there is no
earlier scrape to take an increase from.  One deliberate difference from ``increase()``: a series that first appears after the capture's
first scrape (a pod created during the incident) is counted from zero, because its first
scrape holds the requests it served since it started; ``increase()`` would drop them and with
them the requests of every scaled-up pod.  No extrapolation to the window edges."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from tailtriage.analyses import quantiles as Q
from tailtriage.analyses.results import PercentilePoint
from tailtriage.store.base import Store

_SUFFIXES = ("_bucket", "_sum", "_count")
_INF = math.inf


@dataclass(frozen=True)
class WindowHistogram:
    """One histogram family summed over its series, over one window."""

    family: str
    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), +Inf last
    count: float
    sum: float | None

    @property
    def mean(self) -> float | None:
        return None if self.sum is None or self.count <= 0 else self.sum / self.count

    def quantile(self, p: float) -> Q.HistogramQuantile:
        """``histogram_quantile(p / 100, ...)`` and its bounding bucket (p in percent)."""
        return Q.histogram_quantile(p / 100.0, self.buckets)


@dataclass(frozen=True)
class Histogram:
    """Per-scrape increases of one histogram family (every labelled series summed).

    ``times`` are the scrape times of the increases; ``bucket_deltas[i, j]`` is the increase
    of the cumulative bucket ``les[j]`` at ``times[i]``."""

    family: str  # the exported family name as found (``vllm:time_to_first_token_seconds``)
    les: tuple[float, ...]
    times: np.ndarray
    bucket_deltas: np.ndarray
    sum_deltas: np.ndarray | None
    step: float  # the median scrape interval (seconds)
    #: bucket series skipped because their ``le`` label is not a number (bad input, counted)
    skipped_buckets: int = 0

    @property
    def start(self) -> float:
        return float(self.times[0])

    @property
    def end(self) -> float:
        return float(self.times[-1])

    def window(self, lo: float, hi: float) -> WindowHistogram:
        """Increases over scrapes in ``(lo, hi]``: what happened between the scrapes."""
        mask = (self.times > lo) & (self.times <= hi)
        cum = self.bucket_deltas[mask].sum(axis=0)
        total = float(cum[-1]) if cum.size else 0.0
        s = None if self.sum_deltas is None else float(self.sum_deltas[mask].sum())
        return WindowHistogram(
            self.family, tuple(zip(self.les, (float(c) for c in cum), strict=True)), total, s
        )

    def series(
        self, ps: Sequence[float], origin: float, width: float, end: float
    ) -> tuple[PercentilePoint, ...]:
        """Percentiles per time bin ``(origin + k*width, origin + (k+1)*width]`` up to ``end``:
        the rate window of each point is the bin width.  Bins without observations are
        present with ``count = 0`` and no values, so gaps show."""
        points = []
        for k in range(max(math.ceil((end - origin) / width), 1)):
            lo = origin + k * width
            w = self.window(lo, lo + width)
            values = tuple(
                (p, q.value)
                for p in ps
                if w.count > 0 and math.isfinite((q := w.quantile(p)).value)
            )
            points.append(PercentilePoint(lo, lo + width, round(w.count), values))
        return tuple(points)


def family_names(names: Iterable[str]) -> tuple[str, ...]:
    """Every exported spelling of the given family names (``vllm:`` and ``vllm_``)."""
    out: list[str] = []
    for n in names:
        out.append(n)
        if ":" in n:
            out.append(n.replace(":", "_"))
    return tuple(dict.fromkeys(out))


def present_families(store: Store, names: Iterable[str]) -> tuple[str, ...]:
    """The histogram families among ``names`` that have ``_bucket`` rows in ``store``."""
    wanted = family_names(names)
    listed = ", ".join("'" + (n + "_bucket").replace("'", "''") + "'" for n in wanted)
    rows = store.query(f"SELECT DISTINCT metric FROM series WHERE metric IN ({listed})")
    have = {str(m)[: -len("_bucket")] for m in rows.column(0).to_pylist()}
    return tuple(n for n in wanted if n in have)


def load_histogram(
    store: Store,
    family: str,
    where: Mapping[str, str] | None = None,
    capture_start: float | None = None,
) -> Histogram | None:
    """The family's per-scrape increases, over the series whose labels match ``where``;
    None when it has no buckets.  ``capture_start``: the first scrape of the capture (series
    that start later count from zero, see the module docstring)."""
    quoted = ", ".join("'" + (family + s).replace("'", "''") + "'" for s in _SUFFIXES)
    rows = store.query(
        f"SELECT metric, labels, time, value FROM series WHERE metric IN ({quoted}) "
        "ORDER BY metric, labels, time"
    ).to_pylist()
    stamps = {float(r["time"]) for r in rows}
    if capture_start is None:
        capture_start = min(stamps, default=0.0)
    if len(stamps) == 1:
        # one /metrics snapshot: its cumulative counts are everything since the engine started
        capture_start = -math.inf
    buckets: dict[tuple[str, float], list[tuple[float, float]]] = {}
    sums: dict[str, list[tuple[float, float]]] = {}
    parsed: dict[str, tuple[str, float | None] | None] = {}
    bad: set[str] = set()
    for r in rows:
        labels = str(r["labels"])
        if labels not in parsed:
            parsed[labels] = _key(labels, where)
        got = parsed[labels]
        if got is None:
            continue
        key, le = got
        if le is not None and math.isnan(le):
            bad.add(labels)  # an unparseable bound: no bucket to put its counts in
            continue
        point = (float(r["time"]), float(r["value"]))
        metric = str(r["metric"])
        if metric.endswith("_bucket") and le is not None:
            buckets.setdefault((key, le), []).append(point)
        elif metric.endswith("_sum"):
            sums.setdefault(key, []).append(point)
    if not buckets:
        return None
    times = np.array(sorted({t for pts in buckets.values() for t, _ in pts}), dtype=np.float64)
    les = tuple(sorted({le for _, le in buckets}))
    if not math.isinf(les[-1]):
        return None  # no +Inf bucket: histogram_quantile gives NaN; not a usable histogram
    index = {t: i for i, t in enumerate(times.tolist())}
    deltas = np.zeros((times.size, len(les)), dtype=np.float64)
    col = {le: j for j, le in enumerate(les)}
    for (_, le), pts in buckets.items():
        for t, d in _increases(pts, capture_start):
            deltas[index[t], col[le]] += d
    sum_deltas = None
    if sums:
        sum_deltas = np.zeros(times.size, dtype=np.float64)
        for pts in sums.values():
            for t, d in _increases(pts, capture_start):
                if t in index:
                    sum_deltas[index[t]] += d
    step = float(np.median(np.diff(times))) if times.size > 1 else 0.0
    return Histogram(family, les, times, deltas, sum_deltas, step, len(bad))


def _key(labels: str, where: Mapping[str, str] | None) -> tuple[str, float | None] | None:
    """(series key without ``le``, le) of a labels JSON, or None when ``where`` excludes it;
    an ``le`` that is not a number reads as NaN (the caller skips and counts the series)."""
    try:
        obj = orjson.loads(labels)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    if where and any(str(obj.get(k)) != v for k, v in where.items()):
        return None
    raw = obj.pop("le", None)
    obj.pop("__name__", None)
    le: float | None = None
    if raw is not None:
        try:
            le = float(str(raw).replace("Inf", "inf"))
        except ValueError:
            le = math.nan
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode(), le


def _increases(
    points: Sequence[tuple[float, float]], capture_start: float
) -> Iterable[tuple[float, float]]:
    """Per-scrape increases of one counter series (a drop is a reset: the new value counts)."""
    prev: float | None = None
    for t, v in points:
        if prev is None:
            # a series born after the capture began (new pod) started at zero
            yield t, (v if t > capture_start else 0.0)
        else:
            yield t, (v - prev if v >= prev else v)
        prev = v
