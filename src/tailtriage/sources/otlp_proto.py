"""OTLP protobuf traces (``opentelemetry-proto`` ExportTraceServiceRequest / TracesData).

Accepted framings: one message; messages simply concatenated (protobuf merges them: repeated
fields append); the Collector file exporter's ``format: proto`` (each message preceded by a
4-byte big-endian length); and varint length-delimited streams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tailtriage.errors import ParseError
from tailtriage.model import Capture
from tailtriage.sources.base import ReadOptions, register
from tailtriage.sources.spans import EVENTS_KEY, SpanColumns, clean_value, no_gc, norm_kind

_KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_STATUS = {1: "ok", 2: "error"}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(buf) and shift < 64:
        b = buf[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return value, pos
        shift += 7
    raise ValueError("truncated varint")


def _looks_like_request(buf: bytes, pos: int = 0) -> bool:
    """Field 1 (resource_spans, length-delimited) whose body starts with field 1 or 2."""
    if pos >= len(buf) or buf[pos] != 0x0A:
        return False
    try:
        length, body = _varint(buf, pos + 1)
    except ValueError:
        return False
    return length > 0 and body < len(buf) and buf[body] in (0x0A, 0x12)


def _any(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    x = getattr(v, which)
    if which == "array_value":
        return [_any(e) for e in x.values]
    if which == "kvlist_value":
        return {kv.key: _any(kv.value) for kv in x.values}
    if which == "bytes_value":
        return x.hex()
    return x


def _attrs(kvs: Any, out: dict[str, Any], cols: SpanColumns) -> None:
    for kv in kvs:
        out[kv.key] = clean_value(kv.key, _any(kv.value), cols.max_attribute_bytes, cols.counts)


def add_request(req: Any, cols: SpanColumns) -> None:
    """Add every span of one decoded ExportTraceServiceRequest (or TracesData) to ``cols``."""
    for rs in req.resource_spans:
        rattrs: dict[str, Any] = {}
        _attrs(rs.resource.attributes, rattrs, cols)
        service = (
            rattrs.get("service.name") if isinstance(rattrs.get("service.name"), str) else None
        )
        for ss in rs.scope_spans:
            for sp in ss.spans:
                if len(sp.trace_id) != 16 or len(sp.span_id) != 8 or not any(sp.trace_id):
                    cols.skip("spans.invalid", f"span {sp.name!r}", "trace_id/span_id missing")
                    continue
                if sp.end_time_unix_nano < sp.start_time_unix_nano:
                    cols.skip("spans.invalid", f"span {sp.name!r}", "negative duration")
                    continue
                attrs = dict(rattrs)
                _attrs(sp.attributes, attrs, cols)
                events: dict[str, float] = {}
                for ev in sp.events:
                    events.setdefault(ev.name, (ev.time_unix_nano - sp.start_time_unix_nano) / 1e9)
                if events:
                    attrs[EVENTS_KEY] = events
                parent = sp.parent_span_id.hex() if any(sp.parent_span_id) else None
                cols.add(
                    sp.trace_id.hex(),
                    sp.span_id.hex(),
                    parent,
                    sp.name,
                    norm_kind(_KINDS.get(sp.kind)),
                    service,
                    sp.start_time_unix_nano / 1e9,
                    sp.end_time_unix_nano / 1e9,
                    _STATUS.get(sp.status.code, "unset"),
                    attrs,
                )


def _messages(data: bytes) -> list[bytes]:
    """Split the framings that prefix each message with its length; else the whole buffer."""
    if len(data) > 5 and _looks_like_request(data, 4):
        out: list[bytes] = []
        pos = 0
        while pos + 4 <= len(data):
            n = int.from_bytes(data[pos : pos + 4], "big")
            if out and pos + 4 + n > len(data) and _looks_like_request(data, pos + 4):
                return [*out, data[pos + 4 :]]  # a truncated last message (a killed writer)
            if n == 0 or pos + 4 + n > len(data) or not _looks_like_request(data, pos + 4):
                break
            out.append(data[pos + 4 : pos + 4 + n])
            pos += 4 + n
        if pos == len(data):
            return out
    try:
        n, body = _varint(data, 0)
        if (
            n > 0
            and body + n <= len(data)
            and _looks_like_request(data, body)
            and n != len(data) - body
        ):
            out, pos = [], 0
            while pos < len(data):
                n, body = _varint(data, pos)
                out.append(data[body : body + n])
                pos = body + n
            return out
    except ValueError:
        pass
    return [data]


class OtlpProtoSource:
    name = "otlp_proto"

    def sniff(self, head: bytes, path: Path) -> bool:
        if head.lstrip(b" \t\r\n").startswith((b"{", b"[")):
            return False
        return _looks_like_request(head) or (len(head) > 5 and _looks_like_request(head, 4))

    def read(self, path: Path, options: ReadOptions) -> Capture:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        data = path.read_bytes()
        cols = SpanColumns(str(path), self.name, options.max_attribute_bytes)
        messages = _messages(data)
        good = 0
        with no_gc():
            for i, msg in enumerate(messages):
                req = ExportTraceServiceRequest()
                try:
                    req.ParseFromString(msg)
                except DecodeError as exc:
                    if len(messages) == 1:
                        raise ParseError(
                            f"invalid OTLP protobuf: {exc}",
                            path=str(path),
                            position=f"message {i + 1}",
                        ) from exc
                    # a broken (truncated) message of a stream: the complete ones are kept
                    cols.skip("otlp.bad_messages", f"message {i + 1}", f"invalid protobuf: {exc}")
                    continue
                good += 1
                add_request(req, cols)
        if good == 0:
            raise ParseError("no message is valid OTLP protobuf", str(path), "message 1")
        if options.progress is not None:
            options.progress(len(data))
        return Capture(spans=cols.table(), metadata=cols.metadata())


register(OtlpProtoSource())
