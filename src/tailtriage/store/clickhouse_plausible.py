"""Plausible times (issue 21) for spans read where they live, in ClickHouse ``otel_traces``.

The rules of :mod:`tailtriage.sources.plausible` (file ingest) pushed down as a SQL ``WHERE``:
a span that starts before 2000, after 2100 or more than a day after the median start of the
window's spans, or that lasts more than a day, never enters the derivation, the ``spans`` view
or a percentile.  The spans dropped are counted by reason with the keys file ingest uses
(``time.before_2000.spans``, ``time.after_2100.spans``, ``time.after_median.spans``,
``time.over_a_day.spans``; each span once, under its first reason).

Cost: the counts are the span count the store needs anyway (one scan of ``Timestamp`` and
``Duration``); the exact median, a sort, is computed only when the starts spread over more
than a day, the only case where it can drop anything.  ClickHouse's integer columns cannot hold
a time that is not finite, so ``time.not_finite`` never occurs here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa

from tailtriage.model import Metadata
from tailtriage.sources.plausible import AFTER_MEDIAN_S, EARLIEST_S, LATEST_S, MAX_DURATION_S

#: span start in unix seconds, as the derivation computes it (``clickhouse_sql.spans_sql``)
_START: Final = "(toFloat64(toUnixTimestamp64Nano(Timestamp)) / 1e9)"
#: the longest plausible span in the unit of ``Duration`` (nanoseconds, UInt64 or Int64)
_MAX_DURATION_NS: Final = int(MAX_DURATION_S * 1e9)
_LONG: Final = f"(Duration > {_MAX_DURATION_NS})"
_TABLE: Final = "spans"


@dataclass(frozen=True)
class TimeCheck:
    """What the time rules keep: spans starting in [``EARLIEST_S``, ``latest``] that last at
    most a day; ``kept`` of them, ``dropped`` counted by ``data_quality`` key."""

    latest: float
    kept: int
    dropped: dict[str, int] = field(default_factory=dict)

    def where(self) -> str:
        """The SQL boolean over ``otel_traces`` columns that keeps the plausible spans (the
        very expressions that counted them, so ``kept`` is exact)."""
        return f"{_START} >= {EARLIEST_S!r} AND {_START} <= {self.latest!r} AND NOT {_LONG}"

    def metadata(self) -> Metadata:
        """The counts and the warning file ingest gives for the same spans."""
        if not self.dropped:
            return Metadata()
        listed = ", ".join(f"{n} {k}" for k, n in sorted(self.dropped.items()))
        return Metadata(
            quality=dict(self.dropped),
            warnings=(f"dropped rows at implausible times: {listed}",),
        )


def check_times(query: Callable[[str], pa.Table], table: str, where: str) -> TimeCheck:
    """Count the spans of ``table`` matching ``where`` by time rule (``query`` runs SQL)."""
    early, late = f"{_START} < {EARLIEST_S!r}", f"{_START} > {LATEST_S!r}"
    in_range = f"NOT ({early}) AND NOT ({late})"
    row = query(
        f"""SELECT countIf({early}) AS before, countIf({late}) AS after_2100,
    countIf({in_range}) AS n_in, countIf({in_range} AND {_LONG}) AS long_in,
    minIf({_START}, {in_range}) AS lo, maxIf({_START}, {in_range}) AS hi
FROM {table} WHERE {where}"""
    ).to_pylist()[0]
    counts = {k: int(row[k]) for k in ("before", "after_2100", "n_in", "long_in")}
    latest, after_median, long = LATEST_S, 0, counts["long_in"]
    if counts["n_in"] and float(row["hi"]) - float(row["lo"]) > AFTER_MEDIAN_S:
        # only starts spread over more than a day can lie a day after their median: then the
        # exact median (numpy's, the mean of the middle two: ``quantileExactInclusive``)
        median = query(
            f"SELECT quantileExactInclusive(0.5)({_START}) AS m FROM {table} "
            f"WHERE ({where}) AND {in_range}"
        ).column("m")[0]
        latest = min(LATEST_S, float(median.as_py()) + AFTER_MEDIAN_S)
        tail = query(
            f"SELECT countIf({_START} > {latest!r}) AS after, "
            f"countIf({_START} <= {latest!r} AND {_LONG}) AS long "
            f"FROM {table} WHERE ({where}) AND {in_range}"
        ).to_pylist()[0]
        after_median, long = int(tail["after"]), int(tail["long"])
    by_reason = {
        "time.before_2000": counts["before"],
        "time.after_2100": counts["after_2100"],
        "time.after_median": after_median,
        "time.over_a_day": long,
    }
    dropped = {f"{k}.{_TABLE}": n for k, n in by_reason.items() if n}
    return TimeCheck(latest=latest, kept=counts["n_in"] - after_median - long, dropped=dropped)
