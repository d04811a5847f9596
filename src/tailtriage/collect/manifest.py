"""The ``manifest.json`` of a collected bundle: what was asked, what came back, what failed
and why, and which values were redacted (design 3.3).

Each live source reports one :class:`SourceOutcome`; a source that failed outright has no
files and one ``errors`` line.  The bundle reader ignores this file (``sources.bundle``), so a
collected bundle triages exactly like the same files gathered by hand."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

from tailtriage.sources.bundle import MANIFEST_KEY, MANIFEST_NAME

#: bumped when a field changes meaning
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class SourceOutcome:
    """One live source's part of the bundle."""

    source: str  # kubernetes | prometheus | traces
    target: str  # where it was read, credential-free
    asked: tuple[str, ...] = ()  # what was requested (resources, queries, searches)
    files: tuple[str, ...] = ()  # bundle-relative paths written
    records: int = 0  # objects, series or traces written
    errors: tuple[str, ...] = ()  # one line each: what failed and why
    notes: tuple[str, ...] = ()  # skipped on purpose (absent CRD, store limits)
    redactions: tuple[str, ...] = ()  # what was redacted, never the value

    @property
    def ok(self) -> bool:
        """Something came back (a partial result counts), or the source answered that it
        has nothing for the window."""
        return bool(self.files) or not self.errors


@dataclass(frozen=True)
class Manifest:
    """The whole collection."""

    window: tuple[float, float]
    namespace: str | None
    sources: tuple[SourceOutcome, ...] = field(default_factory=tuple)
    tool: str = "tailtriage collect"

    def to_json(self) -> bytes:
        doc = {MANIFEST_KEY: MANIFEST_VERSION, **asdict(self)}
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"

    def write(self, folder: Path) -> Path:
        path = folder / MANIFEST_NAME
        path.write_bytes(self.to_json())
        return path
