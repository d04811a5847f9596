"""A small HTTP/1.1 client connection that stamps every read.

Why not aiohttp here: its stream reader hands bytes to the caller only after the event loop
has resumed the reading coroutine, so under load every timestamp includes the loop's backlog
(the flaw the peers share).  This connection reads with ``recvmsg`` straight from the
selector callback, takes the kernel's arrival stamp of the bytes, and frames SSE events
without parsing them; JSON is parsed only after the request has finished.  It speaks just
what an OpenAI-compatible endpoint needs: one request at a time per connection, keep-alive,
``Content-Length``, chunked and read-until-close bodies.

``https``: TLS runs on the same path through an ``ssl.SSLObject`` over memory BIOs: the socket
is still read with ``recvmsg`` (so TLS records keep their kernel arrival stamps), the
ciphertext is fed to the SSL object and the plaintext to the same parser."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
import time
from collections.abc import Callable
from typing import Protocol

from tailtriage.errors import StreamProtocolError
from tailtriage.loadgen.clock import (
    ANC_BUFSIZE,
    clock_pair,
    enable_kernel_timestamps,
    kernel_arrival,
)

_READ_SIZE = 256 * 1024
_MIN_READ = 64
_MAX_HEAD = 64 * 1024
_MAX_READS = 16  # reads per readiness callback (fairness between connections)
#: epoll rounds per loop callback: a connection served by the Reactor reads once per round, and
#: the next round finds whatever is still (or newly) waiting; bounded so that the loop's other
#: work (sending the next requests, timers) is not starved at thousands of streams
_MAX_ROUNDS = 16


class Exchange(Protocol):
    """Receives what the connection reads for one request (all times monotonic seconds)."""

    def on_head(self, status: int, headers: dict[str, str], t: float) -> None: ...
    def on_body(self, data: bytes, t: float) -> None: ...
    def on_complete(self, t: float) -> None: ...
    def on_error(self, kind: str, detail: str, t: float) -> None: ...


class Reactor:
    """Readiness for many connections through one epoll set that the event loop watches as a
    single reader: one loop callback serves every ready connection in a batch, instead of one
    loop handle per ready socket (the loop's per-event cost dominates at hundreds of streams).
    Level-triggered, like the loop's own readers."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._ep = select.epoll()
        self._cbs: dict[int, Callable[[], None]] = {}
        self._events = select.EPOLLIN
        #: (monotonic, wall) read at the start of the current round of reads
        self.pair = clock_pair()
        loop.add_reader(self._ep.fileno(), self._dispatch)

    def add_reader(self, fd: int, cb: Callable[[], None]) -> None:
        if fd in self._cbs:  # a watched descriptor (or a closed one's number, reused)
            self._cbs[fd] = cb
            try:
                self._ep.modify(fd, self._events)
            except FileNotFoundError:
                self._ep.register(fd, self._events)
            return
        self._cbs[fd] = cb
        self._ep.register(fd, self._events)

    def remove_reader(self, fd: int) -> None:
        if self._cbs.pop(fd, None) is not None:
            with contextlib.suppress(OSError):  # already closed
                self._ep.unregister(fd)

    def _dispatch(self) -> None:
        # Level-triggered: a connection that read one chunk and still has bytes waiting is
        # ready again in the next round.  One epoll_wait per round replaces the read that
        # would otherwise end every connection's callback in EAGAIN (one failed recvmsg and
        # one exception per streamed token: half the client's syscalls at 2,000 streams).
        cbs = self._cbs
        for _ in range(_MAX_ROUNDS):
            ready = self._ep.poll(0, 1024)
            if not ready:
                return
            # one clock pair per round converts every kernel stamp read in it (the offset
            # between the clocks does not move within milliseconds): three clock reads fewer
            # per streamed token
            self.pair = clock_pair()
            for fd, _ev in ready:
                cb = cbs.get(fd)
                if cb is None:
                    continue
                try:
                    cb()
                except Exception as exc:  # one connection's bug must not stop the others
                    self.loop.call_exception_handler(
                        {"message": "error in a connection's read callback", "exception": exc}
                    )

    def close(self) -> None:
        self.loop.remove_reader(self._ep.fileno())
        self._ep.close()
        self._cbs.clear()


class Connection:
    """One TCP connection; ``start`` sends a request and feeds the reply into an Exchange."""

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        on_free: Callable[[Connection, bool], None] | None = None,
        reactor: Reactor | None = None,
    ) -> None:
        self.sock = sock
        self.loop = loop
        self.readers: Reactor | asyncio.AbstractEventLoop = reactor or loop
        #: reads per readiness callback: one under a Reactor (its next round reads on), until
        #: the socket is empty under the loop's own readers
        self._reads = 1 if reactor is not None else _MAX_READS
        self.fd = sock.fileno()
        self.on_free = on_free
        self.tls: ssl.SSLObject | None = None
        self._tls_in = ssl.MemoryBIO()
        self._tls_out = ssl.MemoryBIO()
        self._tls_extra = 0  # record overhead added to sized reads
        self.exchange: Exchange | None = None
        self.closed = False
        self.used = 0  # requests started on this connection
        #: smallest framed chunk of the current response; reads are no larger while a chunked
        #: body streams, so one read rarely spans two packets and each keeps its own kernel
        #: stamp even when the loop fell behind and several events wait in the socket
        self.min_chunk = _READ_SIZE
        self._last_min = _READ_SIZE
        self._last_head = _READ_SIZE
        self._first_chunk = True
        self._reset_parser()

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        loop: asyncio.AbstractEventLoop,
        on_free: Callable[[Connection, bool], None] | None = None,
        tls: ssl.SSLContext | None = None,
        reactor: Reactor | None = None,
    ) -> Connection:
        """Connect (and, with ``tls``, complete the TLS handshake, SNI = ``host``)."""
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, type_, proto, _, addr = infos[0]
        sock = socket.socket(family, type_, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            enable_kernel_timestamps(sock)
            await loop.sock_connect(sock, addr)
            conn = cls(sock, loop, on_free, reactor)
            if tls is not None:
                await conn._handshake(tls, host)
        except BaseException:
            sock.close()
            raise
        return conn

    async def _handshake(self, ctx: ssl.SSLContext, host: str) -> None:
        obj = ctx.wrap_bio(self._tls_in, self._tls_out, server_side=False, server_hostname=host)
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                out = self._tls_out.read()
                if out:
                    await self.loop.sock_sendall(self.sock, out)
                data = await self.loop.sock_recv(self.sock, _READ_SIZE)
                if not data:
                    raise ConnectionResetError(
                        "server closed the connection during TLS handshake"
                    ) from None
                self._tls_in.write(data)
        out = self._tls_out.read()
        if out:
            await self.loop.sock_sendall(self.sock, out)
        self.tls = obj
        # header, content type and AEAD tag (TLS 1.3); explicit nonce and tag (TLS 1.2)
        self._tls_extra = 22 if obj.version() == "TLSv1.3" else 29

    # -- request ----------------------------------------------------------------------------
    def start(self, exchange: Exchange, request: bytes) -> None:
        """Send ``request`` (head and body) and route the reply to ``exchange``."""
        self.readers.remove_reader(self.fd)  # the idle watcher, if any
        self.exchange = exchange
        self.used += 1
        # until this response's first chunk is parsed, read no more than the last response's
        # smallest chunk (chunk sizes differ a little between requests: ids, token texts)
        self.min_chunk = self._last_min
        self._first_chunk = True
        self._reset_parser()
        self.readers.add_reader(self.fd, self._on_readable)
        if self.tls is not None:
            try:
                self.tls.write(request)
            except ssl.SSLError as exc:
                self._fail("connect", f"TLS error: {exc}")
                return
            request = self._tls_out.read()
        try:
            sent = self.sock.send(request)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._fail("connect", f"send failed: {exc}")
            return
        if sent < len(request):
            self._pending = memoryview(request)[sent:]
            self.loop.add_writer(self.fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            sent = self.sock.send(self._pending)
        except BlockingIOError:
            return
        except OSError as exc:
            self._fail("connect", f"send failed: {exc}")
            return
        self._pending = self._pending[sent:]
        if not self._pending:
            self.loop.remove_writer(self.fd)

    def abort(self, kind: str, detail: str) -> None:
        """End the current exchange with an error (timeouts, cancellation) and close."""
        self._fail(kind, detail)

    def watch_idle(self) -> None:
        """While idle, close as soon as the server closes (so a reuse never hits a dead socket)."""
        if not self.closed:
            self.readers.add_reader(self.fd, self._on_idle_readable)

    def _on_idle_readable(self) -> None:
        if self.tls is not None:  # TLS 1.3 session tickets may arrive after a response
            try:
                data = self.sock.recv(_READ_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if data:
                self._tls_in.write(data)
                try:
                    if not self.tls.read(_READ_SIZE):
                        self.close()
                except ssl.SSLWantReadError:
                    return  # protocol messages only: still usable
                except ssl.SSLError:
                    pass
                else:
                    return
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.readers.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        self.sock.close()

    # -- reading ----------------------------------------------------------------------------
    def _on_readable(self) -> None:
        # Read until the socket is empty (bounded): a read sized to one chunk leaves the rest
        # of a write (the end of the stream) to the next loop iteration otherwise, which at
        # hundreds of streams is milliseconds later.  Each read keeps its own kernel stamp.
        # Under a Reactor one read: its next epoll round comes back for the rest at once.
        for _ in range(self._reads):
            if self._state >= _CHUNK_SIZE:
                size = self.min_chunk + self._tls_extra
            elif self._state == _HEAD:
                # keeps a waiting first chunk out of the head's read
                size = self._last_head + self._tls_extra
            else:
                size = _READ_SIZE
            try:
                data, anc, _flags, _addr = self.sock.recvmsg(size, ANC_BUFSIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._fail(
                    "connect" if self._state == _HEAD and not self._head else "stream_protocol",
                    f"connection error: {exc}",
                )
                return
            readers = self.readers
            t = kernel_arrival(
                anc, *(readers.pair if isinstance(readers, Reactor) else clock_pair())
            )
            raw = len(data)
            if self.tls is not None:
                data, eof = self._decrypt(data)
                if data:
                    self.receive(data, t)
                if eof:
                    if self.exchange is None:
                        self.close()  # the server closed after the response: not an error
                    elif not self.closed:
                        self._on_eof(t)
                    return
            elif not data:
                self._on_eof(t)
                return
            else:
                self.receive(data, t)
            if raw < size or self.exchange is None:
                return  # the socket is (very likely) empty, or the response is over

    def _decrypt(self, raw: bytes) -> tuple[bytes, bool]:
        """Plaintext of the TLS records completed by ``raw``, and whether the peer ended."""
        assert self.tls is not None
        if raw:
            self._tls_in.write(raw)
        else:
            self._tls_in.write_eof()
        out: list[bytes] = []
        while True:
            try:
                part = self.tls.read(_READ_SIZE)
            except ssl.SSLWantReadError:
                return b"".join(out), False
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b"".join(out), True
            except ssl.SSLError as exc:
                self._fail("stream_protocol", f"TLS error: {exc}")
                return b"", True
            if not part:
                return b"".join(out), True
            out.append(part)

    def receive(self, data: bytes, t: float) -> None:
        """Parse bytes that arrived at ``t``; broken HTTP ends the exchange as stream_protocol."""
        # fast path, the hot one while hundreds of streams run: the read is exactly one whole
        # chunk (size line, data, CRLF) of a chunked body
        if self._state == _CHUNK_SIZE and not self._chunk_buf and self.exchange is not None:
            nl = data.find(b"\r\n", 0, 32)
            if nl > 0:
                try:
                    size = int(data[:nl], 16)
                except ValueError:
                    size = 0
                framed = nl + 4 + size
                if size and framed == len(data) and data.endswith(b"\r\n"):
                    if self._first_chunk:
                        self._first_chunk = False
                        m = framed
                    else:
                        m = self.min_chunk if self.min_chunk <= framed else framed
                    self.min_chunk = self._last_min = m if m > _MIN_READ else _MIN_READ
                    self.exchange.on_body(data[nl + 2 : framed - 2], t)
                    return
        try:
            self._feed(data, t)
        except StreamProtocolError as exc:
            self._fail("stream_protocol", str(exc), t)

    def _reset_parser(self) -> None:
        self._state = _HEAD
        self._head = b""
        self._remaining = 0  # Content-Length left, or bytes left in the current chunk
        self._chunk_buf = b""
        self._keep_alive = True
        self._pending = memoryview(b"")

    def _feed(self, data: bytes, t: float) -> None:
        ex = self.exchange
        if ex is None:  # bytes nobody asked for: the connection is unusable
            raise StreamProtocolError("unsolicited bytes on an idle connection")
        while data:
            if self._state == _HEAD:
                data = self._feed_head(ex, data, t)
            elif self._state == _LENGTH:
                take = data[: self._remaining]
                data = data[len(take) :]
                self._remaining -= len(take)
                ex.on_body(take, t)
                if self._remaining == 0:
                    self._finish(t)
                    if data:
                        raise StreamProtocolError("bytes after the end of the response")
            elif self._state == _UNTIL_CLOSE:
                ex.on_body(data, t)
                data = b""
            else:
                data = self._feed_chunked(ex, data, t)
            if self._state == _DONE:
                if data:
                    raise StreamProtocolError("bytes after the end of the response")
                return

    def _feed_head(self, ex: Exchange, data: bytes, t: float) -> bytes:
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        if end < 0:
            if len(self._head) > _MAX_HEAD:
                raise StreamProtocolError("response head larger than 64 KiB")
            return b""
        head, rest = self._head[:end], self._head[end + 4 :]
        self._last_head = max(_MIN_READ, end + 4)
        status, headers = _parse_head(head)
        if 100 <= status < 200:  # interim response (100 Continue): wait for the real one
            self._head = b""
            return rest
        ex.on_head(status, headers, t)
        conn = headers.get("connection", "").lower()
        self._keep_alive = "close" not in conn
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNK_SIZE
        elif "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"])
            except ValueError as exc:
                raise StreamProtocolError("bad Content-Length") from exc
            self._state = _LENGTH
            if self._remaining == 0:
                self._finish(t)
        else:
            self._state = _UNTIL_CLOSE
            self._keep_alive = False
        return rest

    def _feed_chunked(self, ex: Exchange, data: bytes, t: float) -> bytes:
        if self._state == _CHUNK_SIZE and not self._chunk_buf:
            # fast path: whole chunks (size line, data, CRLF) in one read, the common case
            while True:
                nl = data.find(b"\r\n", 0, 32)
                if nl <= 0:
                    break
                try:
                    size = int(data[:nl], 16)
                except ValueError:
                    break  # extensions or garbage: the general path decides
                end = nl + 2 + size
                if size == 0 or data[end : end + 2] != b"\r\n":
                    break
                self._saw_chunk(end + 2)
                ex.on_body(data[nl + 2 : end], t)
                data = data[end + 2 :]
                if not data:
                    return b""
        if self._state == _CHUNK_DATA:
            take = data[: self._remaining]
            self._remaining -= len(take)
            ex.on_body(take, t)
            if self._remaining == 0:
                self._state = _CHUNK_CRLF
            return data[len(take) :]
        # size line, CRLF after data, or trailers: all line-oriented
        self._chunk_buf += data
        nl = self._chunk_buf.find(b"\r\n")
        if nl < 0:
            if len(self._chunk_buf) > 4096:
                raise StreamProtocolError("chunk size line too long")
            return b""
        line, rest = self._chunk_buf[:nl], self._chunk_buf[nl + 2 :]
        self._chunk_buf = b""
        if self._state == _CHUNK_CRLF:
            if line:
                raise StreamProtocolError("missing CRLF after chunk data")
            self._state = _CHUNK_SIZE
        elif self._state == _CHUNK_SIZE:
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise StreamProtocolError(f"bad chunk size {line[:20]!r}") from exc
            if size == 0:
                self._state = _TRAILERS
            else:
                self._remaining = size
                self._state = _CHUNK_DATA
                self._saw_chunk(size + len(line) + 4)
        elif not line:  # end of trailers
            self._finish(t)
        return rest

    def _saw_chunk(self, framed: int) -> None:
        if self._first_chunk:
            self._first_chunk = False
            self.min_chunk = max(_MIN_READ, framed)
        else:
            self.min_chunk = max(_MIN_READ, min(self.min_chunk, framed))
        self._last_min = self.min_chunk

    def _on_eof(self, t: float) -> None:
        if self._state == _UNTIL_CLOSE:
            self._finish(t)
            self.close()
            return
        if self._state == _HEAD and not self._head:
            self._fail("connect", "server closed the connection before answering", t)
        else:
            self._fail("stream_protocol", "connection closed in the middle of the response", t)

    def _finish(self, t: float) -> None:
        self._state = _DONE
        self.readers.remove_reader(self.fd)
        ex, self.exchange = self.exchange, None
        reusable = self._keep_alive and not self._pending
        # free the connection first: the exchange may send its user's next request on it
        if self.on_free is not None:
            self.on_free(self, reusable)
        elif not reusable:
            self.close()
        if ex is not None:
            ex.on_complete(t)

    def _fail(self, kind: str, detail: str, t: float | None = None) -> None:
        ex, self.exchange = self.exchange, None
        self.close()
        if ex is not None:
            ex.on_error(kind, detail, time.monotonic() if t is None else t)
        if self.on_free is not None:
            self.on_free(self, False)


_HEAD, _LENGTH, _UNTIL_CLOSE, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILERS, _DONE = range(8)


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise StreamProtocolError(f"not an HTTP/1.x status line: {lines[0][:40]!r}")
    try:
        status = int(parts[1])
    except ValueError as exc:
        raise StreamProtocolError(f"bad status code {parts[1][:10]!r}") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise StreamProtocolError(f"bad header line {line[:40]!r}")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return status, headers


def build_request(
    method: str, host: str, port: int, path: str, headers: dict[str, str], body: bytes
) -> bytes:
    """Serialize an HTTP/1.1 request (head and body)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def client_tls_context(insecure: bool = False, ca_bundle: str | None = None) -> ssl.SSLContext:
    """The client's TLS settings: the system's CAs (or ``ca_bundle``, a PEM file), hostname
    checks, HTTP/1.1 by ALPN; ``insecure`` skips verification (self-signed endpoints)."""
    ctx = ssl.create_default_context(cafile=ca_bundle)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
