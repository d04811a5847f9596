"""One request: what to send (RequestSpec), its flight (Flight), what was measured (RequestRecord)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from tailtriage.loadgen.clock import ClockAnchor
from tailtriage.loadgen.sse import interpret_body, interpret_stream

#: error classes (the ``error`` column of a failed request)
ERROR_CLASSES = ("connect", "http_status", "stream_protocol", "timeout", "cancelled")


@dataclass(frozen=True)
class RequestSpec:
    """What to send.  ``scheduled`` is the intended send time (seconds after the run's start;
    None in closed loop, where a request is due as soon as its user is free)."""

    index: int
    prompt: str
    prompt_tokens: int  # intended length (the server's usage count wins when present)
    max_tokens: int
    scheduled: float | None = None
    warmup: bool = False
    messages: tuple[dict[str, str], ...] | None = None  # from a JSONL file, chat only


@dataclass(frozen=True)
class Target:
    """Where and how to send."""

    host: str
    port: int
    path: str  # /v1/chat/completions or /v1/completions
    model: str
    stream: bool = True
    include_usage: bool = True
    continuous_usage: bool = False  # vLLM's per-chunk usage (not accepted by every server)
    ignore_eos: bool = True  # vLLM extension: generate exactly max_tokens
    api_key: str | None = field(default=None, repr=False)  # never written anywhere
    tls: bool = False  # https
    insecure: bool = False  # https without certificate verification
    ca_bundle: str | None = None  # PEM file of trusted CAs (default: the system's)

    @property
    def chat(self) -> bool:
        return self.path.rstrip("/").endswith("chat/completions")


def request_body(target: Target, spec: RequestSpec) -> bytes:
    body: dict[str, Any] = {"model": target.model, "max_tokens": spec.max_tokens}
    if target.chat:
        msgs = spec.messages or ({"role": "user", "content": spec.prompt},)
        body["messages"] = list(msgs)
    else:
        body["prompt"] = spec.prompt
    if target.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = spec.max_tokens
    if target.stream:
        body["stream"] = True
        if target.include_usage:
            opts: dict[str, bool] = {"include_usage": True}
            if target.continuous_usage:
                opts["continuous_usage_stats"] = True
            body["stream_options"] = opts
    return orjson.dumps(body)


def request_headers(target: Target, trace_id: str, span_id: str, request_id: str) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream" if target.stream else "application/json",
        "User-Agent": "tailtriage-bench",
        "traceparent": f"00-{trace_id}-{span_id}-01",
        "X-Request-ID": request_id,
    }
    if target.api_key:
        headers["Authorization"] = f"Bearer {target.api_key}"
    return headers


class IdSource:
    """Trace, span and request ids from a seeded generator (runs are reproducible)."""

    def __init__(self, seed: int, worker: int, prefix: str) -> None:
        # a stream of its own: other tailtriage id generators seeded alike must not collide
        self._rng = random.Random(f"tailtriage.loadgen.client/{seed}/{worker}")
        self.prefix = prefix

    def trace_id(self) -> str:
        return f"{self._rng.getrandbits(128) or 1:032x}"

    def span_id(self) -> str:
        return f"{self._rng.getrandbits(64) or 1:016x}"


class Flight:
    """An in-flight request: the Exchange its connection feeds (monotonic times)."""

    __slots__ = (
        "_ev_t",
        "_sbuf",
        "body",
        "deadline",
        "detail",
        "done",
        "error",
        "events",
        "finish_t",
        "first_byte_t",
        "headers",
        "idle_deadline",
        "on_end",
        "record",
        "request_id",
        "send_t",
        "span_id",
        "spec",
        "status",
        "stream",
        "trace_id",
    )

    def __init__(
        self,
        spec: RequestSpec,
        request_id: str,
        trace_id: str,
        span_id: str,
        stream: bool,
        done: asyncio.Future[None],
    ) -> None:
        self.spec = spec
        self.request_id = request_id
        self.trace_id = trace_id
        self.span_id = span_id
        self.stream = stream
        self.done = done
        self.send_t = 0.0
        self.first_byte_t: float | None = None
        self.finish_t: float | None = None
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.events: list[tuple[float, bytes]] = []
        self.body = bytearray()
        self.error: str | None = None
        self.detail: str | None = None
        self.deadline = float("inf")  # absolute monotonic, total timeout
        self.idle_deadline = float("inf")  # absolute monotonic, no byte since
        self._sbuf = b""
        self._ev_t = 0.0
        self.record: RequestRecord | None = None  # set once the flight is recorded
        #: called, inside the read callback, when the response ended well
        self.on_end: Callable[[Flight], None] | None = None

    def reset(self, done: asyncio.Future[None]) -> None:
        """Forget a failed attempt that never reached the server, to send again."""
        self.done = done
        self.error = self.detail = None
        self.finish_t = self.first_byte_t = None
        self.status = None
        self.events.clear()
        self.body.clear()
        self._sbuf = b""

    # -- Exchange ---------------------------------------------------------------------------
    def on_head(self, status: int, headers: dict[str, str], t: float) -> None:
        self.status = status
        self.headers = headers
        self.first_byte_t = t
        if status >= 400 or headers.get("content-type", "").startswith("application/json"):
            self.stream = False  # an error body, or a server that ignored "stream": JSON, not SSE

    def on_body(self, data: bytes, t: float) -> None:
        if not self.stream:
            self.body += data
            return
        if not self._sbuf:
            # fast path: the read holds exactly one whole event (the common case)
            i = data.find(b"\n\n")
            if i >= 0 and i == len(data) - 2 and b"\r" not in data:
                self.events.append((t, data[:-2]))
                return
            self._ev_t = t  # the event's first byte arrived in this read
        buf = self._sbuf + data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        start = 0
        while True:
            i = buf.find(b"\n\n", start)
            if i < 0:
                break
            self.events.append((self._ev_t, buf[start:i]))
            self._ev_t = t
            start = i + 2
        self._sbuf = buf[start:]

    def on_complete(self, t: float) -> None:
        self.finish_t = t
        if not self.done.done():
            self.done.set_result(None)
        if self.on_end is not None and self.error is None:
            self.on_end(self)

    def on_error(self, kind: str, detail: str, t: float) -> None:
        if self.error is None:
            self.error = kind
            self.detail = detail
            self.finish_t = t
        if not self.done.done():
            self.done.set_result(None)


@dataclass(frozen=True)
class RequestRecord:
    """Measured facts about one request, unix seconds (the JSON-lines row of a run)."""

    request_id: str
    trace_id: str
    span_id: str
    index: int
    worker: int
    model: str
    scheduled: float | None  # intended send time (open loop), unix s
    send: float
    first_byte: float | None
    first_token: float | None
    finish: float | None
    status: str  # ok | error | timeout | cancelled
    error: str | None
    error_detail: str | None
    http_status: int | None
    prompt_tokens: int | None
    output_tokens: int | None
    chunks: tuple[tuple[float, int], ...]
    warmup: bool = False
    coalesced: int = 0
    stream: bool = True

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.send

    @property
    def e2e(self) -> float | None:
        return None if self.finish is None else self.finish - self.send

    @property
    def gaps(self) -> list[float]:
        ts = [t for t, _ in self.chunks]
        return [b - a for a, b in itertools.pairwise(ts)]

    @property
    def tpot(self) -> float | None:
        if self.first_token is None or not self.chunks or not self.output_tokens:
            return None
        if self.output_tokens < 2:
            return None
        return (self.chunks[-1][0] - self.first_token) / (self.output_tokens - 1)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        d = dict(d)
        d["chunks"] = tuple((float(t), int(n)) for t, n in d.get("chunks", ()))
        return cls(**d)


def finish_record(
    flight: Flight, anchor: ClockAnchor, worker: int, model: str, start: float
) -> RequestRecord:
    """Interpret a finished flight (parsing happens here, after every stamp was taken)."""
    a = anchor.to_unix
    error, detail = flight.error, flight.detail
    chunks: tuple[tuple[float, int], ...] = ()
    prompt_toks = out_toks = None
    coalesced = 0
    if error is None and flight.status is not None and flight.status >= 400:
        error, detail = "http_status", f"HTTP {flight.status}: {bytes(flight.body[:120])!r}"
    if flight.stream and flight.status is not None and flight.status < 400:
        res = interpret_stream(flight.events)
        chunks = tuple((a(t), n) for t, n in res.chunks)
        prompt_toks, out_toks, coalesced = res.prompt_tokens, res.output_tokens, res.coalesced
        if error is None and res.error is not None:
            error, detail = "stream_protocol", res.error
    elif error is None and flight.finish_t is not None:
        prompt_toks, out_toks, _, perr = interpret_body(bytes(flight.body))
        if perr is not None:
            error, detail = "stream_protocol", perr
        else:
            chunks = ((a(flight.finish_t), out_toks or 0),)
    status = "ok"
    if error is not None:
        status = {"timeout": "timeout", "cancelled": "cancelled"}.get(error, "error")
    sched = flight.spec.scheduled
    return RequestRecord(
        request_id=flight.request_id,
        trace_id=flight.trace_id,
        span_id=flight.span_id,
        index=flight.spec.index,
        worker=worker,
        model=model,
        scheduled=None if sched is None else a(start + sched),
        send=a(flight.send_t),
        first_byte=None if flight.first_byte_t is None else a(flight.first_byte_t),
        first_token=chunks[0][0] if chunks else None,
        finish=None if flight.finish_t is None else a(flight.finish_t),
        status=status,
        error=error,
        error_detail=detail,
        http_status=flight.status,
        prompt_tokens=prompt_toks if prompt_toks is not None else flight.spec.prompt_tokens,
        output_tokens=out_toks,
        chunks=chunks,
        warmup=flight.spec.warmup,
        coalesced=coalesced,
        stream=flight.stream,
    )
