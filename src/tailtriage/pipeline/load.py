"""Load a Capture from whatever PATH the user gave: a saved capture (DuckDB file), a bundle
folder, a single file, or (later) a live Prometheus or a ClickHouse table.

(Minimal first version: saved captures only.  The sources issue extends it.)"""

from __future__ import annotations

from pathlib import Path

from tailtriage.errors import InputError
from tailtriage.model import Capture, is_capture_file


def load_capture(path: str | Path) -> Capture:
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", path=str(p))
    if p.is_file() and is_capture_file(p):
        return Capture.load(p)
    raise InputError("cannot read this input yet", path=str(p))
