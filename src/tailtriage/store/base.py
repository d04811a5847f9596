"""Where the SQL scans run.

Analyses express every scan over all requests or spans as SQL over the Capture's logical
tables (``requests``, ``stages``, ``token_times``, ``spans``, ``series``, ``events``) and get
back small Arrow tables.  A :class:`Store` runs that SQL: :class:`DuckDBStore` over an in-memory
Capture (the embedded default), and the ClickHouse store (``store/clickhouse``) over
``otel_traces`` where the logical tables are views.  ``dialect`` tells query builders which
spelling of a function to use."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import duckdb
import pyarrow as pa

from tailtriage.model import schema as S
from tailtriage.model.capture import Capture, Metadata


@runtime_checkable
class Store(Protocol):
    """Runs SQL over the Capture's logical tables."""

    dialect: str  # "duckdb" | "clickhouse"

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Run ``sql`` and return the result as an Arrow table."""
        ...


class InputStore(Store, Protocol):
    """A Store that ``open_input`` opens over the user's input: what the pipeline needs on top
    of SQL, the same for an embedded capture and for a server whose tables stay there."""

    @property
    def capture(self) -> Capture:
        """The tables held in Python: all of them (embedded) or none (a server)."""
        ...

    @property
    def metadata(self) -> Metadata:
        """Provenance, repairs, skipped files and warnings of the input."""
        ...

    @property
    def time_range(self) -> tuple[float, float] | None:
        """First arrival and last finish of the requests (``Capture.time_range``)."""
        ...

    def local_requests(
        self, windows: Sequence[tuple[float, float]], limit: int
    ) -> tuple[Capture, list[str]]:
        """The requests the what-if calibrates on (those arriving in ``windows`` at least),
        as a local Capture, or an empty one and a warning when they are more than ``limit``."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> InputStore: ...

    def __exit__(self, *exc: object) -> None: ...


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

    @property
    def metadata(self) -> Metadata:
        return self.capture.metadata

    @property
    def time_range(self) -> tuple[float, float] | None:
        return self.capture.time_range

    def local_requests(
        self, windows: Sequence[tuple[float, float]], limit: int
    ) -> tuple[Capture, list[str]]:
        """The whole capture: it is local already (the replay picks its window itself)."""
        return self.capture, []

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def opened(source: Capture | InputStore) -> Iterator[InputStore]:
    """``source`` as an InputStore: a Capture in a DuckDBStore closed on exit, a store as is
    (its opener closes it)."""
    if isinstance(source, Capture):
        with DuckDBStore(source) as store:
            yield store
    else:
        yield source


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
