"""Where the SQL scans run.

Analyses express every scan over all requests or spans as SQL over the Capture's logical
tables (``requests``, ``stages``, ``token_times``, ``spans``, ``series``, ``events``) and get
back small Arrow tables.  A :class:`Store` runs that SQL: :class:`DuckDBStore` over an in-memory
Capture (the embedded default), and the ClickHouse store (``store/clickhouse``) over
``otel_traces`` where the logical tables are views.  ``dialect`` tells query builders which
spelling of a function to use."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import duckdb
import pyarrow as pa

from tailtriage.model import schema as S
from tailtriage.model.capture import Capture


@runtime_checkable
class Store(Protocol):
    """Runs SQL over the Capture's logical tables."""

    dialect: str  # "duckdb" | "clickhouse"

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Run ``sql`` and return the result as an Arrow table."""
        ...


class DuckDBStore:
    """The embedded default: an in-process DuckDB over a Capture's Arrow tables (zero copy)."""

    dialect = "duckdb"

    def __init__(self, capture: Capture, threads: int | None = None) -> None:
        self.capture = capture
        self._con = duckdb.connect(":memory:")
        # DuckDB draws its own progress bar on stdout for long queries; the CLI owns the terminal.
        self._con.execute("SET enable_progress_bar = false")
        if threads:
            self._con.execute(f"SET threads = {int(threads)}")
        for name in S.TABLES:
            self._con.register(name, capture.table(name))

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        rel = self._con.sql(sql, params=list(params)) if params else self._con.sql(sql)
        if rel is None:
            return pa.table({})
        return rel.to_arrow_table()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def literal(value: float | int | str | None) -> str:
    """A SQL literal DuckDB and ClickHouse read the same way (numbers exactly, strings quoted)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        raise TypeError("booleans have no portable literal")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite SQL literal {value!r}")
        return repr(value)
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
