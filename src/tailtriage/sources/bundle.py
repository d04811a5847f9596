"""Read an incident bundle: every file of a folder, format detected by content (design 3.3).

Unknown files, and known formats whose content is broken, are listed in
``Metadata.skipped_files`` with the reason; a bundle never fails because of one bad file.
Requests and stages are not derived here: the caller derives once over everything, because a
trace's spans may be spread over several files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tailtriage.errors import InputError
from tailtriage.model import Capture, Metadata, SkippedFile, concat
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


def bundle_files(folder: Path) -> Iterator[Path]:
    """Regular files under ``folder``, recursively, in a stable order (hidden files and a
    ``tailtriage collect`` manifest left out)."""
    for p in sorted(folder.rglob("*")):
        hidden = any(part.startswith(".") for part in p.relative_to(folder).parts)
        if p.is_file() and not hidden and not _is_manifest(p, folder):
            yield p


def read_file(path: Path, options: ReadOptions) -> Capture:
    """One file through the source that recognises it; UnknownFormatError when none does."""
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
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror or exc})", path=str(path)) from exc
    except MemoryError as exc:
        raise InputError("file too large to read into memory", path=str(path)) from exc


def read_bundle(folder: Path, options: ReadOptions) -> Capture:
    """Every readable file of ``folder`` concatenated; the others listed as skipped."""
    parts: list[Capture] = []
    skipped: list[SkippedFile] = []
    for path in bundle_files(folder):
        try:
            parts.append(read_file(path, options))
        except InputError as exc:
            skipped.append(SkippedFile(str(path), str(exc).removeprefix(f"{path}:").lstrip()))
            if options.progress is not None:
                options.progress(path.stat().st_size)
    cap = concat(parts)
    if skipped:
        cap = cap.replace(metadata=cap.metadata.merged(Metadata(skipped_files=tuple(skipped))))
    return cap
