"""JSON-lines files are read as slices of the mapped file; what cannot be mapped (a pipe) is
read line by line, with the same result."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from support import DATA
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.otlp_json import OtlpJsonSource


def _lines_file() -> bytes:
    """A real OTLP/JSON trace as JSON lines, with a blank line and a truncated last line."""
    import orjson

    doc = orjson.loads((DATA / "otlp" / "trace.json").read_bytes())
    line = orjson.dumps(doc)
    return line + b"\n\n" + line + b"\r\n" + line[: len(line) // 2]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_a_pipe_reads_as_the_mapped_file(tmp_path: Path) -> None:
    data = _lines_file()
    regular = tmp_path / "trace.jsonl"
    regular.write_bytes(data)
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as out:
            out.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    piped = OtlpJsonSource().read(fifo, ReadOptions())
    writer.join()
    mapped = OtlpJsonSource().read(regular, ReadOptions())
    assert mapped.spans.num_rows == 2 * (mapped.spans.num_rows // 2) > 0
    assert piped.spans.drop_columns(["source"]).equals(mapped.spans.drop_columns(["source"]))
    assert piped.metadata.quality == mapped.metadata.quality == {"otlp.bad_lines": 1}
