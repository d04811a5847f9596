"""Triage where the spans live: a :class:`~tailtriage.store.base.Store` over ClickHouse
``otel_traces`` (a server through ``clickhouse-connect``, or chDB in-process).

Opening the store runs the derivation of :mod:`clickhouse_sql` once, inside ClickHouse, into
session-scoped tables named like the Capture's logical tables (``requests``, ``stages``, and
empty ``token_times``/``series``/``events``; ``spans`` reads ``otel_traces`` itself).  The
analyses then send their usual SQL (ClickHouse dialect of ``store/dialect.py``) and only
aggregates and the tail band come back; :func:`ingest` pulls the per-request rows when a local
capture is wanted.  Nothing per span ever crosses the wire.

    with open_store("chdb:///data/ch?table=otel_traces") as store:
        report = analyze(store, "p95 ttft < 500ms")"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa

from tailtriage.derive.derive import MAX_ADJUSTMENTS_LISTED
from tailtriage.derive.rules import RuleSet, load_rules
from tailtriage.errors import BackendError, ConfigError
from tailtriage.model import Capture, ClockAdjustment, FileProvenance, Metadata
from tailtriage.model import schema as S
from tailtriage.model.timeparse import parse_time
from tailtriage.sources._safety import network_timeout
from tailtriage.sources.plausible import LATEST_S
from tailtriage.sources.redact import redact_strings
from tailtriage.store.clickhouse_plausible import TimeCheck, check_times
from tailtriage.store.clickhouse_sql import (
    literal,
    requests_sql,
    spans_sql,
    stages_sql,
    traces_sql,
)
from tailtriage.store.clickhouse_url import ClickHouseTarget, parse_url, password

#: seconds read past ``until`` so that requests arriving just before it keep their late spans
TRAILING_S = 600.0
_PLACEHOLDER = re.compile(r"'(?:[^'\\]|\\.|'')*'|\?")
_SPANS_REF = re.compile(r"\b(FROM|JOIN)\s+spans\b", re.IGNORECASE)
_CH_TYPES = {
    pa.string(): "String",
    pa.float64(): "Float64",
    pa.int64(): "Int64",
    pa.int32(): "Int32",
}


class _Engine(Protocol):
    """The few calls the store needs from chDB or clickhouse-connect."""

    temporary: bool

    def command(self, sql: str) -> None: ...

    def arrow(self, sql: str) -> pa.Table: ...

    def insert_arrow(self, table: str, data: pa.Table) -> None: ...

    def close(self) -> None: ...


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    refused = re.search(r"\[Errno \d+\] ([^\"')]+)", text)
    if refused and "HTTPConnectionPool" in text:
        return f"cannot connect to ClickHouse ({refused.group(1).strip()})"
    text = re.sub(r"Stack trace.*$", "", text)
    return text[:300] + ("…" if len(text) > 300 else "")


#: how to install the optional ClickHouse drivers (chDB in-process, clickhouse-connect)
_INSTALL = "pip install 'tailtriage[clickhouse]'"


class _Chdb:
    """chDB: the ClickHouse engine in-process on a local database folder."""

    temporary = False

    def __init__(self, target: ClickHouseTarget) -> None:
        try:
            from chdb import session
        except ImportError as exc:  # an optional dependency: say how to get it
            raise BackendError(f"{target.where}: chdb is not installed ({_INSTALL})") from exc

        self._where = target.where
        try:
            self._s = session.Session(target.path)  # type: ignore[no-untyped-call]
        except Exception as exc:  # chDB raises plain RuntimeError and its own ChdbError
            raise BackendError(f"{self._where}: cannot open chDB ({_one_line(exc)})") from exc

    def command(self, sql: str) -> None:
        self._run(sql, "CSV")

    def arrow(self, sql: str) -> pa.Table:
        out = self._run(sql, "ArrowTable")
        return out if isinstance(out, pa.Table) else pa.table({})

    def insert_arrow(self, table: str, data: pa.Table) -> None:
        staged = data  # noqa: F841  (read by name through Python())
        self._run(f"INSERT INTO {table} SELECT * FROM Python(staged)", "CSV")

    def _run(self, sql: str, fmt: str) -> Any:
        try:
            return self._s.query(sql, fmt)  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise BackendError(f"{self._where}: {_one_line(exc)}") from exc

    def close(self) -> None:
        self._s.close()  # type: ignore[no-untyped-call]


class _Server:
    """A ClickHouse server over HTTP(S) with clickhouse-connect; one session, so temporary
    tables live exactly as long as the store."""

    temporary = True

    def __init__(self, target: ClickHouseTarget, secret: str) -> None:
        try:
            import clickhouse_connect
        except ImportError as exc:  # an optional dependency: say how to get it
            raise BackendError(
                f"{target.where}: clickhouse-connect is not installed ({_INSTALL})"
            ) from exc

        # the driver logs a failed request before raising it; the error we raise says it once
        logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())
        self._where = target.where
        try:
            self._c = clickhouse_connect.get_client(
                host=target.host,
                port=target.port,
                username=target.user or "default",
                password=secret,
                database=target.database,
                secure=target.secure,
                connect_timeout=network_timeout(),
                send_receive_timeout=network_timeout(),
            )
        except Exception as exc:
            raise BackendError(_scrub(f"{self._where}: {_one_line(exc)}", secret)) from exc
        self._secret = secret

    def command(self, sql: str) -> None:
        self._call(lambda: self._c.command(sql))

    def arrow(self, sql: str) -> pa.Table:
        out = self._call(lambda: self._c.query_arrow(sql))
        return out if isinstance(out, pa.Table) else pa.table({})

    def insert_arrow(self, table: str, data: pa.Table) -> None:
        self._call(lambda: self._c.insert_arrow(table, data))

    def _call(self, fn: Any) -> Any:
        try:
            return fn()
        except Exception as exc:
            raise BackendError(_scrub(f"{self._where}: {_one_line(exc)}", self._secret)) from exc

    def close(self) -> None:
        self._c.close()


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def connect(target: ClickHouseTarget) -> _Engine:
    """An engine for ``target``; BackendError naming the host when it cannot be reached."""
    if target.in_process:
        return _Chdb(target)
    return _Server(target, password())


def ch_type(t: pa.DataType, nullable: bool) -> str:
    base = _CH_TYPES.get(t)
    if base is None:
        raise TypeError(f"no ClickHouse type for {t}")
    return f"Nullable({base})" if nullable else base


def ddl_columns(schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {ch_type(f.type, f.nullable)}" for f in schema)


def bind(sql: str, params: Sequence[Any] | None) -> str:
    """``sql`` with each ``?`` outside string literals replaced by the next parameter."""
    if not params:
        return sql
    values = iter(params)

    def sub(m: re.Match[str]) -> str:
        if m.group(0) != "?":
            return m.group(0)
        try:
            return literal(next(values))
        except StopIteration:
            raise ConfigError("fewer SQL parameters than placeholders") from None

    return _PLACEHOLDER.sub(sub, sql)


class ClickHouseStore:
    """The Capture's logical tables as SQL over an ``otel_traces`` table."""

    dialect = "clickhouse"
    #: spans derived per query (a batch holds whole traces)
    spans_per_batch = 2_000_000

    def __init__(
        self,
        target: ClickHouseTarget,
        *,
        rules: RuleSet | None = None,
        window: tuple[float, float] | None = None,
        engine: _Engine | None = None,
    ) -> None:
        self.target = target
        self.window = window
        self._rules = rules or load_rules()
        self._engine = engine or connect(target)
        self._scratch: str | None = None
        self._times = TimeCheck(latest=LATEST_S, kept=0)  # set by _materialise
        self._metadata: Metadata | None = None
        try:
            self._materialise()
        except BaseException:
            self.close()
            raise

    # -- set-up ---------------------------------------------------------------------------
    def _window_filter(self) -> str:
        if self.window is None:
            return "1"
        lo, hi = self.window
        return (
            f"Timestamp >= toDateTime64({literal(float(lo))}, 9) AND "
            f"Timestamp < toDateTime64({literal(float(hi) + TRAILING_S)}, 9)"
        )

    def _span_filter(self) -> str:
        """The spans read: those of the window at plausible times (file ingest's rules)."""
        return f"{self._window_filter()} AND {self._times.where()}"

    def _create(self, name: str, schema: pa.Schema, select: str | None) -> None:
        kind = "TEMPORARY TABLE" if self._engine.temporary else "TABLE"
        self._engine.command(f"CREATE {kind} `{name}` ({ddl_columns(schema)}) ENGINE = Memory")
        if select is not None:
            cols = ", ".join(f"`{f.name}`" for f in schema)
            self._engine.command(f"INSERT INTO `{name}` ({cols}) {select}")

    def _materialise(self) -> None:
        t = self.target
        try:
            self._engine.arrow(f"SELECT 1 FROM {t.qualified_table} LIMIT 0")
        except BackendError as exc:
            raise BackendError(f"cannot read {t.database}.{t.table}: {exc}") from exc
        if not self._engine.temporary:
            self._scratch = f"tailtriage_{uuid.uuid4().hex[:12]}"
            self._engine.command(f"CREATE DATABASE `{self._scratch}`")
            self._engine.command(f"USE `{self._scratch}`")
        # Traces are derived in batches of whole traces (by a hash of the trace id) so that one
        # GROUP BY never has to hold every span of a large window at once.
        self._times = check_times(self._engine.arrow, t.qualified_table, self._window_filter())
        n = self._times.kept
        batches = max(1, -(-n // self.spans_per_batch))
        cols = (
            "trace_id, arrival, ft, finish, spec, http, model, failed, prompt_tokenss, "
            "output_tokenss, error_types, replicas, nodes, stage_rows, is_req, n_dup, n_orphan, "
            "n_moved, moved"
        )
        for b in range(batches):
            where = self._span_filter()
            if batches > 1:
                where += f" AND cityHash64(TraceId) % {batches} = {b}"
            traces = traces_sql(spans_sql(t.qualified_table, where, self._rules), self.window)
            if b == 0:
                self._engine.command(
                    f"CREATE {'TEMPORARY ' if self._engine.temporary else ''}TABLE `_tt_traces` "
                    f"ENGINE = Memory AS SELECT {cols} FROM ({traces})"
                )
            else:
                self._engine.command(f"INSERT INTO `_tt_traces` SELECT {cols} FROM ({traces})")
        self._create("requests", S.REQUESTS, requests_sql("_tt_traces", t.display()))
        self._create("stages", S.STAGES, stages_sql("_tt_traces"))
        for name in ("token_times", "series", "events"):
            self._create(name, S.TABLES[name], None)

    def repairs(self) -> Metadata:
        """What the derivation repaired, counted like file ingest counts it (``derive``):
        duplicate span ids dropped, orphans, spans shifted for clock skew (the first
        :data:`MAX_ADJUSTMENTS_LISTED` of them listed, by trace id and span id)."""
        row = self._engine.arrow(
            "SELECT sum(n_dup) AS dup, sum(n_orphan) AS orphan, sum(n_moved) AS moved "
            "FROM `_tt_traces`"
        ).to_pylist()[0]
        n = {k: int(v or 0) for k, v in row.items()}
        listed = self.query(
            "SELECT trace_id, x.1 AS span_id, x.2 AS service, x.3 AS delta "
            "FROM `_tt_traces` ARRAY JOIN moved AS x "
            f"ORDER BY trace_id, span_id LIMIT {MAX_ADJUSTMENTS_LISTED}"
        ).to_pylist()
        counts = {
            k: v
            for k, v in (
                ("spans.duplicate_id", n["dup"]),
                ("spans.orphan", n["orphan"]),
                ("spans.clock_skew_adjusted", n["moved"]),
            )
            if v
        }
        warnings = []
        if n["dup"]:
            warnings.append(f"{n['dup']} spans with a duplicate id dropped")
        if n["moved"]:
            warnings.append(f"{n['moved']} spans shifted to correct clock skew")
        return self._times.metadata().merged(
            Metadata(
                clock_adjustments=tuple(
                    ClockAdjustment(r["trace_id"], r["span_id"], r["service"], float(r["delta"]))
                    for r in listed
                ),
                quality=counts,
                warnings=tuple(warnings),
            )
        )

    # -- the InputStore protocol --------------------------------------------------------------
    @property
    def capture(self) -> Capture:
        """No tables in Python: they stay in ClickHouse."""
        return Capture()

    @property
    def metadata(self) -> Metadata:
        """Where the spans came from, the window, and what the derivation repaired."""
        if self._metadata is None:
            where = self.target.display()
            self._metadata = self.repairs().merged(
                Metadata(
                    provenance=(FileProvenance(path=where, format="clickhouse_otel_traces"),),
                    extra={"clickhouse": {"url": where, "window": self.window}},
                )
            )
        return self._metadata

    @property
    def time_range(self) -> tuple[float, float] | None:
        row = self.query(
            "SELECT count() AS n, min(arrival) AS lo, max(coalesce(finish, arrival)) AS hi "
            "FROM requests"
        ).to_pylist()[0]
        return (float(row["lo"]), float(row["hi"])) if row["n"] else None

    def local_requests(
        self, windows: Sequence[tuple[float, float]], limit: int
    ) -> tuple[Capture, list[str]]:
        """Requests (and stages) arriving in ``windows``, when there are at most ``limit``."""
        cond = " OR ".join(
            f"(arrival >= {literal(float(lo))} AND arrival < {literal(float(hi))})"
            for lo, hi in windows
        )
        n = int(self.query(f"SELECT count() AS n FROM requests WHERE {cond}")["n"][0].as_py())
        if n > limit:
            return Capture(), [
                f"no predictions: {n} requests in the incident and baseline windows exceed the "
                f"what-if limit of {limit}; narrow --since/--until or --incident"
            ]
        return ingest(self, where=cond), []

    # -- the Store protocol -------------------------------------------------------------------
    def query(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        """The result of ``sql``, its text redacted: span names, errors, models, pod names
        and whatever else an analysis reads back are values from the table, which file
        ingest would have redacted (only what is returned is looked at: aggregates and rows
        of requests, never every span)."""
        sql = bind(sql, params)
        sql = _SPANS_REF.sub(lambda m: f"{m.group(1)} ({self._spans_view()}) AS spans", sql)
        return redact_strings(self._engine.arrow(sql))

    def _spans_view(self) -> str:
        return (
            "SELECT TraceId AS trace_id, SpanId AS span_id, nullIf(ParentSpanId, '') AS parent_id, "
            "toString(SpanName) AS name, toString(SpanKind) AS kind, "
            "toString(ServiceName) AS service, "
            "toFloat64(toUnixTimestamp64Nano(Timestamp)) / 1e9 AS start, "
            "toFloat64(toUnixTimestamp64Nano(Timestamp) + toInt64(Duration)) / 1e9 AS end, "
            "toString(StatusCode) AS status "
            f"FROM {self.target.qualified_table} WHERE {self._span_filter()}"
        )

    def counts(self) -> dict[str, int]:
        row = self.query(
            "SELECT (SELECT count() FROM requests) AS requests, "
            "(SELECT count() FROM stages) AS stages, (SELECT count() FROM spans) AS spans"
        ).to_pylist()[0]
        return {k: int(v) for k, v in row.items()}

    def close(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is None:
            return
        try:
            if self._scratch is not None:
                engine.command("USE default")
                engine.command(f"DROP DATABASE IF EXISTS `{self._scratch}`")
        except BackendError:
            pass  # closing must not mask the error that brought us here
        finally:
            engine.close()
            self._engine = None  # type: ignore[assignment]

    def __enter__(self) -> ClickHouseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def window_of(
    target: ClickHouseTarget, since: str | float | None, until: str | float | None
) -> tuple[float, float] | None:
    """The [since, until) window from the options, else from the URL; None for all spans."""
    lo = since if since is not None else target.since
    hi = until if until is not None else target.until
    if lo is None and hi is None:
        return None
    end = time.time() if hi is None else parse_time(hi, "--until")
    start = 0.0 if lo is None else parse_time(lo, "--since")
    if start >= end:
        raise ConfigError(f"--since ({start}) must be before --until ({end})")
    return (start, end)


def open_store(
    url: str,
    *,
    rules: str | None = None,
    since: str | float | None = None,
    until: str | float | None = None,
) -> ClickHouseStore:
    """A ClickHouseStore over the table ``url`` names, restricted to [since, until)."""
    target = parse_url(url)
    return ClickHouseStore(target, rules=load_rules(rules), window=window_of(target, since, until))


def ingest(store: ClickHouseStore, where: str = "1") -> Capture:
    """The store's requests (those matching ``where``) and their stages as a local Capture;
    no spans: they stay in ClickHouse."""
    counts = store.counts()
    requests = store.query(f"SELECT * FROM requests WHERE {where} ORDER BY arrival, request_id")
    stages = store.query(
        f"SELECT * FROM stages WHERE request_id IN (SELECT request_id FROM requests WHERE {where}) "
        "ORDER BY request_id, start, stage"
    )
    meta = store.repairs().merged(
        Metadata(
            provenance=(
                FileProvenance(
                    path=store.target.display(),
                    format="clickhouse_otel_traces",
                    records=counts["spans"],
                ),
            ),
            extra={"clickhouse": {"url": store.target.display(), "window": store.window}},
        )
    )
    return Capture(
        requests=_conform(requests, S.REQUESTS),
        stages=_conform(stages, S.STAGES),
        metadata=meta,
    )


def _conform(tab: pa.Table, schema: pa.Schema) -> pa.Table:
    if tab.num_rows == 0:
        return schema.empty_table()
    return pa.Table.from_arrays([tab[f.name].cast(f.type) for f in schema], schema=schema)
