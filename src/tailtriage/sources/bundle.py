"""Read an incident bundle: every file of a folder, format detected by content (design 3.3).

Unknown files, and known formats whose content is broken, are listed in
``Metadata.skipped_files`` with the reason and position; a bundle never fails because of one
bad file: :func:`read_file` is the file boundary, where any exception a reader lets escape
(a bug, a library error not translated yet) becomes a :class:`ParseError` naming the file.
Requests and stages are not derived here: the caller derives once over everything, because a
trace's spans may be spread over several files."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from tailtriage.errors import InputError, ParseError, TailtriageError
from tailtriage.model import Capture, Metadata, SkippedFile, concat, is_capture_file
from tailtriage.model.schema import TABLES as TABLE_NAMES
from tailtriage.sources._safety import STREAM, compression_of, decompressed, renamed
from tailtriage.sources.base import ReadOptions, detect

#: ``tailtriage collect`` describes its bundle in this top-level file (collect.manifest)
MANIFEST_NAME = "manifest.json"
#: the manifest's first key; a file of that name without it is telemetry like any other
MANIFEST_KEY = "tailtriage_manifest"


def _is_manifest(path: Path, folder: Path) -> bool:
    if path.parent != folder or path.name != MANIFEST_NAME:
        return False
    with open(path, "rb") as fh:
        head = fh.read(64)
    return head.lstrip(b"{ \t\r\n").startswith(f'"{MANIFEST_KEY}"'.encode())


#: captures of single files are merged this many at a time, so that a bundle of thousands of
#: tiny files holds a few merged tables rather than thousands of small ones (memory, issue 21)
MERGE_EVERY: Final = 256


def bundle_files(folder: Path) -> Iterator[Path]:
    """Regular files under ``folder``, recursively, in a stable order (hidden files and a
    ``tailtriage collect`` manifest left out)."""
    for p in sorted(folder.rglob("*")):
        hidden = any(part.startswith(".") for part in p.relative_to(folder).parts)
        if p.is_file() and not hidden and not _is_manifest(p, folder):
            yield p


def read_file(path: Path, options: ReadOptions) -> Capture:
    """One file through the source that recognises it; UnknownFormatError when none does.
    A gzip or zstd file is read as its decompressed content, and a pipe (``<(zcat f)``) as
    what it delivers, under its own name."""
    try:
        # a saved capture's first 8 bytes are DuckDB's header checksum, random per file: one
        # in 65,536 starts with gzip's magic; its own magic (bytes 8-12) decides first
        kind = (
            (None if is_capture_file(path) else compression_of(path)) if path.is_file() else STREAM
        )
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from None
    if kind is None:
        return _read_plain(path, options)
    with decompressed(path, kind) as plain:
        old, new = str(plain), str(path)
        try:
            return renamed(read_file(plain, options), old, new)
        except InputError as exc:
            moved = type(exc)(str(exc).replace(old, new))
            moved.path, moved.position = new, exc.position
            raise moved from None


def _read_plain(path: Path, options: ReadOptions) -> Capture:
    from tailtriage.errors import UnknownFormatError

    try:
        source = detect(path)
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from exc
    if source is None:
        raise UnknownFormatError(
            "unknown format (not OTLP, Jaeger, Zipkin, Prometheus, kubectl or a saved capture)",
            path=str(path),
        )
    try:
        return source.read(path, options)
    except TailtriageError:
        raise
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from exc
    except MemoryError as exc:
        raise InputError("file too large to read into memory", path=str(path)) from exc
    except RecursionError as exc:
        raise ParseError("nested too deeply to read", path=str(path)) from exc
    except Exception as exc:  # the file boundary: one reader's failure is this file's only
        why = " ".join(str(exc).split())[:200] or "no detail"
        raise ParseError(
            f"the {source.name} reader failed ({type(exc).__name__}: {why})", path=str(path)
        ) from exc


def _compact(capture: Capture) -> Capture:
    """``capture`` with each table in one chunk: a chunk per tiny file costs more memory in
    Arrow's per-array overhead than its rows."""
    tables = {name: capture.table(name).combine_chunks() for name in TABLE_NAMES}
    return capture.replace(**tables)


def read_bundle(folder: Path, options: ReadOptions) -> Capture:
    """Every readable file of ``folder`` concatenated; the others listed as skipped."""
    parts: list[Capture] = []
    skipped: list[SkippedFile] = []
    for path in bundle_files(folder):
        try:
            parts.append(read_file(path, options))
        except InputError as exc:
            reason = str(exc).removeprefix(f"{path}:").lstrip()
            skipped.append(SkippedFile(str(path), reason, exc.position))
            if options.progress is not None:
                with contextlib.suppress(OSError):
                    options.progress(path.stat().st_size)
        if len(parts) >= MERGE_EVERY:
            parts = [_compact(concat(parts))]
    cap = concat(parts)
    if skipped:
        cap = cap.replace(metadata=cap.metadata.merged(Metadata(skipped_files=tuple(skipped))))
    return cap
