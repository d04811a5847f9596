"""What to send: prompt and output lengths, synthetic prompts, prompt files and replay traces.

No tokenizer is downloaded: a synthetic prompt of N tokens is N short words (about one token
each for common BPE vocabularies), and the server's ``usage`` counts are recorded when it
sends them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tailtriage.errors import ConfigError, ParseError
from tailtriage.loadgen.replay_formats import ReplayItem, read_replay

__all__ = [
    "LengthDist",
    "Prompt",
    "ReplayItem",
    "file_prompts",
    "replay_trace",
    "synthetic_prompts",
]

_DISTS = ("fixed", "uniform", "normal", "lognormal")


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution: ``32``, ``uniform:8:64``, ``normal:128:32``,
    ``lognormal:128:0.5`` (median and sigma of the log)."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str) -> LengthDist:
        parts = str(text).strip().split(":")
        try:
            if len(parts) == 1:
                return cls("fixed", float(parts[0]))
            kind, nums = parts[0], [float(p) for p in parts[1:]]
        except ValueError:
            raise ConfigError(f"bad length distribution {text!r}") from None
        if kind not in _DISTS or len(nums) != (1 if kind == "fixed" else 2):
            raise ConfigError(
                f"bad length distribution {text!r}; use N, uniform:LO:HI, normal:MEAN:STD "
                "or lognormal:MEDIAN:SIGMA"
            )
        return cls(kind, nums[0], nums[1] if len(nums) > 1 else 0.0)

    def sample(self, rng: np.random.Generator) -> int:
        if self.kind == "fixed":
            v = self.a
        elif self.kind == "uniform":
            v = rng.uniform(self.a, self.b + 1)
        elif self.kind == "normal":
            v = rng.normal(self.a, self.b)
        else:
            v = self.a * float(np.exp(rng.normal(0.0, self.b)))
        return max(1, int(v))


@dataclass(frozen=True)
class Prompt:
    text: str
    prompt_tokens: int
    max_tokens: int
    messages: tuple[dict[str, str], ...] | None = None


def synthetic_prompts(
    input_len: LengthDist, output_len: LengthDist, rng: np.random.Generator
) -> Iterator[Prompt]:
    """An endless stream of prompts of the given lengths (distinct texts defeat prefix caches)."""
    while True:
        n = input_len.sample(rng)
        words = rng.integers(0, 20000, size=n)
        text = " ".join(f"w{int(w)}" for w in words)
        yield Prompt(text, n, output_len.sample(rng))


def file_prompts(path: Path, output_len: LengthDist, rng: np.random.Generator) -> list[Prompt]:
    """Prompts from a JSONL file: ``{"prompt": ...}`` or ``{"messages": [...]}`` per line,
    optional ``max_tokens``.  A broken line is an error naming the file and line."""
    out: list[Prompt] = []
    for lineno, obj in _jsonl(path):
        msgs = obj.get("messages")
        text = obj.get("prompt")
        if isinstance(msgs, list) and msgs:
            messages = tuple(
                {"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
                for m in msgs
                if isinstance(m, dict)
            )
            text = " ".join(m["content"] for m in messages)
        elif isinstance(text, str):
            messages = None
        else:
            raise ParseError(
                "expected a 'prompt' string or a 'messages' list", str(path), f"line {lineno}"
            )
        mt = obj.get("max_tokens", obj.get("output_tokens"))
        max_tokens = int(mt) if isinstance(mt, int) and mt > 0 else output_len.sample(rng)
        out.append(Prompt(text, max(1, len(text.split())), max_tokens, messages))
    if not out:
        raise ParseError("no prompts in file", str(path))
    return out


def replay_trace(path: Path) -> list[ReplayItem]:
    """A replay trace in any of :mod:`.replay_formats`' formats (tailtriage or Mooncake JSONL,
    inference-perf's Azure CSV), sorted, times relative to the first request."""
    return read_replay(path)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"invalid JSON ({exc.msg})", str(path), f"line {i}") from None
        if not isinstance(obj, dict):
            raise ParseError("expected a JSON object", str(path), f"line {i}")
        yield i, obj
