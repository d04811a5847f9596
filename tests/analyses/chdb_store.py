"""A test-only Store that runs the analyses' SQL on the ClickHouse engine in-process (chDB).

It loads a Capture's Arrow tables into Memory tables with the logical names, so the ClickHouse
dialect of ``store/dialect.py`` is exercised on a real ClickHouse engine without a server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tailtriage.model import Capture
from tailtriage.model import schema as S


class ChdbStore:
    dialect = "clickhouse"

    def __init__(self, capture: Capture) -> None:
        from chdb import session

        self._session = session.Session()
        for name in S.TABLES:
            tab = capture.table(name)  # noqa: F841  (read by name through Python())
            # chDB keeps one engine per process: a store made earlier may have left its tables
            self._session.query(f"DROP TABLE IF EXISTS `{name}`")
            self._session.query(
                f"CREATE TABLE `{name}` ENGINE = Memory AS SELECT * FROM Python(tab)"
            )

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        assert not params
        return self._session.query(sql, "ArrowTable")

    def close(self) -> None:
        self._session.close()
