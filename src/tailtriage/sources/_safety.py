"""Defences every reader shares against hostile or damaged input (issue 21).

* :func:`load_json`: one JSON document, a UTF-8 byte-order mark dropped, invalid UTF-8 replaced
  by U+FFFD and *counted* (``input.invalid_utf8``) with the real line and column of the first
  bad byte, and a broken document a :class:`ParseError` at its real line and column;
* :func:`json_documents`: a file that is one JSON document or JSON lines, each document with
  its position (``line 12``), a broken line a :class:`ParseError` naming it;
* :func:`dumps_json`: JSON of attribute values that never fails (integers beyond 64 bits,
  which orjson refuses, are kept as their decimal text);
* :func:`with_quality`: a reader's Capture with such counts and warnings merged in;
* :func:`decompressed`: gzip and zstd inputs (the Collector's compressions) read
  transparently, as a temporary decompressed copy, by :func:`~tailtriage.sources.bundle.read_file`;
* :func:`network_timeout`: the connect and read timeout of every backend (Prometheus,
  ClickHouse), 30 s unless ``TAILTRIAGE_TIMEOUT`` or ``--timeout`` (:func:`using_timeout`)
  says otherwise, so a backend that accepts and never answers is one BackendError line.

Readers call these instead of ``orjson.loads`` / ``orjson.dumps`` directly::

    decoded = load_json(path.read_bytes(), path)
    ...
    return with_quality(Capture(spans=...), decoded.quality, decoded.warnings)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import pyarrow.compute as pc

from tailtriage.errors import ConfigError, ParseError
from tailtriage.model import Capture, Metadata

BOM: Final = b"\xef\xbb\xbf"
#: seconds a backend may take to accept a connection, and then to send each reply
DEFAULT_TIMEOUT_S: Final = 30.0
#: environment variable overriding DEFAULT_TIMEOUT_S
TIMEOUT_ENV: Final = "TAILTRIAGE_TIMEOUT"
#: the replacement character as UTF-8 (what invalid bytes become)
_REPLACEMENT: Final = "\ufffd"
#: integers JSON readers downstream (orjson, DuckDB BIGINT) can hold
_INT64: Final = (-(2**63), 2**63 - 1)


def text_position(data: bytes, offset: int) -> str:
    """``line L, column C`` (both from 1, columns in bytes) of byte ``offset`` of ``data``."""
    offset = max(0, min(offset, len(data)))
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def first_invalid_utf8(data: bytes) -> int | None:
    """Byte offset of the first invalid UTF-8 sequence, or None when ``data`` is valid."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


@dataclass(frozen=True)
class Decoded:
    """A decoded JSON document and what was repaired to decode it."""

    doc: Any
    quality: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def load_json(data: bytes, path: str | Path) -> Decoded:
    """Decode one JSON document (see the module docstring); ParseError with the real line and
    column when it is broken."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    try:
        return Decoded(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        bad = first_invalid_utf8(data)
        if bad is None:
            raise ParseError(
                f"invalid JSON: {exc.msg}",
                path=str(path),
                position=f"line {exc.lineno}, column {exc.colno}",
            ) from None
    text = data.decode("utf-8", errors="replace")
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ParseError(
            f"invalid JSON: {exc.msg}",
            path=str(path),
            position=f"line {exc.lineno}, column {exc.colno}",
        ) from None
    n = text.count(_REPLACEMENT) - data.count(_REPLACEMENT.encode())
    where = text_position(data, bad)
    return Decoded(
        doc,
        {"input.invalid_utf8": n},
        (f"{path}:{where}: {n} invalid UTF-8 sequences replaced by U+FFFD",),
    )


def _bounded(value: Any) -> Any:
    """``value`` with integers beyond 64 bits as decimal text, at any depth."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _INT64[0] <= value <= _INT64[1] else str(value)
    if isinstance(value, dict):
        return {str(k): _bounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded(v) for v in value]
    return value


def dumps_json(value: Any, sort_keys: bool = False) -> bytes:
    """JSON of ``value``; never fails on integers beyond 64 bits or non-string keys."""
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        return json.dumps(
            _bounded(value), default=str, ensure_ascii=False, sort_keys=sort_keys
        ).encode("utf-8", errors="surrogateescape")


def with_quality(
    capture: Capture, quality: Mapping[str, int], warnings: tuple[str, ...] = ()
) -> Capture:
    """``capture`` with ``quality`` counts added and ``warnings`` appended (no-op when empty)."""
    counts = {k: v for k, v in quality.items() if v}
    if not counts and not warnings:
        return capture
    return capture.replace(
        metadata=capture.metadata.merged(Metadata(quality=counts, warnings=warnings))
    )


def _timeout_value(raw: str | float, what: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{what}: {raw!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{what}: the timeout must be a positive number of seconds")
    return value


_timeout: ContextVar[float | None] = ContextVar("network_timeout", default=None)


def network_timeout() -> float:
    """The connect and read timeout for backends, in seconds."""
    given = _timeout.get()
    if given is not None:
        return given
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    return _timeout_value(raw, TIMEOUT_ENV) if raw else DEFAULT_TIMEOUT_S


@contextlib.contextmanager
def using_timeout(seconds: float | None) -> Iterator[None]:
    """Within the block, :func:`network_timeout` is ``seconds`` (None: unchanged)."""
    if seconds is None:
        yield
        return
    token = _timeout.set(_timeout_value(seconds, "--timeout"))
    try:
        yield
    finally:
        _timeout.reset(token)


# -- compressed inputs ---------------------------------------------------------------------
#: magic bytes of the compressions the OpenTelemetry Collector's file exporter writes
GZIP_MAGIC: Final = b"\x1f\x8b"
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
#: a decompressed input larger than this is refused (a decompression bomb, not telemetry)
MAX_DECOMPRESSED_BYTES: Final = 64 << 30
_CHUNK: Final = 1 << 20
#: the "compression" of a pipe or device: read once, as it comes, into a regular file
STREAM: Final = "stream"


def compression_of(path: Path) -> str | None:
    """``gzip``, ``zstd`` or None, from the file's first bytes (never its name)."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def _open_compressed(path: Path, kind: str) -> io.BufferedIOBase:
    if kind == STREAM:
        return open(path, "rb")  # closed by the caller's with
    if kind == "gzip":
        return gzip.open(path, "rb")
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd
    return zstd.open(path, "rb")


@contextlib.contextmanager
def decompressed(path: Path, kind: str) -> Iterator[Path]:
    """The decompressed content of ``path`` (or what a pipe delivers, for ``kind`` STREAM)
    as a temporary file (same name without the compression suffix), removed afterwards;
    ParseError naming ``path`` when it is corrupt."""
    with tempfile.TemporaryDirectory(prefix="tailtriage-") as folder:
        name = path.name
        for suffix in (".gz", ".gzip", ".zst", ".zstd"):
            name = name.removesuffix(suffix)
        out = Path(folder) / (name or "input")
        total = 0
        try:
            with _open_compressed(path, kind) as src, open(out, "wb") as dst:
                while chunk := src.read(_CHUNK):
                    total += len(chunk)
                    if total > MAX_DECOMPRESSED_BYTES:
                        raise ParseError(
                            f"decompresses to more than {MAX_DECOMPRESSED_BYTES >> 30} GiB",
                            path=str(path),
                        )
                    dst.write(chunk)
        except (OSError, EOFError, ValueError) as exc:
            # a truncated stream keeps what was decompressed: the reader counts the cut line
            if total == 0:
                raise ParseError(f"corrupt {kind} data ({exc})", path=str(path)) from None
        yield out


def renamed(capture: Capture, old: str, new: str) -> Capture:
    """``capture`` with the file name ``old`` replaced by ``new`` wherever it is recorded."""
    tables = {}
    for name in ("spans", "series", "events"):
        table = capture.table(name)
        if table.num_rows:
            index = table.schema.get_field_index("source")
            fixed = pc.replace_substring(table["source"], old, new)
            tables[name] = table.set_column(index, "source", fixed)
    meta = capture.metadata
    meta = dataclasses.replace(
        meta,
        provenance=tuple(
            dataclasses.replace(p, path=p.path.replace(old, new)) for p in meta.provenance
        ),
        warnings=tuple(w.replace(old, new) for w in meta.warnings),
    )
    return capture.replace(metadata=meta, **tables)


def json_documents(raw: bytes, where: str, whole: str = "") -> Iterator[tuple[str, Any]]:
    """(position, document) of ``raw``: the whole file as one document at position ``whole``,
    else one per non-empty JSON line (``line N``).  A file without a line break that is not
    JSON, or a broken line, is a ParseError naming ``where`` (and the line)."""
    try:
        yield whole, orjson.loads(raw)
        return
    except orjson.JSONDecodeError as whole_error:
        if b"\n" not in raw.strip():
            raise ParseError(f"invalid JSON: {whole_error}", where) from whole_error
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if line.strip():
            try:
                yield f"line {number}", orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ParseError(f"invalid JSON: {exc}", where, f"line {number}") from exc
