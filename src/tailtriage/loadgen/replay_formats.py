"""Arrival schedules a load generator replays: read and written in three formats.

==================  =====================================================================
``tailtriage``      JSONL, ``{"t": seconds, "prompt_tokens": n, "output_tokens": m}``
                    (``"hash_ids"`` too when prefixes are known)
``mooncake``        JSONL, Mooncake's trace: ``{"timestamp": ms, "input_length": n,
                    "output_length": m, "hash_ids": [...]}`` (one id per block of
                    MOONCAKE_BLOCK_TOKENS prompt tokens; equal ids are a shared prefix) -
                    what AIPerf's ``mooncake_trace`` and Dynamo's replay read
``inference-perf``  CSV, the Azure public LLM trace's ``TIMESTAMP,ContextTokens,
                    GeneratedTokens`` (UTC, ``%Y-%m-%d %H:%M:%S.%f``) - what
                    inference-perf's ``trace_replay`` load reads (AzurePublicDatasetReader)
==================  =====================================================================

Reading detects the format from the content; a broken line is a :class:`ParseError` naming
the file and line."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tailtriage.errors import ConfigError, ParseError

#: prompt tokens per Mooncake hash id (the FAST'25 traces' block size)
MOONCAKE_BLOCK_TOKENS = 512
FORMATS = ("tailtriage", "mooncake", "inference-perf")
_AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
_AZURE_TIME = "%Y-%m-%d %H:%M:%S.%f"


@dataclass(frozen=True)
class ReplayItem:
    at: float  # seconds after the first item
    prompt_tokens: int
    output_tokens: int
    #: one id per MOONCAKE_BLOCK_TOKENS of the prompt; equal leading ids share a prefix
    hash_ids: tuple[int, ...] = ()


def read_replay(path: Path) -> list[ReplayItem]:
    """Every item of a replay file, sorted, times relative to the first."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    if data.lstrip().startswith(b"TIMESTAMP"):
        raw = list(_azure_rows(path, data))
    else:
        raw = list(_jsonl_rows(path, data))
    if not raw:
        raise ParseError("empty replay trace", str(path))
    raw.sort(key=lambda r: r[0])
    t0 = raw[0][0]
    return [ReplayItem(t - t0, p, o, h) for t, p, o, h in raw]


_Row = tuple[float, int, int, tuple[int, ...]]


def _jsonl_rows(path: Path, data: bytes) -> Iterator[_Row]:
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj: Any = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"invalid JSON ({exc.msg})", str(path), f"line {lineno}") from None
        if not isinstance(obj, dict):
            raise ParseError("expected a JSON object", str(path), f"line {lineno}")
        rec: dict[str, Any] = obj
        try:
            t = float(rec["t"]) if "t" in rec else float(rec["timestamp"]) / 1000.0
            p = int(rec.get("prompt_tokens", rec.get("input_length", 0)))
            o = int(rec.get("output_tokens", rec.get("output_length", 0)))
            h = tuple(int(x) for x in rec.get("hash_ids") or ())
        except (KeyError, TypeError, ValueError):
            raise ParseError(
                "expected t/timestamp, prompt_tokens/input_length, output_tokens/output_length",
                str(path),
                f"line {lineno}",
            ) from None
        yield t, max(1, p), max(1, o), h


def _azure_rows(path: Path, data: bytes) -> Iterator[_Row]:
    lines = data.decode("utf-8", errors="replace").splitlines()
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        parts = line.split(",")
        try:
            stamp = parts[0].strip().strip('"')
            head, _, frac = stamp.partition(".")
            when = datetime.strptime(f"{head}.{(frac + '000000')[:6]}", _AZURE_TIME)
            t = when.replace(tzinfo=UTC).timestamp()
            p, o = int(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            raise ParseError(
                f"expected {_AZURE_HEADER} (UTC %Y-%m-%d %H:%M:%S.%f)", str(path), f"line {lineno}"
            ) from None
        yield t, max(1, p), max(1, o), ()


def write_replay(
    items: Sequence[ReplayItem], path: Path, fmt: str, *, start_unix_s: float = 0.0
) -> int:
    """Write ``items`` as ``fmt`` (one of FORMATS); ``start_unix_s`` anchors the CSV's wall
    clock (the incident's first arrival).  Returns the number of requests written."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown replay format {fmt!r}; use one of {', '.join(FORMATS)}")
    out: list[bytes] = []
    if fmt == "inference-perf":
        out.append(_AZURE_HEADER.encode())
        for it in items:
            when = datetime.fromtimestamp(start_unix_s + it.at, tz=UTC)
            out.append(
                f"{when.strftime(_AZURE_TIME)},{it.prompt_tokens},{it.output_tokens}".encode()
            )
    else:
        fresh = 0  # block ids of requests without known prefixes: each its own
        for it in items:
            rec, fresh = _record(it, fmt, fresh)
            out.append(orjson.dumps(rec))
    try:
        Path(path).write_bytes(b"\n".join(out) + b"\n")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None
    return len(items)


#: block ids given to requests without known prefixes start here (known ids stay below)
_FRESH_IDS = 1 << 40


def _record(it: ReplayItem, fmt: str, fresh: int) -> tuple[dict[str, Any], int]:
    if fmt == "tailtriage":
        rec: dict[str, Any] = {"t": round(it.at, 6), "prompt_tokens": it.prompt_tokens,
                               "output_tokens": it.output_tokens}  # fmt: skip
        if it.hash_ids:
            rec["hash_ids"] = list(it.hash_ids)
        return rec, fresh
    # Mooncake needs block ids; without known prefixes a request's blocks are its own
    blocks = list(it.hash_ids)
    if not blocks:
        n = max(1, math.ceil(it.prompt_tokens / MOONCAKE_BLOCK_TOKENS))
        blocks = list(range(_FRESH_IDS + fresh, _FRESH_IDS + fresh + n))
        fresh += n
    rec = {"timestamp": round(it.at * 1000.0), "input_length": it.prompt_tokens,
           "output_length": it.output_tokens, "hash_ids": blocks}  # fmt: skip
    return rec, fresh


def prompt_text(it: ReplayItem) -> str:
    """A prompt of ``it.prompt_tokens`` words whose leading blocks are the same text for the
    same hash ids (so a server's prefix cache sees the shared prefixes the trace records)."""
    words: list[str] = []
    for hid in it.hash_ids:
        words += [f"h{hid}w{j}" for j in range(MOONCAKE_BLOCK_TOKENS)]
        if len(words) >= it.prompt_tokens:
            break
    words += [f"w{j}" for j in range(len(words), it.prompt_tokens)]
    return " ".join(words[: it.prompt_tokens])
