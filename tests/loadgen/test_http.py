"""The HTTP/1.1 response parser of the stamping connection, fed byte pieces directly."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.loadgen.http import _MAX_ROUNDS, Connection, Reactor, build_request


class Recorder:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.completed = 0
        self.errors: list[tuple[str, str]] = []

    def on_head(self, status: int, headers: dict[str, str], t: float) -> None:
        self.status, self.headers = status, headers

    def on_body(self, data: bytes, t: float) -> None:
        self.body += data

    def on_complete(self, t: float) -> None:
        self.completed += 1

    def on_error(self, kind: str, detail: str, t: float) -> None:
        self.errors.append((kind, detail))


@pytest.fixture
def conn() -> Iterator[Connection]:
    loop = asyncio.new_event_loop()
    a, b = socket.socketpair()
    c = Connection(a, loop)
    try:
        yield c
    finally:
        c.close()
        b.close()
        loop.close()


def _feed(c: Connection, rec: Recorder, data: bytes, cuts: list[int]) -> None:
    c.exchange = rec
    c._reset_parser()
    pos = 0
    for n in [*cuts, len(data)]:
        if pos >= len(data) or c.exchange is None:
            break
        c.receive(data[pos : pos + n], float(pos))
        pos += n


def _chunked(parts: list[bytes]) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"


@settings(max_examples=60)
@given(
    st.lists(st.binary(min_size=0, max_size=40), min_size=0, max_size=6),
    st.lists(st.integers(min_value=1, max_value=17), max_size=30),
)
def test_chunked_body_survives_any_split(parts: list[bytes], cuts: list[int]) -> None:
    loop = asyncio.new_event_loop()
    a, b = socket.socketpair()
    c = Connection(a, loop)
    try:
        rec = Recorder()
        _feed(c, rec, _chunked(parts), cuts)
        assert rec.errors == []
        assert rec.status == 200
        assert rec.body == b"".join(parts)
        assert rec.completed == 1
    finally:
        c.close()
        b.close()
        loop.close()


def test_content_length_body(conn: Connection) -> None:
    rec = Recorder()
    raw = b'HTTP/1.1 429 Too Many Requests\r\nContent-Length: 11\r\n\r\n{"error":1}'
    _feed(conn, rec, raw, [5, 30])
    assert rec.status == 429 and rec.body == b'{"error":1}' and rec.completed == 1


def test_interim_100_continue_is_skipped(conn: Connection) -> None:
    rec = Recorder()
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
    _feed(conn, rec, raw, [])
    assert rec.status == 204 and rec.completed == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
    ],
)
def test_broken_http_is_a_stream_protocol_error(conn: Connection, raw: bytes) -> None:
    rec = Recorder()
    _feed(conn, rec, raw, [])
    assert rec.completed == 0
    assert [k for k, _ in rec.errors] == ["stream_protocol"]


def test_build_request_sets_length_and_headers() -> None:
    raw = build_request("POST", "h", 8, "/v1/x", {"traceparent": "00-a-b-01"}, b"{}")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/x HTTP/1.1\r\nHost: h:8")
    assert b"traceparent: 00-a-b-01" in head and b"Content-Length: 2" in head and body == b"{}"


def test_reactor_rounds_read_on_until_every_socket_is_empty() -> None:
    # connections under a Reactor read once per callback; the Reactor's next epoll round
    # comes back for what is left, in the same loop callback (no EAGAIN read per token)
    loop = asyncio.new_event_loop()
    reactor = Reactor(loop)
    pairs = [socket.socketpair() for _ in range(2)]
    reads: list[bytes] = []
    try:
        for _a, b in pairs:
            b.setblocking(False)
            reactor.add_reader(b.fileno(), lambda b=b: reads.append(b.recv(1)))
        pairs[0][0].send(b"abc")
        pairs[1][0].send(b"xy")
        reactor._dispatch()
        assert sorted(reads) == [b"a", b"b", b"c", b"x", b"y"]
    finally:
        reactor.close()
        loop.close()
        for a, b in pairs:
            a.close()
            b.close()


def test_reactor_rounds_are_bounded() -> None:
    # a socket that stays readable must not hold the loop: at most _MAX_ROUNDS callbacks
    loop = asyncio.new_event_loop()
    reactor = Reactor(loop)
    a, b = socket.socketpair()
    calls: list[int] = []
    try:
        a.send(b"never read")
        reactor.add_reader(b.fileno(), lambda: calls.append(1))
        reactor._dispatch()
        assert len(calls) == _MAX_ROUNDS
    finally:
        reactor.close()
        loop.close()
        a.close()
        b.close()
