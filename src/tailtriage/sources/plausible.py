"""Plausible times (issue 21): one impossible timestamp must not hijack a diagnosis.

Applied once to everything read (every format, a saved capture, a live Prometheus), before
requests are derived: a span, sample, event or request whose time is not finite, lies
before 2000, after 2100, or more than a day after the capture's median time, or a span or
request that lasts more than a day, is dropped and counted by reason in ``data_quality``
(``time.before_2000``, ``time.after_median``, ``time.after_2100``, ``time.over_a_day``,
``time.not_finite``).  So it never reaches a percentile or an incident window, and times
that ``datetime`` cannot hold (year 20000) never reach a renderer."""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.model import Capture, Metadata

#: 2000-01-01T00:00:00Z: no telemetry this tool reads is older (epoch 0 is a missing time)
EARLIEST_S: Final = 946_684_800.0
#: 2100-01-01T00:00:00Z: later times are corrupt (and near datetime's range at year 9999)
LATEST_S: Final = 4_102_444_800.0
#: how far after the capture's median a time may lie (incidents are minutes to hours long)
AFTER_MEDIAN_S: Final = 86_400.0
#: the longest plausible span or request (an inference request takes seconds to minutes)
MAX_DURATION_S: Final = 86_400.0

#: (table, time column, end column or None) checked
_CHECKED: Final = (
    ("spans", "start", "end"),
    ("requests", "arrival", "finish"),
    ("series", "time", None),
    ("events", "time", None),
)


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table[name].to_numpy(zero_copy_only=False), dtype=np.float64)


def median_time(capture: Capture) -> float | None:
    """The median of every start, arrival and sample time (None when there is none)."""
    times = [_column(capture.table(t), c) for t, c, _ in _CHECKED if capture.table(t).num_rows]
    if not times:
        return None
    every = np.concatenate(times)
    every = every[np.isfinite(every) & (every >= EARLIEST_S) & (every <= LATEST_S)]
    return float(np.median(every)) if len(every) else None


def _bad_rows(
    start: np.ndarray, end: np.ndarray | None, latest: float
) -> tuple[np.ndarray, dict[str, int]]:
    """Rows to drop, and how many for each reason (each row counted once, first reason)."""
    with np.errstate(invalid="ignore"):
        not_finite = ~np.isfinite(start)
        before = ~not_finite & (start < EARLIEST_S)
        after_2100 = ~not_finite & (start > LATEST_S)
        after = ~not_finite & ~after_2100 & (start > latest)
        long = np.zeros(len(start), dtype=bool)
        if end is not None:
            has_end = ~np.isnan(end)
            not_finite |= has_end & ~np.isfinite(end)
            long = has_end & np.isfinite(end) & ((end - start) > MAX_DURATION_S)
    reasons = {
        "time.not_finite": not_finite,
        "time.before_2000": before & ~not_finite,
        "time.after_2100": after_2100 & ~not_finite,
        "time.after_median": after & ~not_finite,
        "time.over_a_day": long & ~(not_finite | before | after | after_2100),
    }
    bad = not_finite | before | after | after_2100 | long
    return bad, {k: int(v.sum()) for k, v in reasons.items() if v.any()}


def plausible(capture: Capture) -> Capture:
    """``capture`` without rows at implausible times, counted by reason (see module doc)."""
    median = median_time(capture)
    latest = LATEST_S if median is None else min(LATEST_S, median + AFTER_MEDIAN_S)
    changes: dict[str, pa.Table] = {}
    counts: dict[str, int] = {}
    for name, start_col, end_col in _CHECKED:
        table = capture.table(name)
        if not table.num_rows:
            continue
        end = None if end_col is None else _column(table, end_col)
        bad, reasons = _bad_rows(_column(table, start_col), end, latest)
        if not reasons:
            continue
        changes[name] = table.filter(pa.array(~bad))
        for reason, n in reasons.items():
            key = f"{reason}.{name}"
            counts[key] = counts.get(key, 0) + n
    if not changes:
        return capture
    if "requests" in changes:  # their stages and token times go with them
        kept = changes["requests"]["request_id"]
        for child in ("stages", "token_times"):
            rows = capture.table(child)
            if rows.num_rows:
                changes[child] = rows.filter(pc.is_in(rows["request_id"], value_set=kept))
    dropped = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    meta = capture.metadata.merged(
        Metadata(quality=counts, warnings=(f"dropped rows at implausible times: {dropped}",))
    )
    return capture.replace(metadata=meta, **changes)
