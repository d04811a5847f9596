"""Jaeger's domain / protobuf-JSON form: what the api_v2 query service (gRPC and its HTTP
gateway) and ``jaeger-query`` storage dumps return (telemetry-conventions 5.2).

Unlike the UI's download (``jaeger``): ids are base64 bytes (``"AAAAAAAAAAAAAAAAAAAAAQ=="`` is
trace ``…0001``), ``startTime`` is RFC 3339 with nanoseconds, ``duration`` a protobuf/Go duration
(``"5000ns"``, ``"0.000005s"``, ``"1.5ms"``), tags carry ``vType`` with ``vStr`` / ``vInt64`` /
``vBool`` / ``vFloat64`` / ``vBinary``, and each span has its ``process`` inline.  A file holds
``{"spans": [...]}``, the gateway's stream (``{"result": {"spans": [...]}}``, one per line), or a
list of either.  The parent is the first CHILD_OF reference into the same trace, as in
``jaeger``."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from tailtriage.model import Capture
from tailtriage.model.timeparse import parse_duration
from tailtriage.sources._safety import json_documents
from tailtriage.sources.base import ReadOptions, register
from tailtriage.sources.spans import (
    EVENTS_KEY,
    SpanColumns,
    clean_value,
    no_gc,
    norm_kind,
    norm_status,
)

_RFC3339: Final = re.compile(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", re.IGNORECASE)
_VALUE_KEYS: Final = ("vStr", "vInt64", "vBool", "vFloat64", "vBinary")


def b64_id(raw: object, width: int) -> str | None:
    """Lower-case hex of a base64 id, left-padded to ``width`` hex digits; None when absent,
    all zero or not base64."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        hexed = base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return None
    if not hexed or len(hexed) > width or set(hexed) == {"0"}:
        return None
    return hexed.rjust(width, "0")


def rfc3339(text: object) -> float:
    """Unix seconds of an RFC 3339 time with any number of fraction digits (ns kept)."""
    if not isinstance(text, str):
        raise ValueError(f"time {text!r} is not an RFC 3339 string")
    m = _RFC3339.match(text.strip())
    if m is None:
        raise ValueError(f"time {text!r} is not RFC 3339")
    zone = "+00:00" if m.group(3).upper() == "Z" else m.group(3)
    whole = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return whole + (float("0" + m.group(2)) if m.group(2) else 0.0)


def duration_s(text: object) -> float:
    """Seconds of a Go / protobuf duration string (``"5000ns"``, ``"1.5s"``, ``"1m30s"``)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text) / 1e6  # a bare number is µs, as in the UI form
    if not isinstance(text, str):
        raise ValueError(f"duration {text!r} is not a string")
    return parse_duration(text)


def _tag_value(tag: dict[str, Any]) -> Any:
    for key in _VALUE_KEYS:
        if key in tag:
            v = tag[key]
            if key == "vInt64" and isinstance(v, str) and v.lstrip("-").isdigit():
                return int(v)
            return v
    return "" if tag.get("vType", "STRING") == "STRING" else None


def _tags(tags: Any, out: dict[str, Any], cols: SpanColumns) -> None:
    for tag in tags if isinstance(tags, list) else ():
        if isinstance(tag, dict) and isinstance(tag.get("key"), str):
            key = tag["key"]
            out[key] = clean_value(key, _tag_value(tag), cols.max_attribute_bytes, cols.counts)


def _parent(span: dict[str, Any], trace_id: str) -> tuple[str | None, bool]:
    """(parent span id, FOLLOWS_FROM only)."""
    follows: str | None = None
    for ref in span.get("references") or ():
        if not isinstance(ref, dict) or b64_id(ref.get("traceId"), 32) != trace_id:
            continue
        pid = b64_id(ref.get("spanId"), 16)
        if pid is None:
            continue
        if ref.get("refType", "CHILD_OF") == "CHILD_OF":
            return pid, False
        follows = follows or pid
    return follows, follows is not None


def _read_span(span: Any, cols: SpanColumns) -> None:
    trace_id, span_id = b64_id(span["traceId"], 32), b64_id(span["spanId"], 16)
    if trace_id is None or span_id is None:
        raise ValueError("traceId/spanId missing or not base64")
    start = rfc3339(span["startTime"])
    end = start + duration_s(span.get("duration", "0s"))
    attrs: dict[str, Any] = {}
    proc = span.get("process") if isinstance(span.get("process"), dict) else {}
    _tags(proc.get("tags"), attrs, cols)
    service = proc.get("serviceName") if isinstance(proc.get("serviceName"), str) else None
    if service is not None:
        attrs.setdefault("service.name", service)
    _tags(span.get("tags"), attrs, cols)
    parent, follows = _parent(span, trace_id)
    if follows:
        attrs["tailtriage.follows_from"] = True
    events: dict[str, float] = {}
    for log in span.get("logs") or ():
        fields = {
            f.get("key"): _tag_value(f) for f in log.get("fields") or () if isinstance(f, dict)
        }
        name = fields.get("event")
        if isinstance(name, str) and name not in events:
            events[name] = rfc3339(log.get("timestamp")) - start
    if events:
        attrs[EVENTS_KEY] = events
    if "otel.status_code" in attrs:
        status = norm_status(attrs["otel.status_code"])
    else:
        status = "error" if attrs.get("error") in (True, "true") else "unset"
    name = span.get("operationName", "")
    cols.add(trace_id, span_id, parent, str(name), norm_kind(attrs.get("span.kind")), service,
             start, end, status, attrs)  # fmt: skip


def _span_lists(doc: Any, where: str) -> Iterator[tuple[str, list[Any]]]:
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _span_lists(item, f"{where}[{i}]")
        return
    if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
        yield from _span_lists(doc["result"], f"{where}.result")
    elif isinstance(doc, dict) and isinstance(doc.get("spans"), list):
        yield f"{where}.spans", doc["spans"]


class JaegerDomainSource:
    """Jaeger api_v2 / domain-model JSON (base64 ids, RFC 3339 times)."""

    name = "jaeger_domain"

    def sniff(self, head: bytes, path: Path) -> bool:
        h = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        return (
            h.startswith((b"{", b"["))
            and b'"traceId"' in h
            and b'"operationName"' in h
            and b'"traceID"' not in h
        )

    def read(self, path: Path, options: ReadOptions) -> Capture:
        data = path.read_bytes()
        cols = SpanColumns(str(path), self.name, options.max_attribute_bytes)
        with no_gc():
            for position, doc in json_documents(data, str(path), whole="$"):
                for where, spans in _span_lists(doc, position):
                    for k, span in enumerate(spans):
                        try:
                            _read_span(span, cols)
                        except (KeyError, TypeError, ValueError, AttributeError) as exc:
                            why = str(exc) or type(exc).__name__
                            cols.skip("spans.invalid", f"{where}[{k}]", why)
        if options.progress is not None:
            options.progress(len(data))
        return Capture(spans=cols.table(), metadata=cols.metadata())


register(JaegerDomainSource())
