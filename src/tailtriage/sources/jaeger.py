"""Jaeger JSON traces: the UI's "Download Results" file and the query API (``{"data": [trace,
...]}``), a single trace object, or a list of traces (telemetry-conventions 5.2).

Span times are µs since the epoch; ids may be unpadded; the parent is the first CHILD_OF
reference into the same trace (a span with only a FOLLOWS_FROM parent does not block it, and
is marked ``tailtriage.follows_from``).  Process tags are the resource attributes.  The
internal domain / protobuf-JSON form (base64 ids, RFC 3339 times) is rejected with a message
saying which export to use instead."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tailtriage.errors import ParseError
from tailtriage.model import Capture
from tailtriage.sources._safety import load_json, with_quality
from tailtriage.sources.base import ReadOptions, register
from tailtriage.sources.spans import (
    EVENTS_KEY,
    SpanColumns,
    clean_value,
    micros_span,
    no_gc,
    norm_id,
    norm_kind,
    norm_status,
)


def _tags(tags: Any, out: dict[str, Any], cols: SpanColumns) -> None:
    for tag in tags if isinstance(tags, list) else ():
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            continue
        value = tag.get("value")
        if tag.get("type") == "int64" and isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        out[tag["key"]] = clean_value(tag["key"], value, cols.max_attribute_bytes, cols.counts)


def _process_attrs(process: Any, cols: SpanColumns) -> tuple[str | None, dict[str, Any]]:
    if not isinstance(process, dict):
        return None, {}
    attrs: dict[str, Any] = {}
    _tags(process.get("tags"), attrs, cols)
    service = process.get("serviceName")
    if isinstance(service, str):
        attrs.setdefault("service.name", service)
    # Jaeger clients report the host as "hostname"/"ip"; the skew adjuster keys on host.*
    if "hostname" in attrs:
        attrs.setdefault("host.name", attrs["hostname"])
    if "ip" in attrs:
        attrs.setdefault("host.ip", attrs["ip"])
    return (service if isinstance(service, str) else None), attrs


def _parent(span: dict[str, Any], trace_id: str) -> tuple[str | None, bool, bool]:
    """(parent id, follows_from only, had a reference into another trace)."""
    follows: str | None = None
    cross = False
    for ref in span.get("references") or ():
        if not isinstance(ref, dict):
            continue
        if norm_id(ref.get("traceID"), 32) not in (None, trace_id):
            cross = True
            continue
        pid = norm_id(ref.get("spanID"), 16)
        if pid is None:
            continue
        if ref.get("refType", "CHILD_OF") == "CHILD_OF":
            return pid, False, cross
        follows = follows or pid
    legacy = norm_id(span.get("parentSpanID"), 16)
    if legacy is not None:
        return legacy, False, cross
    return follows, follows is not None, cross


def read_trace(trace: Any, cols: SpanColumns, where: str) -> None:
    if not isinstance(trace, dict) or not isinstance(trace.get("spans"), list):
        cols.skip("jaeger.invalid_trace", where, "not a trace object with a spans list")
        return
    raw = trace.get("processes")
    processes: dict[str, Any] = raw if isinstance(raw, dict) else {}
    resolved = {k: _process_attrs(v, cols) for k, v in processes.items()}
    for k, span in enumerate(trace["spans"]):
        try:
            _read_span(span, resolved, cols)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            cols.skip("spans.invalid", f"{where}.spans[{k}]", str(exc) or type(exc).__name__)


def _read_span(
    span: Any, processes: dict[str, tuple[str | None, dict[str, Any]]], cols: SpanColumns
) -> None:
    start_us = span["startTime"]
    trace_id, span_id, start, end = micros_span(
        span["traceID"],
        span["spanID"],
        start_us,
        span.get("duration", 0),
        ("traceID/spanID", "startTime/duration"),
    )
    proc = span.get("process")
    service, attrs = (
        _process_attrs(proc, cols)
        if isinstance(proc, dict)
        else processes.get(span.get("processID"), (None, {}))
    )
    attrs = dict(attrs)
    _tags(span.get("tags"), attrs, cols)
    parent, follows, cross = _parent(span, trace_id)
    if cross:
        cols.counts["spans.cross_trace_reference"] = (
            cols.counts.get("spans.cross_trace_reference", 0) + 1
        )
    if follows:
        attrs["tailtriage.follows_from"] = True
    events: dict[str, float] = {}
    for log in span.get("logs") or ():
        fields = {
            f.get("key"): f.get("value") for f in log.get("fields") or () if isinstance(f, dict)
        }
        name = fields.get("event")
        if (
            isinstance(name, str)
            and name not in events
            and isinstance(log.get("timestamp"), int | float)
        ):
            events[name] = (log["timestamp"] - start_us) / 1e6
    if events:
        attrs[EVENTS_KEY] = events
    status = "unset"
    if "otel.status_code" in attrs:
        status = norm_status(attrs["otel.status_code"])
    elif attrs.get("error") in (True, "true"):
        status = "error"
    name = span.get("operationName", "")
    cols.add(
        trace_id,
        span_id,
        parent,
        name if isinstance(name, str) else str(name),
        norm_kind(attrs.get("span.kind")),
        service,
        start,
        end,
        status,
        attrs,
    )


def _is_domain_form(doc: Any) -> bool:
    spans = doc.get("spans") if isinstance(doc, dict) else None
    if not isinstance(spans, list) or not spans or not isinstance(spans[0], dict):
        return False
    return "traceId" in spans[0] and "traceID" not in spans[0]


class JaegerSource:
    name = "jaeger"

    def sniff(self, head: bytes, path: Path) -> bool:
        h = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if not h.startswith((b"{", b"[")):
            return False
        if b'"traceID"' in h and (b'"spanID"' in h or b'"spans"' in h):
            return True
        # the internal domain form: sniffed here so that it gets a clear rejection
        return b'"operationName"' in h and b'"spans"' in h and b'"traceId"' in h

    def read(self, path: Path, options: ReadOptions) -> Capture:
        data = path.read_bytes()
        decoded = load_json(data, path)
        doc = decoded.doc
        if _is_domain_form(doc):
            raise ParseError(
                "Jaeger internal (domain / protobuf-JSON) form is not supported: base64 ids and "
                "RFC 3339 times; export the trace from the Jaeger UI (Download Results) or the "
                'query API (/api/traces), which write {"data": [...]}',
                path=str(path),
                position="$.spans",
            )
        if isinstance(doc, dict) and "data" in doc:
            traces, base = doc["data"] or [], "$.data"
        elif isinstance(doc, list):
            traces, base = doc, "$"
        else:
            traces, base = [doc], "$"
        if not isinstance(traces, list):
            raise ParseError("'data' is not a list of traces", path=str(path), position="$.data")
        cols = SpanColumns(str(path), self.name, options.max_attribute_bytes)
        with no_gc():
            for i, trace in enumerate(traces):
                read_trace(
                    trace, cols, f"{base}[{i}]" if base != "$" or isinstance(doc, list) else "$"
                )
        if options.progress is not None:
            options.progress(len(data))
        capture = Capture(spans=cols.table(), metadata=cols.metadata())
        return with_quality(capture, decoded.quality, decoded.warnings)


register(JaegerSource())
