"""Load a bundle's spans into an ``otel_traces`` table, as the Collector's ClickHouse exporter
would have written them, so the scale path can be tried on one's own files.

The table is created with the exporter's DDL (``traces_table.sql`` of
opentelemetry-collector-contrib ``exporter/clickhouseexporter``, Apache-2.0; MergeTree, no TTL,
bloom-filter indexes) unless it exists.  Values follow the exporter's conventions
(telemetry-conventions 5.4): nanosecond ``Timestamp`` = span start and ``Duration``, lower-case
hex ids, ``ParentSpanId`` '' for roots, every attribute value as a string, span kind and status
in the new (``Server``, ``Ok``) or the old (``SPAN_KIND_SERVER``, ``STATUS_CODE_OK``) spelling.

Times come back as the file sources read them (float seconds); each is turned into the integer
nanosecond whose ``ns / 1e9`` is that very float, so ClickHouse and the file path compute the
same seconds bit for bit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import numpy as np
import orjson
import pyarrow as pa

from tailtriage.errors import InputError
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_bundle, read_file
from tailtriage.sources.spans import EVENTS_KEY
from tailtriage.store.clickhouse import _Engine, connect
from tailtriage.store.clickhouse_url import ClickHouseTarget, parse_url

#: rows converted and sent per insert
BATCH: Final = 50_000
#: resource attributes by prefix (the file sources merged them into the span's attributes)
_RESOURCE_PREFIXES: Final = (
    "service.",
    "k8s.",
    "host.",
    "container.",
    "cloud.",
    "process.",
    "telemetry.",
    "os.",
    "deployment.",
)

DDL: Final = """CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9) CODEC(Delta(8), ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(T64, ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1,
    INDEX idx_lower_span_name lower(SpanName) TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 8
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
PRIMARY KEY (ServiceName, SpanName, toDateTime(Timestamp))
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1"""

_COLUMNS: Final = (
    "Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName, "
    "ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, "
    "StatusMessage, `Events.Timestamp`, `Events.Name`, `Events.Attributes`, `Links.TraceId`, "
    "`Links.SpanId`, `Links.TraceState`, `Links.Attributes`"
)
#: staged columns -> the exporter's columns
_CONVERT: Final = """SELECT fromUnixTimestamp64Nano(ts_ns), trace_id, span_id, parent_id, '', name,
    kind, service, mapFromArrays(res_keys, res_values), '', '', mapFromArrays(keys, values),
    toUInt64(duration_ns), status, '', arrayMap(t -> fromUnixTimestamp64Nano(t), ev_ns), ev_names,
    arrayMap(x -> map(), ev_names), [], [], [], []
FROM {staged}"""

_STAGED: Final = pa.schema(
    [
        ("ts_ns", pa.int64()),
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("parent_id", pa.string()),
        ("name", pa.string()),
        ("kind", pa.string()),
        ("service", pa.string()),
        ("res_keys", pa.list_(pa.string())),
        ("res_values", pa.list_(pa.string())),
        ("keys", pa.list_(pa.string())),
        ("values", pa.list_(pa.string())),
        ("duration_ns", pa.int64()),
        ("status", pa.string()),
        ("ev_ns", pa.list_(pa.int64())),
        ("ev_names", pa.list_(pa.string())),
    ]
)
_STAGED_DDL: Final = (
    "ts_ns Int64, trace_id String, span_id String, parent_id String, name String, kind String, "
    "service String, res_keys Array(String), res_values Array(String), keys Array(String), "
    "`values` Array(String), duration_ns Int64, status String, ev_ns Array(Int64), "
    "ev_names Array(String)"
)
_NEW_KIND: Final = {
    "SERVER": "Server",
    "CLIENT": "Client",
    "INTERNAL": "Internal",
    "PRODUCER": "Producer",
    "CONSUMER": "Consumer",
}
_NEW_STATUS: Final = {"ok": "Ok", "error": "Error", "unset": "Unset"}


def exact_nanos(seconds: np.ndarray) -> np.ndarray:
    """Integer nanoseconds ``n`` with ``float(n) / 1e9 == seconds`` (the file sources' own
    conversion), found next to ``round(seconds * 1e9)``."""
    n = np.round(seconds * 1e9).astype(np.int64)
    for step in (0, 1, -1, 2, -2, 3, -3, 4, -4):
        cand = n + step * 256  # 256 ns: the float spacing around today's unix time in ns
        ok = cand.astype(np.float64) / 1e9 == seconds
        if ok.all():
            return cand
        if step == 0:
            best = cand.copy()
        best = np.where(~(best.astype(np.float64) / 1e9 == seconds) & ok, cand, best)
    return best


def _text(value: Any) -> str:
    """An attribute value the way the exporter stringifies it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return orjson.dumps(value).decode()


def _kind(kind: str | None, old: bool) -> str:
    k = kind or "UNSPECIFIED"
    if old:
        return f"SPAN_KIND_{k}"
    return _NEW_KIND.get(k, "Unspecified")


def _status(status: str | None, old: bool) -> str:
    s = status or "unset"
    return f"STATUS_CODE_{s.upper()}" if old else _NEW_STATUS.get(s, "Unset")


def staged_batches(spans: pa.Table, *, old_spelling: bool = False) -> Iterator[pa.Table]:
    """The spans table as staged rows for :data:`_CONVERT`, in batches."""
    for off in range(0, spans.num_rows, BATCH):
        yield _stage(spans.slice(off, BATCH), old_spelling)


def _stage(part: pa.Table, old: bool) -> pa.Table:
    start = part["start"].to_numpy(zero_copy_only=False).astype(np.float64)
    end = part["end"].to_numpy(zero_copy_only=False).astype(np.float64)
    s_ns, e_ns = exact_nanos(start), exact_nanos(end)
    cols: dict[str, list[Any]] = {f.name: [] for f in _STAGED}
    for attrs_json, sn in zip(part["attributes"].to_pylist(), s_ns.tolist(), strict=True):
        attrs = orjson.loads(attrs_json) if attrs_json else {}
        events = attrs.pop(EVENTS_KEY, None) or {}
        rk, rv, sk, sv = [], [], [], []
        for k, v in attrs.items():
            if v is None:
                continue
            if k.startswith(_RESOURCE_PREFIXES):
                rk.append(k)
                rv.append(_text(v))
            else:
                sk.append(k)
                sv.append(_text(v))
        cols["res_keys"].append(rk)
        cols["res_values"].append(rv)
        cols["keys"].append(sk)
        cols["values"].append(sv)
        names = [str(n) for n in events]
        cols["ev_names"].append(names)
        cols["ev_ns"].append([sn + round(float(events[n]) * 1e9) for n in names])
    cols["ts_ns"] = s_ns.tolist()
    cols["duration_ns"] = np.maximum(e_ns - s_ns, 0).tolist()
    cols["trace_id"] = part["trace_id"].to_pylist()
    cols["span_id"] = part["span_id"].to_pylist()
    cols["parent_id"] = [p or "" for p in part["parent_id"].to_pylist()]
    cols["name"] = part["name"].to_pylist()
    cols["kind"] = [_kind(k, old) for k in part["kind"].to_pylist()]
    cols["service"] = [s or "" for s in part["service"].to_pylist()]
    cols["status"] = [_status(s, old) for s in part["status"].to_pylist()]
    return pa.Table.from_pydict(cols, schema=_STAGED)


def create_table(engine: _Engine, target: ClickHouseTarget) -> None:
    engine.command(f"CREATE DATABASE IF NOT EXISTS `{target.database}`")
    engine.command(DDL.format(table=target.qualified_table))


def export_spans(
    engine: _Engine, target: ClickHouseTarget, spans: pa.Table, *, old_spelling: bool = False
) -> int:
    """Insert ``spans`` (the Capture's spans table) into ``target``; return the rows written."""
    create_table(engine, target)
    staged = f"`{target.database}`.`_tailtriage_staged`"
    if engine.temporary:
        staged = "`_tailtriage_staged`"
        engine.command(f"CREATE TEMPORARY TABLE IF NOT EXISTS {staged} ({_STAGED_DDL})")
    else:
        engine.command(f"DROP TABLE IF EXISTS {staged}")
        engine.command(f"CREATE TABLE {staged} ({_STAGED_DDL}) ENGINE = Memory")
    written = 0
    try:
        for batch in staged_batches(spans, old_spelling=old_spelling):
            engine.command(f"TRUNCATE TABLE {staged}")
            engine.insert_arrow(staged, batch)
            engine.command(
                f"INSERT INTO {target.qualified_table} ({_COLUMNS}) "
                + _CONVERT.format(staged=staged)
            )
            written += batch.num_rows
    finally:
        engine.command(f"DROP TABLE IF EXISTS {staged}")
    return written


def export_bundle(path: str | Path, url: str, *, old_spelling: bool = False) -> int:
    """Load the spans of a bundle (folder or file) into the ``otel_traces`` table ``url``
    names (created with the exporter's DDL); return the number of spans written."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", path=str(p))
    options = ReadOptions()
    capture = read_bundle(p, options) if p.is_dir() else read_file(p, options)
    target = parse_url(url)
    engine = connect(target)
    try:
        return export_spans(engine, target, capture.spans, old_spelling=old_spelling)
    finally:
        engine.close()
