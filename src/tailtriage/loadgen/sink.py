"""Where records go while the run goes: JSON lines, flushed often, so a crash or Ctrl-C keeps
everything measured up to the last flush (half a second)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from tailtriage.loadgen.request import RequestRecord


class RecordSink:
    """Appends records to ``path`` (one JSON object per line); ``None`` keeps them in memory."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.records: list[RequestRecord] = []
        self._fh: IO[bytes] | None = open(path, "ab") if path is not None else None  # noqa: SIM115
        self._buf: list[bytes] = []

    def write(self, rec: RequestRecord) -> None:
        self.records.append(rec)
        if self._fh is not None:
            self._buf.append(rec.to_json())

    def flush(self) -> None:
        if self._fh is not None and self._buf:
            self._fh.write(b"\n".join(self._buf) + b"\n")
            self._fh.flush()
            self._buf.clear()

    def close(self) -> None:
        self.flush()
        if self._fh is not None:
            self._fh.close()
            self._fh = None
