"""OTLP/JSON traces: the Collector ``file`` exporter's JSON lines (one ExportTraceServiceRequest
per line) and single (possibly pretty-printed) documents.

JSON mapping rules (opentelemetry-proto docs/specification.md): hex ids in either case,
64-bit integers as decimal strings or numbers, enums as integers, missing fields = proto3
defaults.  A broken line of a JSON-lines file is skipped and counted (the Collector leaves a
truncated last line when it is killed); a broken single document is a ParseError with line
and column.

Two readers of a span, sharing one attribute decoder (:func:`attribute_values`, OTLP
``AnyValue`` to Python) and the one secret rule (``redact.needs_redaction``):

* the typed fast path (:func:`read_typed`): ``msgspec`` decodes a whole line into Structs (no
  Python dict per JSON object) and a scope's spans are appended column by column, their
  attributes JSON from one orjson call.  It takes the common, well-formed export; anything it
  does not describe exactly hands the whole line (or document) to
* the careful path (:func:`read_request`): orjson's dicts, span by span, every field checked;
  a bad span or attribute is skipped, counted and named by its position."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import msgspec
import numpy as np
import orjson
from msgspec import UNSET, UnsetType

from tailtriage.errors import ParseError
from tailtriage.model import Capture
from tailtriage.sources import otlp_halves as halves
from tailtriage.sources._safety import BOM, text_position
from tailtriage.sources.base import ReadOptions, register
from tailtriage.sources.otlp_halves import Line as _Line
from tailtriage.sources.redact import needs_redaction
from tailtriage.sources.spans import (
    EVENTS_KEY,
    MAX_WARNINGS,
    SpanColumns,
    clean_value,
    no_gc,
    norm_id,
    norm_kind,
    norm_status,
)

#: what a blank line is made of
_BLANK: Final = b" \t\r\n\x0b\x0c"


# -- attributes: OTLP KeyValue lists as Structs, and the one decoder to Python ------------------
class _Value(msgspec.Struct):
    """An OTLP ``AnyValue`` (at most one field set; none: an empty value)."""

    stringValue: str | UnsetType = UNSET
    intValue: str | int | UnsetType = UNSET
    doubleValue: int | float | str | UnsetType = UNSET  # 1 stays 1 (as orjson reads it); "NaN"
    boolValue: bool | UnsetType = UNSET
    bytesValue: str | UnsetType = UNSET  # base64, kept as text
    arrayValue: _Values | UnsetType = UNSET
    kvlistValue: _KeyValues | UnsetType = UNSET


class _KeyValue(msgspec.Struct):
    key: str
    value: _Value = msgspec.field(default_factory=_Value)


class _Values(msgspec.Struct):
    values: list[_Value] = msgspec.field(default_factory=list)


class _KeyValues(msgspec.Struct):
    values: list[_KeyValue] = msgspec.field(default_factory=list)


class _Nested(ValueError):
    """A map or list value where the caller takes flat values only."""


def attribute_values(kvs: Iterable[_KeyValue], flat: bool = False) -> dict[str, Any]:
    """``{key: value}`` of a KeyValue list, each ``AnyValue`` as Python: text, int (64-bit
    integers come as decimal strings; one that is not a number is kept as written), float,
    bool, bytes as their base64 text, arrays as lists, kvlists as dicts.  ``flat``: raise
    :class:`_Nested` at a list or map (the typed path leaves those to the careful one, which
    redacts at every depth).  The common scalars are taken inline: this runs for every
    attribute of every span."""
    try:
        return {
            kv.key: v.stringValue
            if (v := kv.value).stringValue is not UNSET
            else int(v.intValue)
            if v.intValue is not UNSET
            else v.doubleValue
            if v.doubleValue is not UNSET
            else v.boolValue
            if v.boolValue is not UNSET
            else _value(v, flat)
            for kv in kvs
        }
    except ValueError as exc:  # an intValue that is not a number
        if isinstance(exc, _Nested):
            raise
        return {kv.key: _value(kv.value, flat) for kv in kvs}


def _value(v: _Value, flat: bool) -> Any:
    if v.stringValue is not UNSET:
        return v.stringValue
    if v.intValue is not UNSET:
        try:
            return int(v.intValue)
        except ValueError:
            return v.intValue
    if v.doubleValue is not UNSET:
        return v.doubleValue
    if v.boolValue is not UNSET:
        return v.boolValue
    if v.bytesValue is not UNSET:
        return v.bytesValue
    if v.arrayValue is not UNSET:
        if flat:
            raise _Nested("array value")
        return [_value(e, False) for e in v.arrayValue.values]
    if v.kvlistValue is not UNSET:
        if flat:
            raise _Nested("kvlist value")
        return attribute_values(v.kvlistValue.values)
    return None


def _key_values(raw: Any, cols: SpanColumns, where: str) -> list[_KeyValue]:
    """A parsed JSON ``attributes`` list as KeyValues; entries that are not one (no string
    key, a value of the wrong type) are skipped, counted and named."""
    if not isinstance(raw, list):
        return []
    try:
        return msgspec.convert(raw, list[_KeyValue])
    except msgspec.ValidationError:
        pass
    out: list[_KeyValue] = []
    for i, kv in enumerate(raw):
        try:
            out.append(msgspec.convert(kv, _KeyValue))
        except msgspec.ValidationError as exc:
            cols.skip("attributes.invalid", f"{where}.attributes[{i}]", str(exc))
    return out


def _resource(kvs: Iterable[_KeyValue], limit: int, counts: dict[str, int]) -> dict[str, Any]:
    """A resource's attributes, cleaned (redacted, truncated) once for all its spans."""
    return {k: clean_value(k, v, limit, counts) for k, v in attribute_values(kvs).items()}


def _service(rattrs: dict[str, Any]) -> str | None:
    service = rattrs.get("service.name")
    return service if isinstance(service, str) else None


# -- the careful path: parsed JSON, span by span --------------------------------------------------
def _nanos(raw: Any) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        return int(raw)
    raise ValueError(f"time {raw!r} is not an integer")


def read_request(doc: Any, cols: SpanColumns, where: str) -> None:
    """Add every span of one parsed ExportTraceServiceRequest / TracesData object (the careful
    path: any shape of JSON, every problem counted and named at its position)."""
    if not isinstance(doc, dict):
        cols.skip("otlp.invalid_document", where, "not a JSON object")
        return
    rspans = doc.get("resourceSpans", doc.get("resource_spans"))
    if not isinstance(rspans, list):
        cols.skip("otlp.invalid_document", where, "no resourceSpans list")
        return
    for ri, rs in enumerate(rspans):
        pos = f"{where} resourceSpans[{ri}]"
        if not isinstance(rs, dict):
            cols.skip("otlp.invalid_document", pos, "not an object")
            continue
        res = rs.get("resource")
        raw = res.get("attributes") if isinstance(res, dict) else None
        kvs = _key_values(raw, cols, f"{pos}.resource")
        rattrs = _resource(kvs, cols.max_attribute_bytes, cols.counts)
        service = _service(rattrs)
        sspans = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans"))
        for si, ss in enumerate(sspans if isinstance(sspans, list) else ()):
            spans = ss.get("spans") if isinstance(ss, dict) else None
            for ki, sp in enumerate(spans if isinstance(spans, list) else ()):
                at = f"{pos}.scopeSpans[{si}].spans[{ki}]"
                try:
                    _read_span(sp, rattrs, service, cols, at)
                except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
                    cols.skip("spans.invalid", at, str(exc) or type(exc).__name__)


def _read_span(
    sp: Any, rattrs: dict[str, Any], service: str | None, cols: SpanColumns, where: str
) -> None:
    trace_id = norm_id(sp["traceId"], 32)
    span_id = norm_id(sp["spanId"], 16)
    if trace_id is None or span_id is None:
        raise ValueError("traceId/spanId missing or not hex")
    start_ns = _nanos(sp["startTimeUnixNano"])
    end_ns = _nanos(sp.get("endTimeUnixNano", start_ns))
    if sp.get("endTimeUnixNano") is None:
        cols.open_ends.append(len(cols))
    if end_ns < start_ns:
        raise ValueError("negative duration (end before start)")
    attrs = {**rattrs, **attribute_values(_key_values(sp.get("attributes"), cols, where))}
    events = sp.get("events")
    if events:
        times: dict[str, float] = {}
        for ev in events:
            if isinstance(ev, dict) and isinstance(ev.get("name"), str):
                name = ev["name"]
                if name not in times and ev.get("timeUnixNano") is not None:
                    times[name] = (_nanos(ev["timeUnixNano"]) - start_ns) / 1e9
        if times:
            attrs[EVENTS_KEY] = times
    status = sp.get("status")
    name = sp.get("name", "")
    cols.add(  # stores the attributes through the secret rule (SpanColumns.dump_attributes)
        trace_id,
        span_id,
        norm_id(sp.get("parentSpanId"), 16),
        name if isinstance(name, str) else str(name),
        norm_kind(sp.get("kind", 0)),
        service,
        start_ns / 1e9,
        end_ns / 1e9,
        norm_status(status.get("code", 0)) if isinstance(status, dict) else "unset",
        attrs,
    )


# -- the typed fast path: the common, well-formed export without a Python dict per object -------
# ``msgspec`` decodes a line straight into these Structs (unknown fields skipped), about a third
# cheaper than orjson's dicts.  Anything they do not describe exactly (snake_case names,
# instrumentationLibrarySpans, a string kind, a missing field the careful path must name, an
# array or kvlist value, ids of another length, an end before the start) makes the whole line
# go through the careful path, which counts and names what is wrong.
class _Event(msgspec.Struct):
    name: str
    timeUnixNano: str | int


class _Status(msgspec.Struct):
    code: int = 0


class _Span(msgspec.Struct):
    traceId: str
    spanId: str
    startTimeUnixNano: str | int
    endTimeUnixNano: str | int
    parentSpanId: str | None = None
    name: str = ""
    kind: int = 0
    attributes: list[_KeyValue] | None = None
    events: list[_Event] | None = None
    status: _Status | None = None


class _Scope(msgspec.Struct):
    spans: list[_Span] | None = None


class _Resource(msgspec.Struct):
    attributes: list[_KeyValue] | None = None


class _ResourceSpans(msgspec.Struct):
    resource: _Resource | None = None
    scopeSpans: list[_Scope] | UnsetType = UNSET
    instrumentationLibrarySpans: msgspec.Raw | UnsetType = UNSET


class _Request(msgspec.Struct):
    resourceSpans: list[_ResourceSpans] | UnsetType = UNSET


_TYPED = msgspec.json.Decoder(_Request)
#: hex digits in either case (ids are lower-cased column-wise), and the all-zero (invalid) ids
_HEX: Final = b"0123456789abcdefABCDEF"
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16


@dataclasses.dataclass(frozen=True, slots=True)
class _Batch:
    """A scope's spans, checked and ready to append (nothing is added before a whole line is)."""

    tids: list[str]
    sids: list[str]
    pids: list[str | None]
    names: list[str]
    kinds: list[int]
    service: str | None
    start_ns: np.ndarray
    end_ns: np.ndarray
    codes: list[int]
    #: the attributes JSON as one run (pieces, lengths), or None: ``merged`` span by span
    run: tuple[list[bytes | memoryview], np.ndarray] | None
    merged: list[dict[str, Any]]


def read_typed(data: _Line, cols: SpanColumns) -> bool:
    """Read one ExportTraceServiceRequest's JSON (a line, or a whole document) through the
    Structs; False, having added nothing, when it needs the careful path."""
    try:
        req = _TYPED.decode(data)
    except msgspec.DecodeError:  # (ValidationError included)
        return False
    if req.resourceSpans is UNSET:
        return False
    limit = cols.max_attribute_bytes
    counts: dict[str, int] = {}
    ready: list[_Batch] = []
    try:
        for rs in req.resourceSpans:
            res = rs.resource.attributes if rs.resource is not None else None
            rattrs = _resource(res, limit, counts) if res else {}
            if rs.scopeSpans is UNSET:
                if rs.instrumentationLibrarySpans is not UNSET:
                    return False
                continue
            for ss in rs.scopeSpans:
                if ss.spans:
                    batch = _prepare(ss.spans, rattrs, limit)
                    if batch is None:
                        return False
                    ready.append(batch)
    except (TypeError, ValueError, OverflowError):
        return False
    for k, v in counts.items():
        cols.counts[k] = cols.counts.get(k, 0) + v
    for b in ready:
        _extend(cols, b)
        if b.run is not None:
            cols.add_attribute_run(*b.run)
        else:  # the secret rule's deep pass, span by span
            cols.add_blobs([cols.dump_attributes(m) for m in b.merged])
    return True


def _prepare(spans: list[_Span], rattrs: dict[str, Any], limit: int) -> _Batch | None:
    """A scope's spans checked column by column (one list comprehension per field, set-of-
    values checks instead of per-span branches); None for anything the careful path must
    read.  ``_Nested`` (an array or kvlist value) propagates: the careful path reads it."""
    tids = [sp.traceId for sp in spans]
    sids = [sp.spanId for sp in spans]
    pids = [sp.parentSpanId or None for sp in spans]
    kinds = [sp.kind for sp in spans]
    codes = [st.code if (st := sp.status) is not None else 0 for sp in spans]
    if (
        set(map(len, tids)) != {32}
        or set(map(len, sids)) != {16}
        or not {len(p) for p in pids if p is not None} <= {16}
        or not 0 <= min(kinds) <= max(kinds) <= 5
        or not 0 <= min(codes) <= max(codes) <= 2
        or _ZERO_TRACE in tids
        or _ZERO_SPAN in sids
        # ids that are not hex: the careful path names the span
        or "".join(itertools.chain(tids, sids, filter(None, pids))).encode().translate(None, _HEX)
    ):
        return None
    start_ns = [int(sp.startTimeUnixNano) for sp in spans]
    s = np.array(start_ns, dtype=np.int64)
    e = np.array([int(sp.endTimeUnixNano) for sp in spans], dtype=np.int64)
    if (e < s).any():
        return None
    own: list[dict[str, Any]] = []
    for sp, t0 in zip(spans, start_ns, strict=True):
        d = attribute_values(sp.attributes, flat=True) if sp.attributes else {}
        if sp.events:
            times: dict[str, float] = {}
            for ev in sp.events:
                if ev.name not in times:
                    times[ev.name] = (int(ev.timeUnixNano) - t0) / 1e9
            d[EVENTS_KEY] = times
        own.append(d)
    keys = set().union(*own)
    # the key names of the secret rule, for the whole scope at once (its values: in the run)
    run = None if needs_redaction(keys, b"") else _attribute_run(own, rattrs, keys, limit)
    merged = [] if run is not None else [{**rattrs, **d} for d in own] if rattrs else own
    names = [sp.name for sp in spans]
    service = _service(rattrs)
    return _Batch(tids, sids, pids, names, kinds, service, s, e, codes, run, merged)


def _extend(cols: SpanColumns, b: _Batch) -> None:
    """Append a batch's columns (all but the attributes) to ``cols``."""
    c = cols.cols
    c["trace_id"].extend(b.tids)
    c["span_id"].extend(b.sids)
    c["parent_id"].extend(b.pids)
    c["name"].extend(b.names)
    c["kind"].extend(b.kinds)
    c["service"].extend([b.service] * len(b.tids))
    c["start"].frombytes((b.start_ns / 1e9).tobytes())
    c["end"].frombytes((b.end_ns / 1e9).tobytes())
    c["status"].extend(b.codes)


def _attribute_run(
    own: list[dict[str, Any]], rattrs: dict[str, Any], keys: set[str], limit: int
) -> tuple[list[bytes | memoryview], np.ndarray] | None:
    """A batch's attributes JSON as one run (see :func:`_dump_run`), for spans with attributes
    ``own`` (``keys``: all their keys; none a secret) over the resource's ``rattrs``: with the
    resource's JSON put ahead of each span's own when no span overrides one of its keys (no
    merged dicts), else over merged dicts; None when some value needs the per-span pass."""
    prefix = _resource_json(rattrs) if rattrs and keys.isdisjoint(rattrs) else None
    run = None if prefix is None else _dump_run(own, limit, prefix)
    if run is None:
        run = _dump_run([{**rattrs, **d} for d in own] if rattrs else own, limit)
    return run


#: between values of one orjson output: a raw NUL never occurs in JSON text (it is escaped)
_SEP: Final = orjson.Fragment(b"\x00")


def _resource_json(rattrs: dict[str, Any]) -> bytes | None:
    """The resource attributes as the members of a JSON object (no braces), to put ahead of
    each span's own; None when they need the careful pass (or orjson refuses them)."""
    try:
        out = orjson.dumps(rattrs)[1:-1]
    except TypeError:
        return None
    return None if needs_redaction((), out) or b"\x00" in out else out


def _dump_run(
    merged: list[dict[str, Any]], limit: int, prefix: bytes = b""
) -> tuple[list[bytes | memoryview], np.ndarray] | None:
    """The attributes JSON of every span of a batch from one orjson call (one output buffer
    rather than a bytes object per span: several times faster), as (pieces that joined are
    the values back to back, lengths); None when some value needs the per-span pass
    (redaction, truncation) or orjson refuses it.  ``prefix``: JSON object members put first
    in every value (the resource's attributes, when no span has a key of theirs:
    ``{**resource, **span}`` as JSON)."""
    seq: list[Any] = [_SEP] * (2 * len(merged))
    seq[::2] = merged
    try:
        out = orjson.dumps(seq)  # [v0,\0,v1,\0,...,vn,\0]
    except TypeError:
        return None
    if needs_redaction((), out):  # the values of the secret rule, for the whole batch at once
        return None
    z = np.flatnonzero(np.frombuffer(out, dtype=np.uint8) == 0)
    if len(z) != len(merged):
        return None
    starts = np.empty(len(z), dtype=np.int64)
    starts[0], starts[1:] = 1, z[:-1] + 2
    ends = z - 1
    lengths = ends - starts
    view = memoryview(out)
    if prefix:
        head, alone = b"{" + prefix + b",", b"{" + prefix + b"}"
        pieces: list[bytes | memoryview] = []
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            if b - a > 2:
                pieces += (head, view[a + 1 : b])  # {prefix, + members}
            else:
                pieces.append(alone)  # {} -> {prefix}
        lengths = lengths + len(prefix) + np.where(lengths > 2, 1, 0)
    else:
        pieces = [view[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    if lengths.max() > limit:
        return None
    return pieces, lengths


# -- files: JSON lines or one document ----------------------------------------------------------
def _is_lines(data: bytes, path: Path) -> bool:
    """JSON lines (the Collector file exporter) rather than one (pretty-printed) document?"""
    first_nl = data.find(b"\n")
    first = data[: first_nl if first_nl >= 0 else len(data)].strip()
    if first_nl >= 0 and first and _parses(first):
        return True
    try:
        _loads(data, path, whole=True)
    except ParseError:
        # a JSON-lines file whose first line is broken still has good lines after it
        if any(_parses(ln) for ln in data.split(b"\n", 8)[1:8] if ln.strip()):
            return True
    return False


def _lines(
    lines: Iterable[_Line], path: Path, cols: SpanColumns, first_lineno: int = 1
) -> Iterator[tuple[Any, str, int]]:
    """(document, position, bytes) per line; broken lines are skipped and counted.  A line
    the typed decoder reads whole is added to ``cols`` there and comes as (None, ...)."""
    for lineno, line in enumerate(lines, start=first_lineno):
        if not line or (line[0] in _BLANK and bytes(line).isspace()):  # (no copy of most)
            continue
        if read_typed(line, cols):
            cols.counts["otlp.good_lines"] = cols.counts.get("otlp.good_lines", 0) + 1
            yield None, f"line {lineno}", len(line)
            continue
        try:
            doc = _loads(line, path, whole=False, cols=cols, lineno=lineno)
        except ParseError as exc:
            cols.skip("otlp.bad_lines", f"line {lineno}", str(exc).split(": ", 1)[-1])
            continue
        cols.counts["otlp.good_lines"] = cols.counts.get("otlp.good_lines", 0) + 1
        yield doc, f"line {lineno}", len(line)


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _loads(
    data: _Line, path: Path, whole: bool, cols: SpanColumns | None = None, lineno: int = 1
) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        data = bytes(data)
        try:
            text = data.decode("utf-8", errors="strict")
        except UnicodeDecodeError as bad:
            # Non-UTF-8 bytes inside strings: keep the record, with U+FFFD in their place
            # (counted, the first one's position kept as a warning).
            try:
                doc = orjson.loads(data.decode("utf-8", errors="replace"))
            except orjson.JSONDecodeError:
                text = None
            else:
                if cols is not None:
                    _count_invalid_utf8(cols, data, bad.start, lineno)
                return doc
        pos = f"line {exc.lineno}, column {exc.colno}" if whole else f"column {exc.colno}"
        if text is None:
            pos = "invalid UTF-8"
        raise ParseError(f"invalid JSON: {exc.msg}", path=str(path), position=pos) from exc


def _count_invalid_utf8(cols: SpanColumns, data: bytes, first: int, lineno: int) -> None:
    n = data.decode("utf-8", errors="replace").count("\ufffd") - data.count("\ufffd".encode())
    cols.counts["input.invalid_utf8"] = cols.counts.get("input.invalid_utf8", 0) + n
    if len(cols.warnings) < MAX_WARNINGS:
        where = text_position(data, first)
        if lineno > 1:  # one line of a JSON-lines file: its column within that line
            where = f"line {lineno}, {where.split(', ', 1)[1]}"
        cols.warnings.append(f"{cols.source}:{where}: {n} invalid UTF-8 sequences replaced")


class OtlpJsonSource:
    name = "otlp_json"

    def sniff(self, head: bytes, path: Path) -> bool:
        h = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        return h.startswith(b"{") and (b'"resourceSpans"' in h or b'"resource_spans"' in h)

    def read(self, path: Path, options: ReadOptions) -> Capture:
        cols = SpanColumns(str(path), self.name, options.max_attribute_bytes)
        with open(path, "rb") as fh, no_gc():
            first = fh.readline()
            bom = len(BOM) if first.startswith(BOM) else 0  # a BOM must not cost line 1
            first = first[bom:]
            lines = bool(first.strip()) and first.endswith(b"\n") and _parses(first)
            if lines and not bom and halves.worth_two_processes(path):
                fh.seek(0)
                both, reported = halves.read_two_halves(fh, path, options, read_lines, self.name)
                if both is not None:
                    return both
                # something unusual in the file: the one exact pass below counts and names it
                fh.seek(len(first))
                options = halves.progress_after(options, reported)
            if lines:
                # JSON lines, streamed: the file is never held twice in memory
                lines_of = halves.mapped_lines(fh, bom) or itertools.chain([first], fh)
                read_lines(lines_of, path, cols, options)
            else:
                data = first + fh.read()
                if _is_lines(data, path):
                    read_lines(data.splitlines(keepends=True), path, cols, options)
                else:
                    if not read_typed(data, cols):
                        read_request(_loads(data, path, whole=True, cols=cols), cols, "line 1")
                    if options.progress is not None:
                        options.progress(len(data))
            good = cols.counts.pop("otlp.good_lines", 0)
            if good == 0 and cols.counts.get("otlp.bad_lines"):
                raise ParseError(
                    "no line is a valid OTLP/JSON document", path=str(path), position="line 1"
                )
            if cols.open_ends:
                cols.close_open_ends(cols.open_ends)
            return Capture(spans=cols.table(), metadata=cols.metadata())


def read_lines(lines: Iterable[_Line], path: Path, cols: SpanColumns, options: ReadOptions) -> None:
    """Every span of JSON ``lines`` into ``cols``; broken lines skipped and counted."""
    for doc, where, nbytes in _lines(lines, path, cols):
        if doc is not None:
            read_request(doc, cols, where)
        if options.progress is not None:
            options.progress(nbytes)


def part_main() -> None:
    """Entry of the child process that reads the second half of a large file
    (:func:`tailtriage.sources.otlp_halves.read_two_halves`)."""
    halves.part_main(read_lines, OtlpJsonSource.name)


register(OtlpJsonSource())
