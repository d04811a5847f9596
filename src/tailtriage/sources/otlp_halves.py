"""Large OTLP/JSON-lines files read by two processes, one half each, and the memory-mapped
line iterator both halves use.

The per-span Python work is the ingest's bottleneck (design 7: 1 M spans on 2 cores in < 10 s),
so :func:`read_two_halves` reads the first half of a file in this process while a fresh
interpreter reads the second half into an Arrow file; the two tables, counts and warnings
(with whole-file line numbers) are joined into exactly what the one-pass read gives.  Anything
unusual falls back to that one pass.  The line reader is passed in (``otlp_json.read_lines``),
so this module knows nothing of OTLP's JSON."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import mmap
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Final

import orjson
import pyarrow as pa

from tailtriage.model import Capture
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.spans import MAX_WARNINGS, SpanColumns, no_gc

#: a line of a JSON-lines file: a slice of the mapped file, or read bytes
Line = bytes | memoryview
#: reads JSON lines into span columns (``otlp_json.read_lines``)
LineReader = Callable[[Iterable[Line], Path, SpanColumns, ReadOptions], None]


def mapped_lines(fh: IO[bytes], start: int = 0, stop: int | None = None) -> Iterator[Line] | None:
    """The lines of ``fh`` from byte ``start`` (a line start) up to ``stop`` (a line boundary;
    None: the end), as slices of a read-only mapping of the file: no copy and no read call
    per line (iterating a file of 1.4 MB lines costs about five times more).  None for a file
    that cannot be mapped (a pipe, an empty file): the caller iterates it as usual."""
    try:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    end = len(mapped) if stop is None else min(stop, len(mapped))

    def lines() -> Iterator[Line]:
        view = memoryview(mapped)
        pos = start
        while pos < end:
            nl = mapped.find(b"\n", pos, end)
            nxt = end if nl < 0 else nl + 1
            yield view[pos:nxt]
            pos = nxt

    return lines()


#: JSON-lines files at least this large are read by two processes (one half each) when two
#: cores are usable: the per-span Python work is the ingest's bottleneck (design 7: 1 M spans
#: on 2 cores in < 10 s).  Smaller files are not worth the child's start (~0.5 s of imports);
#: on a machine whose other work keeps both cores busy the split gains little.  Environment
#: ``TAILTRIAGE_INGEST_PROCESSES=1`` turns it off.
PARALLEL_MIN_BYTES: Final = 128 * 1024 * 1024
#: the part read here: a little over half, as the child first starts an interpreter
PARENT_SHARE: Final = 0.53


def worth_two_processes(path: Path) -> bool:
    if os.environ.get("TAILTRIAGE_INGEST_PROCESSES", "").strip() == "1":
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores >= 2 and path.stat().st_size >= PARALLEL_MIN_BYTES


def progress_after(options: ReadOptions, reported: int) -> ReadOptions:
    """``options`` whose progress callback swallows the first ``reported`` bytes (already
    reported by an abandoned two-process read)."""
    report = options.progress
    if report is None or reported <= 0:
        return options
    left = [reported]

    def progress(n: int) -> None:
        skip = min(left[0], n)
        left[0] -= skip
        if n > skip:
            report(n - skip)

    return dataclasses.replace(options, progress=progress)


def read_two_halves(
    fh: IO[bytes], path: Path, options: ReadOptions, read_lines: LineReader, name: str
) -> tuple[Capture | None, int]:
    """Read a JSON-lines file's first half here while a child process reads the second half
    (starting at a line boundary) into an Arrow file; join the two in file order, with the
    counts and warnings (line numbers of the whole file) the one-pass read gives.

    Rare cases are left to that one pass: spans without an end time (their repair spans the
    whole file), ids that are not hex (one warning for the file), no valid line at all, or a
    failed child: then returns (None, bytes reported to ``options.progress`` so far) and the
    caller reads the whole file in one exact pass."""
    size = os.fstat(fh.fileno()).st_size
    fh.seek(int(size * PARENT_SHARE))
    fh.readline()
    split = fh.tell()
    fh.seek(0)
    if split >= size:
        return None, 0
    fd, out = tempfile.mkstemp(prefix="tailtriage-ingest-", suffix=".arrow", dir=_spool(size))
    os.close(fd)
    code = "from tailtriage.sources.otlp_json import part_main; part_main()"
    args = [str(path), str(split), str(options.max_attribute_bytes), out]
    # a fresh interpreter (not fork: DuckDB/Arrow threads; not multiprocessing: it would
    # re-import the caller's main script)
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
    except OSError:
        _remove(out)
        return None, 0
    reported = [0]
    report = options.progress

    def progress(n: int) -> None:
        reported[0] += n
        if report is not None:
            report(n)

    try:
        cols = SpanColumns(str(path), name, options.max_attribute_bytes)
        head_options = dataclasses.replace(options, progress=progress)
        head_lines = mapped_lines(fh, 0, split) or _head(fh, split)
        read_lines(head_lines, path, cols, head_options)
        good = cols.counts.pop("otlp.good_lines", 0)
        head = None if cols.open_ends else _checked_table(cols)
        if head is None:
            return None, reported[0]
        reply, _ = child.communicate()
        if child.returncode != 0 or not reply.startswith(b"ok "):
            return None, reported[0]
        part = orjson.loads(reply[3:])
        if good + part["good"] == 0:
            return None, reported[0]
        with pa.memory_map(out) as src:
            rest = pa.ipc.open_file(src).read_all()
        if options.progress is not None:
            options.progress(part["bytes"])
        for k, v in part["counts"].items():
            cols.counts[k] = cols.counts.get(k, 0) + v
        cols.warnings = (cols.warnings + part["warnings"])[:MAX_WARNINGS]
        cols.extra_rows = rest.num_rows
        spans = pa.concat_tables([head, rest])
        return Capture(spans=spans, metadata=cols.metadata()), size
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        _remove(out)


def _spool(size: int) -> str:
    """Where the child writes its table: shared memory when it has room for it (the table
    is smaller than the JSON), else the temporary folder."""
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > size and os.access("/dev/shm", os.W_OK):
            return "/dev/shm"
    except (AttributeError, OSError):  # not Linux
        pass
    return tempfile.gettempdir()


def _remove(path: str) -> None:
    # the mapped pages stay valid (POSIX) until the table is dropped; a mapped file cannot be
    # removed on Windows: it is left to the temporary folder's cleaner
    with contextlib.suppress(OSError):
        os.unlink(path)


def _head(fh: IO[bytes], limit: int) -> Iterator[bytes]:
    """The lines of ``fh`` up to byte ``limit`` (a line boundary)."""
    done = 0
    for line in fh:
        yield line
        done += len(line)
        if done >= limit:
            return


def _checked_table(cols: SpanColumns) -> pa.Table | None:
    """``cols.table()``, or None when building it counted ids that are not hex (its one
    warning is for the whole file: the one-pass read must give it)."""
    before = (dict(cols.counts), len(cols.warnings))
    table = cols.table()
    return table if (cols.counts, len(cols.warnings)) == before else None


def part_main(read_lines: LineReader, name: str) -> None:
    """Child process of :func:`read_two_halves`: read PATH's lines from byte START on and
    write the span table to OUT (Arrow IPC); print ``ok`` and a JSON object (good lines,
    their bytes, counts, warnings with whole-file line numbers) or ``unusual``.  Exits
    without tearing the interpreter down (freeing every span object): the parent waits."""
    try:
        _part(read_lines, name)
        sys.stdout.flush()
    except BaseException:
        os._exit(1)
    os._exit(0)


def _part(read_lines: LineReader, name: str) -> None:
    path, start, limit, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    cols = SpanColumns(path, name, limit)
    done = [0]
    options = ReadOptions(
        max_attribute_bytes=limit, progress=lambda n: done.__setitem__(0, done[0] + n)
    )
    with open(path, "rb") as fh, no_gc():
        fh.seek(start)
        lines = mapped_lines(fh, start) or fh
        read_lines(lines, Path(path), cols, options)
    good = cols.counts.pop("otlp.good_lines", 0)
    table = None if cols.open_ends else _checked_table(cols)
    if table is None:
        sys.stdout.write("unusual\n")
        return
    with pa.OSFile(out, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    warnings = _renumbered(cols.warnings, path, start)
    if warnings is None:
        sys.stdout.write("unusual\n")
        return
    reply = {"good": good, "bytes": done[0], "counts": cols.counts, "warnings": warnings}
    sys.stdout.buffer.write(b"ok " + orjson.dumps(reply) + b"\n")  # UTF-8 whatever the locale


def _renumbered(warnings: list[str], path: str, start: int) -> list[str] | None:
    """Warnings of a part read from byte ``start`` (numbered from its first line) with the
    whole file's line numbers; None if one does not name a line."""
    if not warnings:
        return []
    with open(path, "rb") as fh:  # lines before the part (only counted when needed)
        before, left = 0, start
        while left > 0:
            chunk = fh.read(min(left, 1 << 24))
            if not chunk:
                break
            before += chunk.count(b"\n")
            left -= len(chunk)
    prefix = f"{path}:line "
    out = []
    for w in warnings:
        rest = w[len(prefix) :] if w.startswith(prefix) else ""
        digits = rest[: len(rest) - len(rest.lstrip("0123456789"))]
        if not digits:
            return None
        out.append(f"{prefix}{int(digits) + before}{rest[len(digits) :]}")
    return out
