"""SSE framing (Flight.on_body) and interpretation of OpenAI-compatible streams."""

from __future__ import annotations

import asyncio

import orjson
from hypothesis import given
from hypothesis import strategies as st

from tailtriage.loadgen.request import Flight, RequestSpec
from tailtriage.loadgen.sse import interpret_body, interpret_stream


def _chat_event(text: str | None, finish: str | None = None, usage: dict | None = None) -> bytes:
    delta = {} if text is None else {"content": text}
    obj: dict = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + orjson.dumps(obj)


def _flight() -> Flight:
    loop = asyncio.new_event_loop()
    try:
        fut = loop.create_future()
    finally:
        loop.close()
    return Flight(RequestSpec(0, "p", 1, 4), "r", "0" * 31 + "1", "0" * 15 + "1", True, fut)


def test_role_chunk_is_not_a_token_and_usage_gives_totals() -> None:
    events = [
        (1.0, b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}'),
        (1.1, _chat_event("Hel")),
        (1.2, _chat_event("lo")),
        (1.3, _chat_event(None, "stop")),
        (1.3, b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}'),
        (1.3, b"data: [DONE]"),
    ]
    res = interpret_stream(events)
    assert res.error is None
    assert [t for t, _ in res.chunks] == [1.1, 1.2]
    assert res.prompt_tokens == 7
    assert res.output_tokens == 3  # the server's count wins over the chunk count
    assert res.finish_reason == "stop"


def test_continuous_usage_gives_tokens_per_chunk() -> None:
    events = [
        (1.0, _chat_event("a b", usage={"prompt_tokens": 5, "completion_tokens": 2})),
        (1.5, _chat_event("c d e", usage={"prompt_tokens": 5, "completion_tokens": 5})),
        (1.5, b"data: [DONE]"),
    ]
    res = interpret_stream(events)
    assert [n for _, n in res.chunks] == [2, 3]
    assert res.output_tokens == 5


def test_completions_text_and_comments() -> None:
    events = [
        (0.5, b": keep-alive"),
        (1.0, b'data: {"choices":[{"index":0,"text":" x","finish_reason":null}]}'),
        (
            2.0,
            b'event: message\ndata: {"choices":[{"index":0,"text":" y","finish_reason":"length"}]}',
        ),
    ]
    res = interpret_stream(events)
    assert res.error is None and len(res.chunks) == 2 and res.finish_reason == "length"


def test_malformed_json_is_a_stream_protocol_error() -> None:
    res = interpret_stream([(1.0, _chat_event("a")), (1.1, b"data: {oops")])
    assert res.error is not None and "not JSON" in res.error
    assert len(res.chunks) == 1


def test_truncated_stream_and_error_event() -> None:
    assert interpret_stream([(1.0, _chat_event("a"))]).error is not None
    err = interpret_stream([(1.0, b'data: {"error":{"message":"overloaded"}}')])
    assert err.error is not None and "overloaded" in err.error


def test_unary_body() -> None:
    body = orjson.dumps(
        {
            "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 9},
        }
    )
    assert interpret_body(body) == (3, 9, "stop", None)
    assert interpret_body(b"<html>")[3] is not None


_EVENTS = st.lists(
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
        max_size=30,
    ),
    min_size=1,
    max_size=8,
)


@given(_EVENTS, st.lists(st.integers(min_value=1, max_value=50), max_size=20), st.booleans())
def test_framing_does_not_depend_on_how_bytes_are_split(
    texts: list[str], cuts: list[int], crlf: bool
) -> None:
    """Whatever the TCP reads look like, the same events come out, each stamped with the
    read in which its first byte arrived."""
    sep = b"\r\n\r\n" if crlf else b"\n\n"
    payloads = [b"data: " + t.encode() for t in texts]
    stream = b"".join(p + sep for p in payloads)
    pieces, pos = [], 0
    for c in cuts:
        if pos >= len(stream):
            break
        pieces.append(stream[pos : pos + c])
        pos += c
    if pos < len(stream):
        pieces.append(stream[pos:])
    f = _flight()
    starts = []  # read index in which each event's first byte lies
    offset = 0
    bounds = []
    for p in payloads:
        bounds.append(offset)
        offset += len(p) + len(sep)
    read_of_byte = []
    for i, piece in enumerate(pieces):
        read_of_byte += [i] * len(piece)
    starts = [float(read_of_byte[b]) for b in bounds]
    for i, piece in enumerate(pieces):
        f.on_body(piece, float(i))
    assert [e for _, e in f.events] == payloads
    assert [t for t, _ in f.events] == starts


def test_a_json_answer_to_a_stream_request_is_read_as_unary() -> None:
    f = _flight()
    f.on_head(200, {"content-type": "application/json"}, 1.0)
    f.on_body(b'{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],', 1.1)
    f.on_body(b'"usage":{"prompt_tokens":1,"completion_tokens":4}}', 1.2)
    assert not f.stream and f.events == []
    assert interpret_body(bytes(f.body))[1] == 4


def test_chunks_sharing_a_stamp_are_counted() -> None:
    events = [(1.0, _chat_event("a")), (1.0 + 1e-9, _chat_event("b")), (1.02, _chat_event("c")),
              (1.02, b"data: [DONE]")]  # fmt: skip
    assert interpret_stream(events).coalesced == 1
