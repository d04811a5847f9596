"""Turning the SSE events of one OpenAI-compatible stream into token arrivals.

Runs after the request has finished, so parsing never delays a timestamp.  A *content chunk*
is an event whose first choice carries text (``delta.content``, ``delta.reasoning_content``
or, for ``/v1/completions``, ``text``); role-only and usage-only chunks are not tokens.
A chunk's token count comes from the server's cumulative ``usage`` when it sends one per chunk
(vLLM ``continuous_usage_stats``), else it is one token per chunk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

#: stamps closer than this came from one merged packet (two real packets on one connection
#: are never a microsecond apart: a server writes each stream once per step)
_SAME_STAMP = 1e-6


@dataclass(frozen=True)
class StreamResult:
    """What a finished stream said."""

    chunks: tuple[tuple[float, int], ...]  # (arrival, tokens) of every content chunk
    prompt_tokens: int | None
    output_tokens: int | None  # server usage when present, else the sum of chunk tokens
    finish_reason: str | None
    error: str | None  # stream_protocol problem, None when the stream is well formed
    coalesced: int  # content chunks that arrived in the same read as the previous one


def interpret_stream(events: Sequence[tuple[float, bytes]]) -> StreamResult:
    chunks: list[tuple[float, int]] = []
    prompt_tokens: int | None = None
    usage_total: int | None = None
    finish: str | None = None
    done = False
    last_cum: int | None = None
    coalesced = 0
    prev_t: float | None = None
    for t, raw in events:
        if raw[:6] == b"data: " and b"\n" not in raw:
            data: bytes | None = raw[6:]  # one data line, the usual event
        else:
            data = _event_data(raw)
        if data is None:
            continue  # comment or keep-alive
        if data == b"[DONE]":
            done = True
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return _broken(chunks, f"event data is not JSON: {data[:60]!r}", coalesced)
        if not isinstance(obj, dict):
            return _broken(chunks, "event data is not a JSON object", coalesced)
        if "error" in obj and "choices" not in obj:
            return _broken(chunks, f"error event: {_short(obj['error'])}", coalesced)
        usage = obj.get("usage")
        cum: int | None = None
        if isinstance(usage, dict):
            prompt_tokens = _int(usage.get("prompt_tokens"), prompt_tokens)
            cum = _int(usage.get("completion_tokens"), None)
            if cum is not None:
                usage_total = cum
        text, reason = _choice_text(obj.get("choices"))
        finish = reason or finish
        if text:
            n = 1
            if cum is not None and last_cum is not None and cum > last_cum:
                n = cum - last_cum
            elif cum is not None and last_cum is None and cum > 0:
                n = cum
            chunks.append((t, n))
            # the same kernel stamp converted twice may differ in the last bits
            if prev_t is not None and abs(t - prev_t) < _SAME_STAMP:
                coalesced += 1
            prev_t = t
        if cum is not None:
            last_cum = cum
    if not done and finish is None:
        return _broken(chunks, "stream ended without [DONE] or a finish_reason", coalesced)
    total = usage_total if usage_total is not None else sum(n for _, n in chunks)
    return StreamResult(tuple(chunks), prompt_tokens, total, finish, None, coalesced)


def interpret_body(body: bytes) -> tuple[int | None, int | None, str | None, str | None]:
    """(prompt_tokens, output_tokens, finish_reason, error) of a non-streaming response."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, None, None, f"response body is not JSON: {body[:60]!r}"
    if not isinstance(obj, dict):
        return None, None, None, "response body is not a JSON object"
    raw_usage = obj.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    _, reason = _choice_text(obj.get("choices"))
    return (
        _int(usage.get("prompt_tokens"), None),
        _int(usage.get("completion_tokens"), None),
        reason,
        None,
    )


def response_text(events: Sequence[tuple[float, bytes]], body: bytes, stream: bool) -> str:
    """The answer a response carried: its content chunks joined, or the message of a
    non-streaming body ("" when there is none)."""
    if not stream:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            return ""
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""
        message = choices[0].get("message")
        text = message.get("content") if isinstance(message, dict) else choices[0].get("text")
        return text if isinstance(text, str) else ""
    parts: list[str] = []
    for _, raw in events:
        data = _event_data(raw)
        if data is None or data == b"[DONE]":
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            choices = obj.get("choices")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                delta = choices[0].get("delta")
                text = delta.get("content") if isinstance(delta, dict) else choices[0].get("text")
                if isinstance(text, str):
                    parts.append(text)
    return "".join(parts)


def _event_data(raw: bytes) -> bytes | None:
    """The joined ``data:`` lines of one event, or None when it has none."""
    parts: list[bytes] = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data:"):
            v = line[5:]
            parts.append(v[1:] if v.startswith(b" ") else v)
    if not parts:
        return None
    return b"\n".join(parts)


def _choice_text(choices: Any) -> tuple[str, str | None]:
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "", None
    c = choices[0]
    reason = c.get("finish_reason") if isinstance(c.get("finish_reason"), str) else None
    delta = c.get("delta")
    if isinstance(delta, dict):
        text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
    else:
        text = c.get("text")
    return (text if isinstance(text, str) else ""), reason


def _int(v: Any, default: int | None) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else default


def _short(v: Any) -> str:
    if isinstance(v, dict):
        v = v.get("message", v)
    return str(v)[:120]


def _broken(chunks: list[tuple[float, int]], why: str, coalesced: int) -> StreamResult:
    return StreamResult(
        tuple(chunks), None, sum(n for _, n in chunks) or None, None, why, coalesced
    )
