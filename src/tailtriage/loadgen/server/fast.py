"""A minimal, fast OpenAI-compatible SSE server with known token times.

Tokens leave on a global step grid (like an engine's decode steps): a request received at
``r`` gets its first token at the first step at or after ``r + ttft`` and one token per step
after that.  One timer per step writes to every active stream with plain ``transport.write``,
so the server costs little CPU and its send times are what the client should measure.  Each
token's real send time (``time.time()`` just before the write) can be logged as JSON lines
(``send_log``), which is what the timing-accuracy checks compare against; each record also
names its connection (``conn``, a serial number), so a closed-loop user's turnaround (its last
token's send to its next request's ``recv``) can be read from the log.  ``otlp_out`` writes
each finished request's server spans in vLLM's conventions (``server.otlp``), as the ``sim``
engine does: no queue (every request is served at once), prefill from receipt to the first
token's send, decode to the last.

Plain-HTTP connections are raw non-blocking sockets read with ``recvmsg``, so a request's
``recv`` time is the kernel's receive stamp of its bytes (``SO_TIMESTAMPNS``), not the moment
this process got round to parsing it (logged as ``parsed``): on a busy machine the server
process may wait milliseconds for a CPU, and that wait belongs to the request's real TTFT.
The first token is due at the first step at or after ``recv + ttft``.  Streams are written
oldest first in every step.  With ``ssl`` (a server ``SSLContext``) connections go through
asyncio's TLS transport instead, and ``recv`` is the parse time.

``fault`` makes every request misbehave in one way, for the fault tests:
``status:<code>``, ``reset:<after_tokens>``, ``stall:<after_tokens>``,
``truncate:<after_tokens>`` (the body ends cleanly mid-answer), ``malformed``,
``slow_headers:<seconds>``, ``no_done`` (no ``[DONE]``, which is still a complete answer when
the last chunk has a finish_reason), ``close_early``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl as ssl_mod
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from tailtriage.loadgen.clock import ANC_BUFSIZE, enable_kernel_timestamps, kernel_arrival
from tailtriage.loadgen.server.otlp import OtlpSpanWriter, ServedRequest

#: the send log and the spans reach the disk this often, so readers see them within a second
_FLUSH_EVERY_S = 0.5

_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


@dataclass
class _Stream:
    proto: _Conn
    request_id: str
    traceparent: str
    path: str
    recv: float  # unix: kernel arrival of the request's last bytes (parse time over TLS)
    parsed: float  # unix: when this process parsed the request
    first_step: int
    n_tokens: int
    include_usage: bool
    prompt_tokens: int
    token_chunk: bytes
    last_chunk: bytes
    sends: list[float] = field(default_factory=list)
    sent: int = 0


class FastSSEServer:
    """Serve on ``host:port`` (port 0 picks a free one; see ``.port`` after ``start``)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ttft: float = 0.08,
        itl: float = 0.02,
        model: str = "sim",
        send_log: Path | None = None,
        otlp_out: Path | None = None,
        fault: str | None = None,
        clock: Callable[[], float] = time.time,
        ssl: ssl_mod.SSLContext | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.ttft, self.itl, self.model = ttft, itl, model
        self.fault = fault
        self.clock = clock
        self._log: IO[bytes] | None = open(send_log, "ab") if send_log else None  # noqa: SIM115
        self._spans = OtlpSpanWriter(otlp_out) if otlp_out else None
        self.ssl = ssl
        self._new: dict[int, list[_Stream]] = {}  # step -> streams whose first token is due
        self._active: list[_Stream] = []  # streams past their first token, oldest first
        self._server: asyncio.AbstractServer | None = None
        self._lsock: socket.socket | None = None
        self._t0 = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._next_step = 0
        self._last_flush = 0.0
        self.requests = 0
        self.conns: set[_Conn] = set()
        self.accepted = 0  # connections so far (each one's serial number)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._t0 = loop.time()
        if self.ssl is not None:
            self._server = await loop.create_server(
                lambda: _Conn(self), self.host, self.port, ssl=self.ssl, backlog=4096
            )
            self.port = self._server.sockets[0].getsockname()[1]
            return
        infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        family, _, _, _, addr = infos[0]
        lsock = socket.create_server(addr, family=family, backlog=4096)
        lsock.setblocking(False)
        self._lsock = lsock
        self.port = lsock.getsockname()[1]
        loop.add_reader(lsock.fileno(), self._accept)

    def _accept(self) -> None:
        assert self._lsock is not None
        for _ in range(256):
            try:
                sock, _addr = self._lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, a connection reset before accept, ...
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            enable_kernel_timestamps(sock)
            conn = _Conn(self)
            conn.attach(_SockTransport(sock, self._loop, conn))

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._lsock is not None:
            self._loop.remove_reader(self._lsock.fileno())
            self._lsock.close()
            self._lsock = None
        for c in list(self.conns):
            c.transport.abort()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._spans is not None:
            self._spans.close()
            self._spans = None

    # -- stepping ---------------------------------------------------------------------------
    def _step_of(self, loop_t: float) -> int:
        """Index of the first step at or after loop time ``loop_t``."""
        k = (loop_t - self._t0) / self.itl
        ik = int(k)
        return ik if ik == k else ik + 1

    def _schedule(self, s: _Stream, step: int) -> None:
        if self._timer is not None:
            step = max(step, self._next_step)  # never behind the step already armed
        self._new.setdefault(step, []).append(s)
        if self._timer is None or step < self._next_step:
            self._arm_at(step)

    def _arm_at(self, step: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._next_step = step
        self._timer = self._loop.call_at(self._t0 + step * self.itl, self._on_step, step)

    def _on_step(self, step: int) -> None:
        self._timer = None
        # oldest first: a stream keeps its place as newer ones join behind it, so its gaps do
        # not grow with the arrival rate
        due = self._active
        new = self._new.pop(step, None)
        if new:
            due = due + new
        keep: list[_Stream] = []
        for s in due:
            if s.proto.closed:
                continue
            self._emit(s)
            if s.sent < s.n_tokens and not s.proto.closed:
                keep.append(s)
        self._active = keep
        if keep:
            self._arm_at(step + 1)
        elif self._new:
            self._arm_at(min(self._new))

    def _emit(self, s: _Stream) -> None:
        last = s.sent == s.n_tokens - 1
        f = self.fault or ""
        if f.startswith(("reset:", "stall:", "truncate:")) and s.sent >= int(f.split(":")[1]):
            if f.startswith("reset:"):
                s.proto.transport.abort()
            elif f.startswith("truncate:"):  # a clean end of the body, mid-answer
                s.proto.transport.write(b"0\r\n\r\n")
                s.proto.busy = False
            s.sent = s.n_tokens  # stop sending (a stall keeps the connection open)
            return
        framed = s.last_chunk if last else s.token_chunk
        if f == "malformed" and s.sent == 1:
            framed = _chunk(b"data: {not json\n\n")
        if last:  # the last token and the end of the body in one write (one packet)
            framed += self._tail(s)
        t = self.clock()
        s.proto.transport.write(framed)
        s.sends.append(t)
        s.sent += 1
        if last:
            self._finish(s)

    def _tail(self, s: _Stream) -> bytes:
        """The usage and [DONE] events and the end of the chunked body."""
        tail = b""
        if s.include_usage:
            usage = {
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.n_tokens,
                "total_tokens": s.prompt_tokens + s.n_tokens,
            }
            tail += b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n"
        if self.fault != "no_done":
            tail += b"data: [DONE]\n\n"
        return _chunk(tail) + b"0\r\n\r\n"

    def _finish(self, s: _Stream) -> None:
        if self.fault == "close_early":
            s.proto.transport.close()
        self._write_log(s)
        self._add_spans(s.request_id, s.traceparent, s.path, s.recv, s.sends[0], s.sends[-1],
                        s.prompt_tokens, s.n_tokens)  # fmt: skip
        self._flush_outputs()
        s.proto.busy = False

    def _write_log(self, s: _Stream) -> None:
        if self._log is not None:
            rec = {
                "request_id": s.request_id,
                "traceparent": s.traceparent,
                "recv": s.recv,
                "parsed": s.parsed,
                "sends": s.sends,
                "conn": s.proto.serial,
            }
            self._log.write(orjson.dumps(rec) + b"\n")

    def _add_spans(
        self, rid: str, traceparent: str, path: str, recv: float, first: float, finish: float,
        prompt_tokens: int, tokens: int,
    ) -> None:  # fmt: skip
        if self._spans is not None:
            self._spans.add(ServedRequest(
                rid, traceparent or None, path, self.model, recv, recv, recv, first, finish,
                prompt_tokens, tokens, tokens,
            ))  # fmt: skip

    def _flush_outputs(self) -> None:
        if self._log is None and self._spans is None:
            return
        now = self._loop.time()
        if now - self._last_flush <= _FLUSH_EVERY_S:
            return
        self._last_flush = now
        if self._log is not None:
            self._log.flush()
        if self._spans is not None:
            self._spans.flush()

    # -- requests ---------------------------------------------------------------------------
    def handle(
        self,
        conn: _Conn,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        arrival: float | None = None,
    ) -> None:
        parsed = self.clock()
        recv = parsed if arrival is None else min(arrival, parsed)
        self.requests += 1
        if method == "GET" and path in ("/health", "/v1/models"):
            obj: Any = (
                {}
                if path == "/health"
                else {"object": "list", "data": [{"id": self.model, "object": "model"}]}
            )
            conn.respond(200, orjson.dumps(obj))
            return
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
            conn.respond(404, b'{"error":{"message":"not found"}}')
            return
        f = self.fault or ""
        if f.startswith("status:"):
            code = int(f.split(":")[1])
            conn.respond(code, b'{"error":{"message":"injected fault","code":%d}}' % code)
            return
        try:
            req = orjson.loads(body)
            n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
            conn.respond(400, b'{"error":{"message":"bad request body"}}')
            return
        chat = path.endswith("chat/completions")
        prompt = req.get("messages") if chat else req.get("prompt")
        ptoks = max(1, len(orjson.dumps(prompt)) // 6)
        rid = headers.get("x-request-id", f"req-{self.requests}")
        if not req.get("stream"):
            self._unary(conn, rid, headers.get("traceparent", ""), path, n, ptoks, recv)
            return
        tok, lastc = _chunk_payloads(rid, self.model, chat)
        opts = req.get("stream_options") or {}
        s = _Stream(
            conn,
            rid,
            headers.get("traceparent", ""),
            path,
            recv,
            parsed,
            0,
            max(1, n),
            bool(opts.get("include_usage")),
            ptoks,
            tok,
            lastc,
        )
        conn.busy = True
        delay = float(f.split(":")[1]) if f.startswith("slow_headers:") else 0.0
        if delay:
            self._loop.call_later(delay, self._begin, s)
        else:
            self._begin(s)

    def _begin(self, s: _Stream) -> None:
        if s.proto.closed:
            return
        s.proto.transport.write(_SSE_HEAD)
        now = self._loop.time()
        # the request's arrival on the loop's clock: a late parse does not move its tokens
        arrived = now - max(0.0, self.clock() - s.recv)
        self._schedule(s, self._step_of(max(arrived + self.ttft, now)))

    def _unary(
        self, conn: _Conn, rid: str, traceparent: str, path: str, n: int, ptoks: int, recv: float
    ) -> None:
        chat = path.endswith("chat/completions")
        text = " tok" * n
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        obj = {
            "id": rid,
            "object": "chat.completion" if chat else "text_completion",
            "model": self.model,
            "choices": [choice],
            "usage": {"prompt_tokens": ptoks, "completion_tokens": n, "total_tokens": ptoks + n},
        }
        conn.busy = True
        delay = self.ttft + (n - 1) * self.itl

        def done() -> None:
            if not conn.closed:
                sent = self.clock()
                conn.respond(200, orjson.dumps(obj))
                self._add_spans(rid, traceparent, path, recv, sent, sent, ptoks, n)
                self._flush_outputs()
            conn.busy = False

        self._loop.call_later(delay, done)


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _chunk_payloads(rid: str, model: str, chat: bool) -> tuple[bytes, bytes]:
    def one(finish: str | None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["delta"] = {"content": " tok"}
        else:
            choice["text"] = " tok"
        obj = {
            "id": rid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "model": model,
            "choices": [choice],
        }
        return _chunk(b"data: " + orjson.dumps(obj) + b"\n\n")

    return one(None), one("length")


class _Conn(asyncio.Protocol):
    """HTTP/1.1 server side of one connection (one request at a time, keep-alive)."""

    def __init__(self, server: FastSSEServer) -> None:
        self.server = server
        server.accepted += 1
        self.serial = server.accepted
        self.buf = b""
        self.closed = False
        self.busy = False
        self.transport: asyncio.Transport | _SockTransport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.attach(transport)

    def attach(self, transport: asyncio.Transport | _SockTransport) -> None:
        self.transport = transport
        self.server.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.conns.discard(self)

    def data_received(self, data: bytes, arrival: float | None = None) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1").split("\r\n")
            try:
                method, path, _ = head[0].split(" ", 2)
            except ValueError:
                self.transport.close()
                return
            headers = {}
            for line in head[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            n = int(headers.get("content-length", "0") or 0)
            if len(self.buf) < end + 4 + n:
                return
            body = self.buf[end + 4 : end + 4 + n]
            self.buf = self.buf[end + 4 + n :]
            self.server.handle(self, method, path.split("?", 1)[0], headers, body, arrival)

    def respond(self, status: int, body: bytes) -> None:
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            429: "Too Many Requests",
            500: "Internal Server Error",
            503: "Service Unavailable",
        }.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.transport.write(head + body)


class _SockTransport:
    """The few transport calls ``_Conn`` makes, on a raw socket read with ``recvmsg`` so that
    every read carries the kernel's receive stamp."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, conn: _Conn) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.loop = loop
        self.conn = conn
        self.clock = conn.server.clock
        self._out = bytearray()
        self._closing = False
        self._closed = False
        loop.add_reader(self.fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(65536, ANC_BUFSIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._lost()
            return
        if not data:
            self._lost()
            return
        now = time.time()
        clock_now = now if self.clock is time.time else self.clock()
        self.conn.data_received(data, kernel_arrival(anc, clock_now, now))

    def write(self, data: bytes) -> None:
        if self._closed or self._closing:
            return
        if self._out:
            self._out += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._lost()
            return
        if sent < len(data):
            self._out += data[sent:]
            self.loop.add_writer(self.fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            sent = self.sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._lost()
            return
        del self._out[:sent]
        if not self._out:
            self.loop.remove_writer(self.fd)
            if self._closing:
                self._lost()

    def close(self) -> None:
        """Close once what was written has left (like asyncio's ``Transport.close``)."""
        if not self._out:
            self._lost()
        else:
            self._closing = True

    def abort(self) -> None:
        """Close now with a TCP reset."""
        if not self._closed:
            with contextlib.suppress(OSError):
                self.sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
        self._lost()

    def is_closing(self) -> bool:
        return self._closed or self._closing

    def _lost(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.loop.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        self.sock.close()
        self.conn.connection_lost(None)
