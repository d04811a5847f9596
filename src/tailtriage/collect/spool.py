"""A bounded queue of span batches and the one thread that writes them to a capture file.

The receiver hands each decoded export request to :meth:`SpanSpool.offer`, which accepts it
only while the spans queued but not yet written stay under ``max_queued_spans``: memory is
bounded by that number (plus one request body), and a refused offer becomes back-pressure on
the client (HTTP 429).  A batch counts as queued until the sink has written it, so a slow disk
throttles the clients instead of growing the queue.

:meth:`SpanSpool.close` stops taking offers, writes everything queued and closes the sink:
every batch that ``offer`` accepted is in the file afterwards.

The sink is a small Protocol; :class:`DuckDBSpanSink` appends to the ``spans`` table of a
capture file that is valid (``Capture.load`` reads it) from the first batch on."""

from __future__ import annotations

import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb
import pyarrow as pa

from tailtriage.derive.derive import derive
from tailtriage.derive.rules import RuleSet
from tailtriage.errors import InputError
from tailtriage.model import Capture, Metadata

#: spans the writer inserts in one statement at most (larger inserts only add latency)
WRITE_BATCH_SPANS = 50_000


class SpanSink(Protocol):
    """Where the spool's writer thread puts span batches."""

    def write(self, spans: pa.Table) -> None:
        """Persist one batch (rows of the ``spans`` schema)."""
        ...

    def close(self) -> None:
        """Everything written is durable after this returns."""
        ...


class DuckDBSpanSink:
    """Appends spans to the ``spans`` table of a tailtriage capture file."""

    def __init__(self, path: Path, metadata: Metadata) -> None:
        self.path = path
        try:
            Capture(metadata=metadata).save(path)
            self._con = duckdb.connect(str(path))
        except (duckdb.Error, OSError) as exc:
            reason = " ".join(str(exc).split())[:200]
            raise InputError(f"cannot write the capture ({reason})", str(path)) from None

    def write(self, spans: pa.Table) -> None:
        self._con.register("tailtriage_batch", spans)
        try:
            self._con.execute("INSERT INTO spans SELECT * FROM tailtriage_batch")
        finally:
            self._con.unregister("tailtriage_batch")

    def close(self) -> None:
        self._con.execute("CHECKPOINT")
        self._con.close()


@dataclass(frozen=True)
class SpoolStats:
    """Counts of one spool, at one instant."""

    accepted_spans: int
    refused_offers: int
    written_spans: int
    queued_spans: int
    peak_queued_spans: int


class SpanSpool:
    """Bounded queue in front of a :class:`SpanSink`, drained by one writer thread."""

    def __init__(self, sink: SpanSink, max_queued_spans: int) -> None:
        if max_queued_spans < 1:
            raise ValueError("max_queued_spans must be at least 1")
        self._sink = sink
        self._max = max_queued_spans
        self._queue: deque[pa.Table] = deque()
        self._cond = threading.Condition()
        self._queued = self._peak = self._accepted = self._refused = self._written = 0
        self._closing = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="tailtriage-spool", daemon=True)
        self._thread.start()

    def offer(self, spans: pa.Table) -> bool:
        """Queue ``spans`` unless that would pass the bound; False means "retry later".

        A batch larger than the bound is taken when the queue is empty, so that no request
        is refused forever (its size is bounded by the receiver's body limit)."""
        n = spans.num_rows
        with self._cond:
            if self._closing or self._error is not None:
                self._refused += 1
                return False
            if self._queued and self._queued + n > self._max:
                self._refused += 1
                return False
            self._queue.append(spans)
            self._queued += n
            self._accepted += n
            self._peak = max(self._peak, self._queued)
            self._cond.notify()
        return True

    def has_room(self) -> bool:
        """Whether an offer could be taken now (checked before decoding a request body)."""
        with self._cond:
            return not self._closing and (self._queued == 0 or self._queued < self._max)

    def stats(self) -> SpoolStats:
        with self._cond:
            return SpoolStats(
                self._accepted, self._refused, self._written, self._queued, self._peak
            )

    def _take(self) -> list[pa.Table] | None:
        with self._cond:
            while not self._queue and not self._closing:
                self._cond.wait()
            if not self._queue:
                return None
            batch: list[pa.Table] = []
            rows = 0
            while self._queue and (
                not batch or rows + self._queue[0].num_rows <= WRITE_BATCH_SPANS
            ):
                rows += self._queue[0].num_rows
                batch.append(self._queue.popleft())
            return batch

    def _run(self) -> None:
        try:
            while (batch := self._take()) is not None:
                self._sink.write(pa.concat_tables(batch))
                rows = sum(t.num_rows for t in batch)
                with self._cond:
                    self._queued -= rows
                    self._written += rows
        except BaseException as exc:  # surfaced by close(); offers are refused meanwhile
            with self._cond:
                self._error = exc

    def close(self) -> SpoolStats:
        """Refuse new offers, write everything accepted, close the sink."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self._sink.close()
        if self._error is not None:
            raise InputError(f"writing spans failed: {self._error}") from self._error
        return self.stats()


def finalize_capture(
    path: Path, rules: RuleSet | None = None, extra: Metadata | None = None
) -> Capture:
    """Derive requests and stages from a spooled capture file and rewrite it in place.

    Written to a temporary file first and renamed over the spool, so a failure here leaves
    the spooled spans intact."""
    capture = Capture.load(path)
    if extra is not None:
        capture = capture.replace(metadata=capture.metadata.merged(extra))
    derived = derive(capture, rules)
    tmp = path.with_name(path.name + ".tmp")
    derived.save(tmp)
    os.replace(tmp, path)
    return derived
