"""Span normalisation shared by every trace source.

Each trace format spells the same facts differently (telemetry-conventions section 7): ids in
upper or lower case, padded or not; span kind as an int, ``SPAN_KIND_SERVER``, ``server`` or
a Jaeger tag; status as an int, ``STATUS_CODE_ERROR`` or ``error=true``; times in ns, µs or
RFC 3339.  The helpers here turn them into the ``spans`` table's single spelling, and
:class:`SpanColumns` accumulates rows column by column (no per-span objects survive a read).

Conventions of the ``attributes`` JSON (documented in docs/model.md): span attributes merged
over the resource attributes, secrets redacted, long values truncated, and the span's events
kept as ``tailtriage.events``: ``{event name: seconds after the span's start}`` (first
occurrence), so that clock-skew shifts move them with their span."""

from __future__ import annotations

import gc
import json
from array import array
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.model import FileProvenance, Metadata
from tailtriage.model import schema as S
from tailtriage.sources.redact import needs_redaction, redact_value

EVENTS_KEY: Final = "tailtriage.events"
#: warnings kept per file; the rest are only counted
MAX_WARNINGS: Final = 20

_HEX: Final = frozenset("0123456789abcdef")
_KINDS: Final = ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
_KIND_BY_INT: Final = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of acyclic objects (parsed JSON,
    column lists) are created: its repeated full scans would otherwise dominate ingest time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def norm_id(raw: object, width: int) -> str | None:
    """Lower-case hex id left-padded to ``width``; None for empty, all-zero or non-hex ids."""
    if not isinstance(raw, str):
        if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
            raw = format(raw, "x")
        else:
            return None
    s = raw.strip().lower()
    if not s or len(s) > width or not _HEX.issuperset(s):
        return None
    if len(s) < width:
        s = s.rjust(width, "0")
    return None if s.count("0") == width else s


def micros_span(
    raw_trace: object,
    raw_span: object,
    start_us: object,
    dur_us: object,
    names: tuple[str, str],
) -> tuple[str, str, float, float]:
    """Ids and (start, end) seconds of a span given in microseconds (Jaeger, Zipkin); raises
    ValueError/TypeError naming the format's fields (``names``: the id pair and the time pair,
    e.g. ("traceId/id", "timestamp/duration")) when they are bad."""
    trace_id, span_id = norm_id(raw_trace, 32), norm_id(raw_span, 16)
    if trace_id is None or span_id is None:
        raise ValueError(f"{names[0]} missing or not hex")
    if not isinstance(start_us, int | float) or not isinstance(dur_us, int | float):
        raise TypeError(f"{names[1]} must be numbers (µs)")
    if dur_us < 0:
        raise ValueError("negative duration")
    return trace_id, span_id, start_us / 1e6, (start_us + dur_us) / 1e6


def norm_kind(raw: object) -> str | None:
    """SERVER | CLIENT | INTERNAL | PRODUCER | CONSUMER, or None when unspecified/unknown."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _KIND_BY_INT.get(raw)
    if isinstance(raw, str):
        s = raw.strip().upper()
        if s.startswith("SPAN_KIND_"):
            s = s[10:]
        if s in _KINDS:
            return s
        if s.isdigit():
            return _KIND_BY_INT.get(int(s))
    return None


def norm_status(raw: object) -> str:
    """ok | error | unset from an OTLP code (int or name), ``Error``, ``true`` (error tag)..."""
    if isinstance(raw, bool):
        return "error" if raw else "unset"
    if isinstance(raw, int):
        return {1: "ok", 2: "error"}.get(raw, "unset")
    if isinstance(raw, str):
        s = raw.strip().upper()
        if s.startswith("STATUS_CODE_"):
            s = s[12:]
        if s in ("ERROR", "2", "TRUE"):
            return "error"
        if s in ("OK", "1"):
            return "ok"
    return "unset"


def clean_value(key: str, value: Any, limit: int, counts: dict[str, int]) -> Any:
    """The stored form of one attribute value: redacted at any depth (``redact.py``), and
    truncated past ``limit`` chars."""
    if isinstance(value, str) and len(value) > limit:
        counts["attributes.truncated"] = counts.get("attributes.truncated", 0) + 1
        value = value[:limit] + "…[truncated]"
    return redact_value(key, value)


def _dumps(attributes: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(attributes, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # integers beyond 64 bits (hostile input): the stdlib copes
        return json.dumps(attributes, default=str, ensure_ascii=False).encode()


def _nested(attributes: Mapping[str, Any]) -> bool:
    """Is a value (other than the span's own events map) a map or a list?"""
    return any(type(v) in (dict, list) and k != EVENTS_KEY for k, v in attributes.items())


#: span kinds and statuses by code (code 0 of kind: unspecified)
KIND_NAMES: Final = (None, "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
KIND_CODES: Final = {k: i for i, k in enumerate(KIND_NAMES)}
STATUS_NAMES: Final = ("unset", "ok", "error")
STATUS_CODES: Final = {k: i for i, k in enumerate(STATUS_NAMES)}


def _decode(codes: array[int], names: tuple[str | None, ...]) -> pa.Array:
    return pc.take(pa.array(names, type=pa.string()), pa.array(np.frombuffer(codes, dtype=np.int8)))


def _json_array(pieces: list[bytes | memoryview], lengths: array[int]) -> pa.ChunkedArray:
    """A string column straight from the serialised JSON, without copying it again (orjson
    output is valid UTF-8): ``pieces`` joined are the values back to back, ``lengths`` the
    byte length of each value.  A large piece (a batch's values from one orjson call) becomes
    a chunk of its own, zero-copy; runs of small pieces (one span each) are joined into one.

    Not copying matters beyond the copy itself: on a VM whose host reclaims free guest memory
    (page reporting), each fresh page a process first writes costs several microseconds, and
    the attributes are most of an ingest's bytes (bench/ingest.py)."""
    n = len(lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(lengths, dtype=np.int64), out=offsets[1:])
    sizes = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    # row where each piece starts (pieces hold whole values)
    first_row = np.searchsorted(offsets, np.cumsum(sizes) - sizes).tolist()
    chunks: list[pa.Array] = []
    group: list[bytes | memoryview] = []
    group_bytes, group_row = 0, 0

    def chunk(data: bytes | memoryview, a: int, b: int) -> None:
        off = offsets[a : b + 1] - offsets[a]
        wide = off[-1] >= 2**31
        buf = pa.py_buffer(data)
        arr = pa.Array.from_buffers(
            pa.large_string() if wide else pa.string(),
            b - a,
            [None, pa.py_buffer(off if wide else off.astype(np.int32)), buf],
        )
        chunks.append(arr.cast(pa.string()) if wide else arr)

    for i, piece in enumerate(pieces):
        if len(piece) >= _OWN_CHUNK_BYTES and len(piece) < 2**31:
            if group:
                chunk(b"".join(group), group_row, first_row[i])
                group, group_bytes = [], 0
            end = first_row[i + 1] if i + 1 < len(pieces) else n
            chunk(piece, first_row[i], end)
            continue
        if not group:
            group_row = first_row[i]
        group.append(piece)
        group_bytes += len(piece)
        if group_bytes >= _OWN_CHUNK_BYTES:
            end = first_row[i + 1] if i + 1 < len(pieces) else n
            chunk(b"".join(group), group_row, end)
            group, group_bytes = [], 0
    if group:
        chunk(b"".join(group), group_row, n)
    return pa.chunked_array(chunks, type=pa.string())


#: attribute runs are joined into strings of about this many bytes (column chunks)
_RUN_BYTES: Final = 4 << 20
#: pieces at least this large become a column chunk of their own (smaller ones are joined)
_OWN_CHUNK_BYTES: Final = 1 << 16


def _str_array(values: list[str | None]) -> pa.Array:
    """``pa.array(values, pa.string())`` built from one joined string when every value is
    ASCII (ids, span names, services: nearly always): the offsets come from the lengths, with
    no per-value conversion (which costs about 0.5 µs each: a second per million spans over
    the five string columns)."""
    n = len(values)
    nulls = values.count(None)
    if n == 0 or nulls == n:
        return pa.nulls(n, pa.string())
    filled: list[str] = [v or "" for v in values] if nulls else values  # type: ignore[assignment]
    try:
        joined = "".join(filled)
        data = joined.encode("utf-8")
    except (TypeError, UnicodeEncodeError):  # not all str, or lone surrogates
        return pa.array(values, type=pa.string())
    if len(data) != len(joined) or len(data) >= 2**31:  # not ASCII: byte lengths differ
        return pa.array(values, type=pa.string())
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, filled), dtype=np.int32, count=n), out=offsets[1:])
    validity = None
    if nulls:
        valid = np.fromiter((v is not None for v in values), dtype=bool, count=n)
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )


def _lower_hex(ids: list[str | None]) -> pa.Array:
    """The ids lower-cased; ids already lower-case hex (nearly always) are not copied again."""
    arr = _str_array(ids)
    if pc.all(pc.match_substring_regex(arr, "^[0-9a-f]*$")).as_py() is not False:
        return arr
    return pc.utf8_lower(arr)


@dataclass
class SpanColumns:
    """Column-wise accumulator of normalised spans from one file, plus its data-quality counts."""

    source: str
    fmt: str
    max_attribute_bytes: int = 64 * 1024
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: rows of spans exported without an end time (closed by ``close_open_ends``)
    open_ends: list[int] = field(default_factory=list)
    #: rows of the same file read elsewhere (another process), for the provenance count
    extra_rows: int = 0
    #: attribute runs not yet joined (``add_attribute_run``)
    _pending: list[bytes | memoryview] = field(default_factory=list, repr=False)
    _pending_bytes: int = field(default=0, repr=False)
    #: columns; ``kind`` and ``status`` as small codes and times as raw doubles (no Python
    #: object per value), ids as given (lower-cased column-wise in ``table``)
    cols: dict[str, Any] = field(
        default_factory=lambda: {
            **{name: [] for name in ("trace_id", "span_id", "parent_id", "name", "service")},
            "kind": array("b"),
            "status": array("b"),
            "start": array("d"),
            "end": array("d"),
            # the attributes JSON: byte strings holding one or many values back to back, and
            # each value's length (a batch reader adds many values as one string)
            "attributes": [],
            "attr_len": array("q"),
        }
    )

    def add(
        self,
        trace_id: str,
        span_id: str,
        parent_id: str | None,
        name: str,
        kind: str | None,
        service: str | None,
        start: float,
        end: float,
        status: str,
        attributes: Mapping[str, Any],
    ) -> None:
        blob = self.dump_attributes(attributes)  # first: it may raise, leaving no partial row
        c = self.cols
        c["trace_id"].append(trace_id)
        c["span_id"].append(span_id)
        c["parent_id"].append(parent_id)
        c["name"].append(name)
        c["kind"].append(KIND_CODES[kind])
        c["service"].append(service)
        c["start"].append(start)
        c["end"].append(end)
        c["status"].append(STATUS_CODES[status])
        self.add_blobs([blob])

    def add_attribute_run(self, pieces: list[bytes | memoryview], lengths: np.ndarray) -> None:
        """The attributes JSON of several spans (appended column by column by the caller):
        their values back to back in ``pieces`` joined, ``lengths`` bytes each.  Runs are
        joined a few MB at a time: each join becomes one chunk of the column (see
        ``_json_array``), and chunks of a few hundred spans slow every later scan of it."""
        self._pending += pieces
        self._pending_bytes += int(lengths.sum())
        self.cols["attr_len"].frombytes(np.ascontiguousarray(lengths, dtype=np.int64).tobytes())
        if self._pending_bytes >= _RUN_BYTES:
            self._flush()

    def add_blobs(self, blobs: list[bytes]) -> None:
        """The attributes JSON of spans, one value each (after any pending run)."""
        self._flush()
        self.cols["attributes"].extend(blobs)
        self.cols["attr_len"].extend(map(len, blobs))

    def _flush(self) -> None:
        if self._pending:
            self.cols["attributes"].append(b"".join(self._pending))
            self._pending, self._pending_bytes = [], 0

    def dump_attributes(self, attributes: Mapping[str, Any]) -> bytes:
        """The attributes as stored: JSON, secrets redacted, long values truncated.

        Checked on the serialised bytes first (one C-speed scan) because nearly every span
        has nothing to redact or truncate; only suspicious ones get the per-value pass."""
        blob = _dumps(attributes)
        if len(blob) > self.max_attribute_bytes or needs_redaction(
            attributes, blob, _nested(attributes)
        ):
            cleaned = {
                k: clean_value(k, v, self.max_attribute_bytes, self.counts)
                for k, v in attributes.items()
            }
            blob = _dumps(cleaned)
        return blob

    def skip(self, what: str, where: str, why: str) -> None:
        """Count a dropped record, keeping the first few reasons as warnings."""
        self.counts[what] = self.counts.get(what, 0) + 1
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(f"{self.source}:{where}: {why} (skipped)")

    def __len__(self) -> int:
        return len(self.cols["span_id"])

    def close_open_ends(self, rows: list[int]) -> None:
        """Spans exported without an end time: end them when their last child ends (else at
        their start), so the time their children cover is not lost; counted."""
        c = self.cols
        self.counts["spans.missing_end"] = self.counts.get("spans.missing_end", 0) + len(rows)
        child_end: dict[tuple[str, str], float] = {}
        for i, pid in enumerate(c["parent_id"]):
            if pid is not None:
                key = (c["trace_id"][i].lower(), pid.lower())
                child_end[key] = max(child_end.get(key, c["end"][i]), c["end"][i])
        # innermost first: a parent whose child also lacked an end sees the repaired child
        for i in sorted(rows, key=lambda r: -c["start"][r]):
            key = (c["trace_id"][i].lower(), c["span_id"][i].lower())
            end = max(c["end"][i], child_end.get(key, c["end"][i]))
            c["end"][i] = end
            pid = c["parent_id"][i]
            if pid is not None:
                pkey = (key[0], pid.lower())
                child_end[pkey] = max(child_end.get(pkey, end), end)

    def table(self) -> pa.Table:
        """The spans table, ids checked (bad ones dropped and counted)."""
        return self._valid_ids(self.raw_table())

    def raw_table(self) -> pa.Table:
        """The rows as accumulated, ids not yet checked."""
        self._flush()
        n = len(self)
        c = self.cols
        arrays = {
            "trace_id": _lower_hex(c["trace_id"]),
            "span_id": _lower_hex(c["span_id"]),
            "parent_id": _lower_hex(c["parent_id"]),
            "name": _str_array(c["name"]),
            "kind": _decode(c["kind"], KIND_NAMES),
            "service": _str_array(c["service"]),
            "start": pa.array(np.frombuffer(c["start"], dtype=np.float64)),
            "end": pa.array(np.frombuffer(c["end"], dtype=np.float64)),
            "status": _decode(c["status"], STATUS_NAMES),
            "attributes": _json_array(c["attributes"], c["attr_len"]),
            "source": pa.repeat(pa.scalar(self.source, pa.string()), n),
        }
        return pa.Table.from_arrays([arrays[f.name] for f in S.SPANS], schema=S.SPANS)

    def _valid_ids(self, table: pa.Table) -> pa.Table:
        """Drop (and count) spans whose ids are not hex or all zero; an all-zero parent id
        means no parent.  Column-wise: the fast paths only check the lengths."""
        parent = table["parent_id"]
        zero = pc.fill_null(pc.equal(parent, "0" * 16), False)
        if pc.any(zero).as_py():
            nulls = pa.nulls(table.num_rows, pa.string())
            table = table.set_column(2, "parent_id", pc.if_else(zero, nulls, parent))
        ok = pc.and_(
            pc.match_substring_regex(table["trace_id"], "^[0-9a-f]{32}$"),
            pc.match_substring_regex(table["span_id"], "^[0-9a-f]{16}$"),
        )
        ok = pc.and_(ok, pc.invert(pc.equal(table["trace_id"], "0" * 32)))
        ok = pc.and_(ok, pc.invert(pc.equal(table["span_id"], "0" * 16)))
        bad = table.num_rows - pc.sum(ok).as_py() if table.num_rows else 0
        if bad:
            self.counts["spans.invalid"] = self.counts.get("spans.invalid", 0) + bad
            self.warnings.append(f"{self.source}: {bad} spans with ids that are not hex (skipped)")
            table = table.filter(ok)
        return table

    def metadata(self) -> Metadata:
        skipped = sum(v for k, v in self.counts.items() if not k.startswith("attributes."))
        return Metadata(
            provenance=(
                FileProvenance(self.source, self.fmt, len(self) + self.extra_rows, skipped),
            ),
            quality=dict(self.counts),
            warnings=tuple(self.warnings),
        )
