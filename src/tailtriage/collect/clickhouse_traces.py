"""Traces of an incident window from a ClickHouse ``otel_traces`` table, written as OTLP/JSON.

``clickhouse://user@host:8123/db?table=otel_traces`` (a server, through clickhouse-connect; the
password only from ``TAILTRIAGE_CLICKHOUSE_PASSWORD``) or ``chdb:///dir?table=otel_traces``
(in-process), parsed and connected by :mod:`tailtriage.store.clickhouse_url` and
:mod:`tailtriage.store.clickhouse`, with collect's ``--timeout``.  Two queries:

1. the window's traces — those with a root span (``ParentSpanId = ''``) starting in it —
   ranked by that root's duration, slowest first, cut at ``max_traces``, the count of all of
   them alongside (for the manifest);
2. every span of the kept traces, read from :data:`BEFORE_S` before the window (children of
   a skewed clock) to :data:`~tailtriage.store.clickhouse.TRAILING_S` after it (late spans).

Each trace becomes one line ``{"resourceSpans": [...]}`` of ``traces/clickhouse.jsonl``, spans
grouped by resource and scope as the Collector's file exporter writes them
(``sources.otlp_json`` reads it back).  Attribute values stay strings, as the ClickHouse
exporter stored them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Protocol

import orjson
import pyarrow as pa

from tailtriage.collect.manifest import SourceOutcome
from tailtriage.collect.traces import redact_attributes, redaction_lines
from tailtriage.derive.skew import MAX_SKEW_S
from tailtriage.errors import BackendError, ConfigError
from tailtriage.sources._safety import using_timeout
from tailtriage.store.base import literal
from tailtriage.store.clickhouse import TRAILING_S, connect
from tailtriage.store.clickhouse_url import ClickHouseTarget, parse_url

#: seconds read before the window: a child on a skewed clock may start before its root
BEFORE_S: Final = MAX_SKEW_S
#: the bundle file written
FILE: Final = "traces/clickhouse.jsonl"
#: OTLP SpanKind numbers by the exporter's spellings (``Server`` and ``SPAN_KIND_SERVER``)
_KIND: Final = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
#: OTLP StatusCode numbers by the exporter's spellings (``Ok`` and ``STATUS_CODE_OK``)
_STATUS: Final = {"UNSET": 0, "OK": 1, "ERROR": 2}
_SPAN_COLUMNS: Final = """TraceId AS trace_id, SpanId AS span_id, ParentSpanId AS parent_id,
    TraceState AS trace_state, toString(SpanName) AS name, toString(SpanKind) AS kind,
    toString(ServiceName) AS service,
    arrayMap(k -> toString(k), mapKeys(ResourceAttributes)) AS res_keys,
    mapValues(ResourceAttributes) AS res_values, ScopeName AS scope, ScopeVersion AS scope_version,
    arrayMap(k -> toString(k), mapKeys(SpanAttributes)) AS keys, mapValues(SpanAttributes) AS `values`,
    toUnixTimestamp64Nano(Timestamp) AS start_ns, toInt64(Duration) AS duration_ns,
    toString(StatusCode) AS status, StatusMessage AS status_message,
    arrayMap(t -> toUnixTimestamp64Nano(t), `Events.Timestamp`) AS ev_ns,
    arrayMap(n -> toString(n), `Events.Name`) AS ev_names,
    arrayMap(m -> arrayMap(k -> toString(k), mapKeys(m)), `Events.Attributes`) AS ev_keys,
    arrayMap(m -> mapValues(m), `Events.Attributes`) AS ev_values,
    `Links.TraceId` AS link_traces, `Links.SpanId` AS link_spans"""


class _Engine(Protocol):
    def arrow(self, sql: str) -> pa.Table: ...

    def close(self) -> None: ...


def collect_clickhouse(
    url: str, out: Path, window: tuple[float, float], timeout: float, max_traces: int
) -> SourceOutcome:
    """The window's ``max_traces`` slowest traces of the table ``url`` names, as
    ``traces/clickhouse.jsonl``; failures are the outcome's error lines."""
    try:
        target = parse_url(url)
    except ConfigError as exc:
        return SourceOutcome("traces", url.split("?", 1)[0], errors=(str(exc),))
    shown = target.display()
    notes = []
    if target.since or target.until:
        notes.append("the URL's since/until are ignored: collect reads its own window")
    asked: list[str] = []
    try:
        with _engine(target, timeout) as engine:
            ranked = _ranked(engine, target, window, max_traces, asked)
            docs = _traces(engine, target, window, ranked, asked) if ranked.num_rows else []
    except BackendError as exc:
        return SourceOutcome("traces", shown, tuple(asked), errors=(str(exc),), notes=tuple(notes))
    total = int(ranked["total"][0].as_py()) if ranked.num_rows else 0
    if total > len(docs):
        notes.append(f"kept the {len(docs)} slowest of {total} traces")
    redacted: dict[str, int] = {}
    redact_attributes(docs, redacted)
    files: tuple[str, ...] = ()
    if docs:
        (out / "traces").mkdir(parents=True, exist_ok=True)
        (out / FILE).write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
        files = (FILE,)
    else:
        notes.append("no traces in the window")
    return SourceOutcome(
        "traces",
        shown,
        tuple(asked),
        files,
        len(docs),
        notes=tuple(notes),
        redactions=redaction_lines(redacted),
    )


@contextmanager
def _engine(target: ClickHouseTarget, timeout: float) -> Iterator[_Engine]:
    with using_timeout(timeout):
        engine = connect(target)
    try:
        yield engine
    finally:
        engine.close()


def _in_window(lo: float, hi: float) -> str:
    return f"Timestamp >= toDateTime64({literal(lo)}, 9) AND Timestamp < toDateTime64({literal(hi)}, 9)"


def _ranked(
    engine: _Engine,
    target: ClickHouseTarget,
    window: tuple[float, float],
    max_traces: int,
    asked: list[str],
) -> pa.Table:
    """(trace_id, root_ns, total): the window's traces by root duration, slowest first."""
    asked.append(f"SELECT the {max_traces} slowest root spans of {target.database}.{target.table}")
    return engine.arrow(
        "SELECT TraceId AS trace_id, max(Duration) AS root_ns, count() OVER () AS total "
        f"FROM {target.qualified_table} "
        f"WHERE ParentSpanId = '' AND {_in_window(float(window[0]), float(window[1]))} "
        f"GROUP BY TraceId ORDER BY root_ns DESC, trace_id LIMIT {int(max_traces)}"
    )


def _traces(
    engine: _Engine,
    target: ClickHouseTarget,
    window: tuple[float, float],
    ranked: pa.Table,
    asked: list[str],
) -> list[dict[str, Any]]:
    """One OTLP/JSON document per ranked trace, in the ranking's order."""
    ids = ranked["trace_id"].to_pylist()
    asked.append(f"SELECT the spans of {len(ids)} traces")
    spans = engine.arrow(
        f"SELECT {_SPAN_COLUMNS} FROM {target.qualified_table} "
        f"WHERE TraceId IN ({', '.join(literal(t) for t in ids)}) "
        f"AND {_in_window(float(window[0]) - BEFORE_S, float(window[1]) + TRAILING_S)} "
        "ORDER BY trace_id, start_ns, span_id"
    )
    by_trace: dict[str, dict[tuple[Any, ...], list[dict[str, Any]]]] = {t: {} for t in ids}
    for row in spans.to_pylist():
        resource = (row["service"], tuple(zip(row["res_keys"], row["res_values"], strict=True)))
        scope = (row["scope"], row["scope_version"])
        by_trace[row["trace_id"]].setdefault((resource, scope), []).append(_span(row))
    return [_document(groups) for groups in by_trace.values() if groups]


def _document(groups: dict[tuple[Any, ...], list[dict[str, Any]]]) -> dict[str, Any]:
    """``{"resourceSpans": [...]}`` of one trace: one entry per resource, scopes inside."""
    resources: dict[Any, list[dict[str, Any]]] = {}
    for (resource, (scope, version)), spans in groups.items():
        entry: dict[str, Any] = {"scope": {"name": scope, "version": version}, "spans": spans}
        resources.setdefault(resource, []).append(entry)
    out = []
    for (service, attrs), scopes in resources.items():
        pairs = dict(attrs)
        if service and "service.name" not in pairs:
            pairs["service.name"] = service
        out.append({"resource": {"attributes": _attributes(pairs.items())}, "scopeSpans": scopes})
    return {"resourceSpans": out}


def _attributes(pairs: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": {"stringValue": v}} for k, v in pairs]


def _code(text: str, table: dict[str, int], prefix: str) -> int:
    """The OTLP number of a kind or status in either spelling; 0 (unspecified) when unknown."""
    return table.get(text.upper().removeprefix(prefix), 0)


def _span(row: dict[str, Any]) -> dict[str, Any]:
    """One OTLP/JSON span (64-bit times as decimal strings, as the Collector writes them)."""
    start = int(row["start_ns"])
    span: dict[str, Any] = {
        "traceId": row["trace_id"],
        "spanId": row["span_id"],
        "name": row["name"],
        "kind": _code(row["kind"], _KIND, "SPAN_KIND_"),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + max(int(row["duration_ns"]), 0)),
        "attributes": _attributes(zip(row["keys"], row["values"], strict=True)),
        "status": {"code": _code(row["status"], _STATUS, "STATUS_CODE_")},
    }
    if row["parent_id"]:
        span["parentSpanId"] = row["parent_id"]
    if row["trace_state"]:
        span["traceState"] = row["trace_state"]
    if row["status_message"]:
        span["status"]["message"] = row["status_message"]
    if row["ev_names"]:
        span["events"] = [
            {"timeUnixNano": str(t), "name": n, "attributes": _attributes(zip(k, v, strict=True))}
            for t, n, k, v in zip(
                row["ev_ns"], row["ev_names"], row["ev_keys"], row["ev_values"], strict=True
            )
        ]
    if row["link_traces"]:
        span["links"] = [
            {"traceId": t, "spanId": s}
            for t, s in zip(row["link_traces"], row["link_spans"], strict=True)
        ]
    return span
