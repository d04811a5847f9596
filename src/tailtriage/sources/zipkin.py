"""Zipkin v2 JSON: an array of spans (or, from the API, an array of traces, each an array of
spans); telemetry-conventions 5.3.

Times are µs since the epoch.  64-bit trace ids are padded to 128 bits so they join W3C ids.
With B3 shared span ids a CLIENT and its ``shared: true`` SERVER half carry the same id: the
server half gets a new id derived from the old one, and the client half as its parent, so each
span keeps its own time (counted as ``spans.shared_id_split``)."""

from __future__ import annotations

import hashlib
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
)


def split_shared_id(trace_id: str, span_id: str) -> str:
    """The id given to the server half of a shared span (stable, 16 hex)."""
    return hashlib.blake2b(f"{trace_id}/{span_id}/shared".encode(), digest_size=8).hexdigest()


def _spans(doc: Any) -> list[Any]:
    if isinstance(doc, list) and doc and all(isinstance(x, list) for x in doc):
        return [s for trace in doc for s in trace]
    if isinstance(doc, list):
        return doc
    raise ValueError("a Zipkin v2 file is a JSON array of spans")


def _read_span(
    sp: Any, clients: set[tuple[str, str]], split: set[tuple[str, str]], cols: SpanColumns
) -> None:
    ts = sp["timestamp"]
    trace_id, span_id, start, end = micros_span(
        sp["traceId"], sp["id"], ts, sp.get("duration", 0), ("traceId/id", "timestamp/duration")
    )
    parent = norm_id(sp.get("parentId"), 16)
    kind = norm_kind(sp.get("kind"))
    attrs: dict[str, Any] = {}
    ep = sp.get("localEndpoint") if isinstance(sp.get("localEndpoint"), dict) else {}
    service = ep.get("serviceName") if isinstance(ep.get("serviceName"), str) else None
    if service:
        attrs["service.name"] = service
    for key, attr in (("ipv4", "host.ip"), ("ipv6", "host.ip")):
        if isinstance(ep.get(key), str):
            attrs.setdefault(attr, ep[key])
    tags = sp.get("tags")
    for k, v in tags.items() if isinstance(tags, dict) else ():
        attrs[str(k)] = clean_value(str(k), v, cols.max_attribute_bytes, cols.counts)
    events: dict[str, float] = {}
    for ann in sp.get("annotations") or ():
        if (
            isinstance(ann, dict)
            and isinstance(ann.get("value"), str)
            and isinstance(ann.get("timestamp"), int | float)
        ):
            events.setdefault(ann["value"], (ann["timestamp"] - ts) / 1e6)
    if events:
        attrs[EVENTS_KEY] = events
    if sp.get("shared") and kind == "SERVER" and (trace_id, span_id) in clients:
        attrs["zipkin.shared_id"] = span_id
        parent, span_id = span_id, split_shared_id(trace_id, span_id)
        cols.counts["spans.shared_id_split"] = cols.counts.get("spans.shared_id_split", 0) + 1
    elif parent is not None and (trace_id, parent) in split:
        # a child of a shared id belongs to the server half (Jaeger's span-id deduper does so)
        parent = split_shared_id(trace_id, parent)
    name = sp.get("name") or ""
    cols.add(
        trace_id,
        span_id,
        parent,
        name if isinstance(name, str) else str(name),
        kind,
        service,
        start,
        end,
        "error" if "error" in attrs else "unset",
        attrs,
    )


class ZipkinSource:
    name = "zipkin"

    def sniff(self, head: bytes, path: Path) -> bool:
        h = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        return (
            h.startswith(b"[") and b'"traceId"' in h and (b'"id"' in h or b'"localEndpoint"' in h)
        )

    def read(self, path: Path, options: ReadOptions) -> Capture:
        data = path.read_bytes()
        decoded = load_json(data, path)
        try:
            spans = _spans(decoded.doc)
        except ValueError as exc:
            raise ParseError(str(exc), path=str(path), position="$") from exc
        clients = {
            (norm_id(s.get("traceId"), 32) or "", norm_id(s.get("id"), 16) or "")
            for s in spans
            if isinstance(s, dict) and norm_kind(s.get("kind")) == "CLIENT"
        }
        split = {
            (norm_id(s.get("traceId"), 32) or "", norm_id(s.get("id"), 16) or "")
            for s in spans
            if isinstance(s, dict) and s.get("shared") and norm_kind(s.get("kind")) == "SERVER"
        } & clients
        cols = SpanColumns(str(path), self.name, options.max_attribute_bytes)
        with no_gc():
            for k, sp in enumerate(spans):
                try:
                    _read_span(sp, clients, split, cols)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    cols.skip("spans.invalid", f"$[{k}]", str(exc) or type(exc).__name__)
        if options.progress is not None:
            options.progress(len(data))
        capture = Capture(spans=cols.table(), metadata=cols.metadata())
        return with_quality(capture, decoded.quality, decoded.warnings)


register(ZipkinSource())
