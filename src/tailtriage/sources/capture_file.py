"""A saved capture (the DuckDB file ``tailtriage ingest -o`` writes), detected by DuckDB's
file magic, so a bundle can mix saved captures with raw telemetry."""

from __future__ import annotations

from pathlib import Path

from tailtriage.model import Capture
from tailtriage.sources.base import ReadOptions, register


class CaptureFileSource:
    name = "capture"

    def sniff(self, head: bytes, path: Path) -> bool:
        return head[8:12] == b"DUCK"

    def read(self, path: Path, options: ReadOptions) -> Capture:
        return Capture.load(path)


register(CaptureFileSource())
