"""The one SQL dialect layer of the analyses.

Every full scan is SQL over the Capture's logical tables, run by a :class:`~tailtriage.model.
store.Store`: DuckDB by default, ClickHouse at scale (``otel_traces``-backed views with the same
table and column names).  Query builders write portable SQL and ask the store's dialect only for
the few constructs the two engines spell differently:

================  =================================  ==========================================
construct         DuckDB                             ClickHouse
================  =================================  ==========================================
exact quantile    ``quantile_cont(x, q)``            ``quantileExactInclusive(q)(x)``
quantile array    ``quantile_cont(x, [q1, q2])``     ``quantilesExactInclusive(q1, q2)(x)``
previous row      ``lag(x) OVER (...)``              ``lagInFrame(x) OVER (... ROWS BETWEEN
                                                     UNBOUNDED PRECEDING AND UNBOUNDED
                                                     FOLLOWING)``
n copies of row   ``unnest(range(n))``               ``arrayJoin(range(n))``
JSON string       ``json_extract_string(j, '$.k')``  ``JSONExtractString(j, 'k')``
to integer        ``CAST(x AS BIGINT)``              ``toInt64(x)``
64-bit hash       ``hash(x)``                        ``cityHash64(x)``
================  =================================  ==========================================

Both quantile functions are Hyndman-Fan type 7 (linear interpolation between order statistics),
the definition numpy uses by default, so SQL and numpy agree exactly.  A new engine registers its
own :class:`Dialect` with :func:`register_dialect`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tailtriage.errors import ConfigError
from tailtriage.store.base import Store
from tailtriage.store.base import literal as literal


class Dialect(Protocol):
    """The engine-specific spellings the analyses need."""

    name: str

    def quantile(self, expr: str, fraction: float) -> str:
        """Exact (type 7) quantile of ``expr`` at ``fraction`` in [0, 1]: a scalar."""
        ...

    def quantiles(self, expr: str, fractions: Sequence[float]) -> str:
        """Exact (type 7) quantiles at each fraction: an array/list column."""
        ...

    def lag(self, expr: str, partition: str, order: str) -> str:
        """The value of ``expr`` on the previous row of the partition (NULL/default on the first)."""
        ...

    def repeat_rows(self, count: str) -> str:
        """A select-list expression that repeats the row ``count`` times."""
        ...

    def json_string(self, column: str, key: str) -> str:
        """The string value of top-level ``key`` in the JSON object stored in ``column``."""
        ...

    def to_int(self, expr: str) -> str:
        """``expr`` converted to a 64-bit integer (truncating)."""
        ...

    def hash64(self, expr: str) -> str:
        """A 64-bit unsigned hash of ``expr`` (deterministic sampling by request id)."""
        ...


def _fractions(fractions: Sequence[float]) -> str:
    for f in fractions:
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"quantile fraction {f} outside [0, 1]")
    return ", ".join(literal(float(f)) for f in fractions)


class DuckDBDialect:
    name = "duckdb"

    def quantile(self, expr: str, fraction: float) -> str:
        return f"quantile_cont({expr}, {_fractions([fraction])})"

    def quantiles(self, expr: str, fractions: Sequence[float]) -> str:
        return f"quantile_cont({expr}, [{_fractions(fractions)}])"

    def lag(self, expr: str, partition: str, order: str) -> str:
        return f"lag({expr}) OVER (PARTITION BY {partition} ORDER BY {order})"

    def repeat_rows(self, count: str) -> str:
        return f"unnest(range({count}))"

    def json_string(self, column: str, key: str) -> str:
        return f"json_extract_string({column}, {literal('$.' + key)})"

    def to_int(self, expr: str) -> str:
        return f"CAST({expr} AS BIGINT)"

    def hash64(self, expr: str) -> str:
        return f"hash({expr})"


class ClickHouseDialect:
    name = "clickhouse"

    def quantile(self, expr: str, fraction: float) -> str:
        return f"quantileExactInclusive({_fractions([fraction])})({expr})"

    def quantiles(self, expr: str, fractions: Sequence[float]) -> str:
        return f"quantilesExactInclusive({_fractions(fractions)})({expr})"

    def lag(self, expr: str, partition: str, order: str) -> str:
        # lagInFrame respects the frame; this frame makes it behave like standard lag().
        return (
            f"lagInFrame({expr}) OVER (PARTITION BY {partition} ORDER BY {order} "
            "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
        )

    def repeat_rows(self, count: str) -> str:
        return f"arrayJoin(range(toUInt64({count})))"

    def json_string(self, column: str, key: str) -> str:
        return f"JSONExtractString({column}, {literal(key)})"

    def to_int(self, expr: str) -> str:
        return f"toInt64({expr})"

    def hash64(self, expr: str) -> str:
        return f"cityHash64({expr})"


_DIALECTS: dict[str, Dialect] = {"duckdb": DuckDBDialect(), "clickhouse": ClickHouseDialect()}


def register_dialect(dialect: Dialect) -> None:
    """Make ``dialect`` available to stores whose ``dialect`` attribute is ``dialect.name``."""
    _DIALECTS[dialect.name] = dialect


def dialect_names() -> tuple[str, ...]:
    return tuple(sorted(_DIALECTS))


def get_dialect(name: str) -> Dialect:
    try:
        return _DIALECTS[name]
    except KeyError:
        raise ConfigError(f"no SQL dialect {name!r}; known: {', '.join(dialect_names())}") from None


def dialect_of(store: Store) -> Dialect:
    """The dialect of ``store`` (its ``dialect`` attribute names it)."""
    return get_dialect(store.dialect)


def window_filter(column: str, window: tuple[float, float] | None) -> str:
    """``column`` in the half-open window [start, end); TRUE for no window."""
    if window is None:
        return "TRUE"
    start, end = window
    return f"({column} >= {literal(float(start))} AND {column} < {literal(float(end))})"
