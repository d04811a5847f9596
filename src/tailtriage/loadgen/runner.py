"""One event loop's share of a load run.

The hot path is callback-driven (see ``http.py``); the coroutines here only dispatch requests,
wait for them to finish and write their records.  Self-checks run beside the load: an
event-loop lag monitor, send lateness against the schedule (coordinated omission), the
client's own CPU use, and reads that delivered several chunks at once."""

from __future__ import annotations

import asyncio
import gc
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tailtriage.loadgen.clock import ClockAnchor
from tailtriage.loadgen.http import Connection, build_request, client_tls_context
from tailtriage.loadgen.pool import ConnectionPool
from tailtriage.loadgen.request import (
    Flight,
    IdSource,
    RequestRecord,
    RequestSpec,
    Target,
    finish_record,
    request_body,
    request_headers,
)
from tailtriage.loadgen.sink import RecordSink
from tailtriage.loadgen.sse import response_text

_TICK = 0.05  # timeout sweep and lag-probe period (s)
#: parsing of finished closed-loop requests per loop pass (s): the loop polls the sockets
#: between passes, so a burst of finished requests never holds up the reads behind it
_SETTLE_SLICE = 0.001


@dataclass(frozen=True)
class Timeouts:
    connect: float = 10.0
    first_byte: float = 60.0  # request sent -> response headers
    idle: float = 30.0  # no byte for this long in the middle of a response
    total: float = 600.0


@dataclass(frozen=True)
class Plan:
    """The requests one worker sends: a finite or endless iterator of specs, plus how."""

    closed_loop_users: int = 0  # > 0: closed loop with that many users; else open loop
    duration: float | None = None  # stop dispatching this long after start (warm-up included)
    max_requests: int | None = None  # stop after this many (warm-up included)
    max_in_flight: int = 100_000  # cap in open loop; beyond it sends are late (and counted)
    drain: float = 30.0  # after dispatch stops, wait this long for in-flight requests
    late_threshold: float = 0.010  # a send later than this against schedule counts as late


@dataclass
class Progress:
    """A live snapshot (one per worker; the CLI sums them)."""

    worker: int = 0
    sent: int = 0
    done: int = 0
    errors: int = 0
    in_flight: int = 0
    tokens: int = 0
    ttft: list[float] = field(default_factory=list)  # recent, seconds
    itl: list[float] = field(default_factory=list)
    finished: bool = False


@dataclass(frozen=True)
class WorkerStats:
    worker: int
    start_unix: float
    wall: float
    cpu: float  # process CPU seconds during the run
    sent: int
    completed: int
    late_sends: int
    lateness_p99: float
    lateness_max: float
    loop_lag_p99: float
    loop_lag_max: float
    coalesced_chunks: int
    connections_opened: int
    cancelled: int
    chunks: int = 0  # content chunks received


class Worker:
    def __init__(
        self,
        target: Target,
        specs: Iterator[RequestSpec],
        plan: Plan,
        sink: RecordSink,
        *,
        worker: int = 0,
        seed: int = 0,
        timeouts: Timeouts | None = None,
        warmup: float = 0.0,
        on_progress: Callable[[Progress], None] | None = None,
        progress_every: float = 0.5,
        on_answer: Callable[[RequestRecord, str], None] | None = None,
    ) -> None:
        self.target = target
        self.specs = specs
        self.plan = plan
        self.sink = sink
        self.worker = worker
        self.ids = IdSource(seed, worker, prefix=f"tt-{seed:x}-{worker}")
        self.timeouts = timeouts or Timeouts()
        self.warmup = warmup  # requests sent this soon after the start are warm-up
        self.on_progress = on_progress
        self.progress_every = progress_every
        #: called with each finished request's record and the answer text it carried
        #: (evaluation runs; parsing the text costs time a load run does not spend)
        self.on_answer = on_answer
        self.inflight: dict[Flight, Connection | None] = {}
        self.progress = Progress(worker=worker)
        self._lateness: list[float] = []
        self._lag: list[float] = []
        self._coalesced = 0
        self._chunks = 0
        self._cancelled = 0
        self._stop = False
        self._issued = 0  # closed loop: requests started by all users
        self._unsettled: set[Flight] = set()  # finished flights not yet recorded
        self._to_settle: deque[Flight] = deque()  # closed loop: their order of finishing
        self._settling = False  # a _settle_some pass is scheduled

    async def run(self) -> WorkerStats:
        # Full collections of a big heap pause the loop for tens of ms in the middle of a
        # stream; the records are long-lived, so freeze what exists and collect rarely.
        gc_threshold = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(max(gc_threshold[0], 50_000), gc_threshold[1], max(gc_threshold[2], 100))
        try:
            return await self._run()
        finally:
            gc.set_threshold(*gc_threshold)
            gc.unfreeze()

    async def _run(self) -> WorkerStats:
        loop = asyncio.get_running_loop()
        self.anchor = ClockAnchor.now()
        self.start = time.monotonic()
        cpu0 = time.process_time()
        tls = (
            client_tls_context(self.target.insecure, self.target.ca_bundle)
            if self.target.tls
            else None
        )
        self.pool = ConnectionPool(self.target.host, self.target.port, loop, tls)
        sweeper = loop.create_task(self._sweep())
        tasks: set[asyncio.Task[Any]] = set()
        try:
            if self.plan.closed_loop_users > 0:
                await self._closed_loop(tasks)
            else:
                await self._open_loop(tasks)
            if tasks:
                await asyncio.wait(tasks, timeout=self.plan.drain)
        finally:
            self._stop = True
            for flight, conn in list(self.inflight.items()):
                if conn is not None:
                    conn.abort("cancelled", "run ended before the response finished")
                else:
                    flight.on_error("cancelled", "run ended", time.monotonic())
            if tasks:
                # let the request coroutines write the records of what was just cancelled
                await asyncio.wait(tasks, timeout=1.0)
            for flight in list(self._unsettled):
                self._settle(flight)
            sweeper.cancel()
            self.pool.close()
            self.progress.finished = True
            self._emit_progress()
            self.sink.flush()
        wall = time.monotonic() - self.start
        late = np.asarray(self._lateness) if self._lateness else np.zeros(1)
        lag = np.asarray(self._lag) if self._lag else np.zeros(1)
        return WorkerStats(
            worker=self.worker,
            start_unix=self.anchor.to_unix(self.start),
            wall=wall,
            cpu=time.process_time() - cpu0,
            sent=self.progress.sent,
            completed=self.progress.done,
            late_sends=int((late > self.plan.late_threshold).sum()) if self._lateness else 0,
            lateness_p99=float(np.percentile(late, 99)),
            lateness_max=float(late.max()),
            loop_lag_p99=float(np.percentile(lag, 99)),
            loop_lag_max=float(lag.max()),
            coalesced_chunks=self._coalesced,
            chunks=self._chunks,
            connections_opened=self.pool.opened,
            cancelled=self._cancelled,
        )

    # -- dispatch ---------------------------------------------------------------------------
    def _more(self, sent: int) -> bool:
        p = self.plan
        if self._stop or (p.max_requests is not None and sent >= p.max_requests):
            return False
        return p.duration is None or time.monotonic() - self.start < p.duration

    async def _open_loop(self, tasks: set[asyncio.Task[Any]]) -> None:
        loop = asyncio.get_running_loop()
        for spec in self.specs:
            if not self._more(self.progress.sent):
                return
            due = self.start + (spec.scheduled or 0.0)
            if self.plan.duration is not None and due - self.start >= self.plan.duration:
                return
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            while len(self.inflight) >= self.plan.max_in_flight and not self._stop:
                await asyncio.sleep(0.001)
            if not self._more(self.progress.sent):
                return
            self.progress.sent += 1
            task = loop.create_task(self._one(spec))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _closed_loop(self, tasks: set[asyncio.Task[Any]]) -> None:
        loop = asyncio.get_running_loop()

        async def user() -> None:
            failures = 0
            chained: list[tuple[Flight, bytes]] = []
            # the user's next request, built while the current one streams: users finish in
            # waves (see _defer_settle), and every microsecond a read callback spends per
            # finished request delays the next requests of the same wave
            ahead: list[tuple[RequestSpec, Flight, bytes]] = []

            def chain(done: Flight) -> None:
                # The response ended: send this user's next request now, from the read
                # callback, on the connection just freed.  Waiting for the loop to resume the
                # user's coroutine costs the rest of the loop's batch (milliseconds at
                # hundreds of streams), and the stream would sit idle that long.
                if chained or not self._more(self._issued):
                    return
                conn = self.pool.take_idle()
                if conn is None:
                    return
                if ahead:
                    spec, flight, raw = ahead.pop()
                    self._rewarm(flight, spec)
                else:
                    nxt = next(self.specs, None)
                    if nxt is None:
                        self.pool.release(conn)
                        return
                    flight, raw = self._prepare(nxt, chain)
                self._issued += 1
                self.progress.sent += 1
                self._start(flight, raw, conn)
                chained.append((flight, raw))

            while True:
                if chained:
                    flight, raw = chained.pop()
                    if not ahead and self._more(self._issued):
                        nxt = next(self.specs, None)
                        if nxt is not None:
                            ahead.append((nxt, *self._prepare(nxt, chain)))
                    flight = await self._land(flight, raw, reused=True)
                else:
                    if not self._more(self._issued):
                        return
                    spec = next(self.specs, None)
                    if spec is None:
                        return
                    self._issued += 1
                    self.progress.sent += 1
                    flight = await self._fly(spec, chain)
                # parse and record after the next request is on the wire: a user's think
                # time is zero, and the turnaround should not include the client's parsing
                self._defer_settle(flight)
                # an endpoint that refuses connections must not turn a user into a busy loop
                failures = failures + 1 if flight.error == "connect" else 0
                if failures:
                    await asyncio.sleep(min(1.0, 0.01 * 2**failures))

        users = [loop.create_task(user()) for _ in range(self.plan.closed_loop_users)]
        for t in users:
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        # until the users stop on their own or the duration ends; the caller then drains
        await asyncio.wait(users, timeout=self.plan.duration)

    async def _one(self, spec: RequestSpec) -> RequestRecord:
        flight = await self._fly(spec)
        self._unsettled.add(flight)
        return self._settle(flight)

    def _defer_settle(self, flight: Flight) -> None:
        """Record ``flight`` soon, in slices between socket polls.

        Closed-loop users finish in waves: all users start together and the server's step grid
        keeps them in phase, so hundreds of responses end within a few steps.  Parsing them all
        in one go (about 60 us each) held the loop for 10-15 ms, while the next wave of
        responses waited unread and their users' next requests went out that much later."""
        self._unsettled.add(flight)
        self._to_settle.append(flight)
        if not self._settling:
            self._settling = True
            asyncio.get_running_loop().call_soon(self._settle_some)

    def _settle_some(self) -> None:
        q = self._to_settle
        end = time.perf_counter() + _SETTLE_SLICE
        while q:
            self._settle(q.popleft())
            if time.perf_counter() >= end:
                break
        if q:  # the rest after the loop's next poll of the sockets
            asyncio.get_running_loop().call_soon(self._settle_some)
        else:
            self._settling = False

    def _settle(self, flight: Flight) -> RequestRecord:
        """Interpret and record a finished flight (once)."""
        if flight not in self._unsettled:
            assert flight.record is not None
            return flight.record
        self._unsettled.discard(flight)
        rec = finish_record(flight, self.anchor, self.worker, self.target.model, self.start)
        flight.record = rec
        self._record(rec)
        if self.on_answer is not None:
            self.on_answer(rec, response_text(flight.events, bytes(flight.body), flight.stream))
        return rec

    def _rewarm(self, flight: Flight, spec: RequestSpec) -> None:
        """A flight built ahead is warm-up by its send time, not by when it was built."""
        warm = spec.warmup or time.monotonic() - self.start < self.warmup
        if flight.spec.warmup != warm:
            flight.spec = replace(spec, warmup=warm)

    def _prepare(
        self, spec: RequestSpec, on_end: Callable[[Flight], None] | None = None
    ) -> tuple[Flight, bytes]:
        """A new flight for ``spec`` and the request bytes to send."""
        loop = asyncio.get_running_loop()
        if not spec.warmup and time.monotonic() - self.start < self.warmup:
            spec = replace(spec, warmup=True)
        trace_id, span_id = self.ids.trace_id(), self.ids.span_id()
        request_id = f"{self.ids.prefix}-{spec.index}"
        flight = Flight(
            spec, request_id, trace_id, span_id, self.target.stream, loop.create_future()
        )
        flight.on_end = on_end
        body = request_body(self.target, spec)
        head = request_headers(self.target, trace_id, span_id, request_id)
        raw = build_request(
            "POST", self.target.host, self.target.port, self.target.path, head, body
        )
        return flight, raw

    async def _fly(
        self, spec: RequestSpec, on_end: Callable[[Flight], None] | None = None
    ) -> Flight:
        """Send one request and wait until its response ended (or failed)."""
        flight, raw = self._prepare(spec, on_end)
        self.inflight[flight] = None
        flight.send_t = time.monotonic()
        reused = await self._send(flight, raw)
        return await self._land(flight, raw, reused)

    async def _land(self, flight: Flight, raw: bytes, reused: bool) -> Flight:
        """Wait for a sent flight to end; resend once when a reused connection was dead."""
        spec = flight.spec
        if spec.scheduled is not None:
            self._lateness.append(flight.send_t - (self.start + spec.scheduled))
        await flight.done
        if reused and flight.error == "connect" and flight.first_byte_t is None:
            # the server closed an idle keep-alive connection just as it was reused: nothing
            # reached the application, so send once more on a fresh connection
            flight.reset(asyncio.get_running_loop().create_future())
            self.inflight[flight] = None
            await self._send(flight, raw, fresh=True)
            await flight.done
        self.inflight.pop(flight, None)
        return flight

    async def _send(self, flight: Flight, raw: bytes, fresh: bool = False) -> bool:
        """Connect (or reuse) and send; True when an idle connection was reused."""
        try:
            conn, new = await self.pool.acquire(self.timeouts.connect, fresh=fresh)
        except (OSError, TimeoutError) as exc:
            kind = "timeout" if isinstance(exc, TimeoutError) else "connect"
            why = str(exc) or (
                f"no connection within {self.timeouts.connect:g} s (TCP connect"
                + (" and TLS handshake)" if self.target.tls else ")")
            )
            flight.on_error(kind, f"connect failed: {why}"[:200], time.monotonic())
            return False
        if flight.error is not None:  # cancelled while connecting
            conn.close()
            return False
        self._start(flight, raw, conn)
        return not new

    def _start(self, flight: Flight, raw: bytes, conn: Connection) -> None:
        self.inflight[flight] = conn
        now = time.monotonic()
        flight.send_t = now
        flight.deadline = now + self.timeouts.total
        conn.start(flight, raw)

    def _record(self, rec: RequestRecord) -> None:
        self.sink.write(rec)
        p = self.progress
        p.done += 1
        self._coalesced += rec.coalesced
        self._chunks += len(rec.chunks)
        if rec.status == "cancelled":
            self._cancelled += 1
        if rec.status != "ok":
            p.errors += 1
            return
        p.tokens += rec.output_tokens or 0
        if rec.ttft is not None:
            p.ttft.append(rec.ttft)
        p.itl.extend(rec.gaps)

    # -- self-checks and timeouts ------------------------------------------------------------
    async def _sweep(self) -> None:
        last_progress = time.monotonic()
        expected = time.monotonic() + _TICK
        while True:
            await asyncio.sleep(_TICK)
            now = time.monotonic()
            self._lag.append(max(0.0, now - expected))
            expected = now + _TICK
            self._expire(now)
            if now - last_progress >= self.progress_every:
                last_progress = now
                self._emit_progress()
                self.sink.flush()

    def _expire(self, now: float) -> None:
        t = self.timeouts
        for flight, conn in list(self.inflight.items()):
            if conn is None:
                continue
            if now > flight.deadline:
                conn.abort("timeout", f"no complete response within {t.total:g} s")
            elif flight.first_byte_t is None:
                if now - flight.send_t > t.first_byte:
                    conn.abort("timeout", f"no response headers within {t.first_byte:g} s")
            else:
                last = flight.events[-1][0] if flight.events else flight.first_byte_t
                if now - last > t.idle:
                    conn.abort("timeout", f"stream stalled: no event for {t.idle:g} s")

    def _emit_progress(self) -> None:
        self.progress.in_flight = len(self.inflight)
        if self.on_progress is not None:
            self.on_progress(self.progress)
        # keep only a recent window for the live percentiles
        self.progress.ttft = self.progress.ttft[-2000:]
        self.progress.itl = self.progress.itl[-20000:]
