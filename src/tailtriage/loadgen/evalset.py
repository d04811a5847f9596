"""Evaluation sets: prompts with a known right answer, and how an answer is scored.

One JSON object per line::

    {"id": "gsm-17", "type": "numeric", "prompt": "...", "answer": "42", "tolerance": 0.01,
     "category": "math"}
    {"id": "mmlu-3", "type": "mc", "prompt": "... A) ... B) ...", "answer": "B"}
    {"id": "cap-1", "type": "exact", "prompt": "Capital of France?", "answer": "Paris"}

``type`` is ``exact`` (normalised string equality), ``mc`` (the first standalone choice letter
of the response), ``numeric`` (the last number of the response within ``tolerance``) or
``code``.  Code items are read but not scored: running model output as code needs a sandbox
this tool does not have, so they are counted as unsupported.  ``category`` (optional) tags a
risk area such as ``math``, ``code``, ``long_context`` or ``retrieval``."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson

from tailtriage.errors import InputError, ParseError

TASK_TYPES: Final = ("exact", "mc", "numeric", "code")
SCORED_TYPES: Final = ("exact", "mc", "numeric")
#: numeric answers equal within this when an item gives no tolerance (float round-off)
DEFAULT_TOLERANCE: Final = 1e-6
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")
_LETTER = re.compile(r"\b([A-J])\b")
_ANSWER_PREFIX = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:=]?\s*", re.I)


@dataclass(frozen=True, slots=True)
class EvalItem:
    id: str
    type: str
    prompt: str
    answer: str
    tolerance: float = DEFAULT_TOLERANCE
    category: str = ""
    max_tokens: int = 32


def load_evalset(path: Path) -> list[EvalItem]:
    """The items of ``path``; a broken line is an error naming the file and line."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise InputError(f"cannot read the evaluation set ({exc.strerror})", str(path)) from None
    items: list[EvalItem] = []
    seen: set[str] = set()
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"line {n}"
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"not JSON ({exc})", str(path), where) from None
        if not isinstance(obj, dict):
            raise ParseError("expected an object", str(path), where)
        kind = str(obj.get("type", "exact"))
        if kind not in TASK_TYPES:
            raise ParseError(f"type {kind!r} is not one of {', '.join(TASK_TYPES)}", str(path),
                             where)  # fmt: skip
        if not isinstance(obj.get("prompt"), str) or "answer" not in obj:
            raise ParseError("needs a string prompt and an answer", str(path), where)
        item_id = str(obj.get("id", n))
        if item_id in seen:
            raise ParseError(f"duplicate id {item_id!r}", str(path), where)
        seen.add(item_id)
        try:
            tol = float(obj.get("tolerance", DEFAULT_TOLERANCE))
            max_tokens = int(obj.get("max_tokens", 32))
        except (TypeError, ValueError):
            raise ParseError("tolerance and max_tokens must be numbers", str(path), where) from None
        if kind == "numeric" and parse_number(str(obj["answer"])) is None:
            raise ParseError(f"numeric answer {obj['answer']!r} is not a number", str(path), where)
        items.append(EvalItem(item_id, kind, obj["prompt"], str(obj["answer"]), tol,
                              str(obj.get("category", "")), max(1, max_tokens)))  # fmt: skip
    if not items:
        raise InputError("the evaluation set has no items", str(path))
    return items


def normalize(text: str) -> str:
    """Lower case, no answer prefix, no surrounding punctuation, single spaces."""
    text = _ANSWER_PREFIX.sub("", text.strip())
    return " ".join(text.lower().strip(string.punctuation + string.whitespace).split())


def parse_number(text: str) -> float | None:
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def is_correct(item: EvalItem, response: str) -> bool | None:
    """Whether ``response`` answers ``item`` (None: this type is not scored)."""
    if item.type == "exact":
        return normalize(response) == normalize(item.answer)
    if item.type == "mc":
        letter = _LETTER.search(response.upper())
        return letter is not None and letter.group(1) == item.answer.strip().upper()
    if item.type == "numeric":
        got, want = parse_number(response), parse_number(item.answer)
        return got is not None and want is not None and abs(got - want) <= item.tolerance
    return None
