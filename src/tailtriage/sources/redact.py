"""Redaction of secrets and content on ingest, in one place (design section 6, issue 21).

Every reader stores values through :func:`redact_value`, so secrets never reach a saved capture
or a report.  It applies to every value at any depth (kvlists, arrays, JSON inside a string):

* a key that names a credential (``authorization``, ``x-api-key``, ``cookie``, ``password``,
  ``x-amz-security-token``, ``x-hf-token``, a Prometheus label ``token``, ...) gets
  ``[REDACTED]`` whatever its value; a key whose only hint is a ``token`` word keeps numbers
  (``llm.token_count.prompt`` is a count) and loses text;
* text keeps its shape with the secret part replaced: token shapes (``Bearer``/``Basic``
  credentials, ``sk-``/``sk-proj-`` keys, ``hf_`` tokens, AWS access keys, JWTs, GitHub and
  Slack tokens), ``name: value`` / ``name=value`` pairs of credential names (header lines,
  query strings, free text), URL user info;
* content is dropped by default (``[DROPPED]``): prompts, completions, chat messages, SQL
  statements.  :func:`keeping_content` (``--keep-content``) keeps it.

Readers of large files do not look at every value: :func:`needs_redaction` is the one rule
every reader asks first (key-name patterns, one cached test per distinct key; value patterns,
one C-speed scan of the serialised attributes) to decide which spans need the deep pass."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Final

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.model import Capture

REDACTED: Final = "[REDACTED]"
DROPPED: Final = "[DROPPED]"
#: environment variable that keeps content (also how the two-process reader's child learns it)
KEEP_CONTENT_ENV: Final = "TAILTRIAGE_KEEP_CONTENT"
#: nesting depth inspected; deeper values are replaced whole (hostile input, not telemetry)
MAX_DEPTH: Final = 32
#: keys classified and remembered; beyond this (hostile input) keys are classified each time
_KEY_CACHE_SIZE: Final = 100_000

# Key names (lower-cased) that are credentials whatever their value.
_SECRET_KEY: Final = re.compile(
    r"authorization|api[-_]?key|apikey|cookie|passw(or)?d|secret|credential|private[-_]?key"
    r"|access[-_]?key|session[-_]?id|(access|auth|id|refresh|security|bearer|session|csrf|xsrf"
    r"|hf|amz|goog|github|slack|client)[-_.]?token|x-.*-token|^token$|bearer"
)
# a key ending in a ``token`` word (``x.session.token``), not ``tokens``, ``token_count``,
# ``time_to_first_token`` or ``gen_ai.token.type``
_TOKEN_WORD: Final = re.compile(r"(^|[.\-/:])token$")
# Content: prompts, completions, chat messages, SQL (dropped unless kept).
_CONTENT_KEY: Final = re.compile(
    r"(^|\.)(prompt|prompts|completion|completions|input_messages|output_messages|messages"
    r"|system_instructions|statement)($|\.)|(^|\.)(input|output)\.(messages|value)($|\.)"
    r"|(^|\.)query\.text$|^db\.query\.parameter"
)

_TOKEN_SHAPES: Final = re.compile(
    r"(?i:\b(bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]{6,}"
    r"|\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{12,}"
    r"|\bhf_[A-Za-z0-9]{12,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]*"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
)
_URL_USERINFO: Final = re.compile(r"(?i)([a-z][a-z0-9+.-]*://)[^/@\s?#]+@")
_NAMED_SECRET: Final = re.compile(
    r"(?i)((?:^|[?&;,\s{\"'])(?:(?:key|sig|signature|pwd|token)(?=[\"']?\s*=)|api[-_]?key"
    r"|x-api-key|access[-_]?token|auth[-_]?token|id[-_]?token|refresh[-_]?token|password"
    r"|passwd|secret|client[-_]?secret|credentials?|authorization|x-amz-security-token"
    r"|x-hf-token|x-goog-api-key|cookie|set-cookie)[\"']?\s*[=:]\s*[\"']?)[^&#;\s\"',}]+"
)

#: single bytes whose presence in serialised attributes calls for the deep pass: ``=`` and
#: ``@`` (key=value secrets, URL credentials); one C-speed memchr scan each
_GATE_BYTES: Final = (b"=", b"@")
#: byte strings that call for it: a string value opening a JSON object or array (JSON inside
#: a string), then the token shapes of ``_TOKEN_SHAPES``
_NEEDLES: Final = (b'"{', b'"[', b"sk-", b"hf_", b"earer ", b"asic ", b"eyJ", b"AKIA")

_keep: ContextVar[bool] = ContextVar(
    "keep_content", default=os.environ.get(KEEP_CONTENT_ENV, "") not in ("", "0")
)
_key_cache: dict[str, int] = {}
_SECRET, _TOKENISH, _CONTENT = 1, 2, 4


@contextlib.contextmanager
def keeping_content(keep: bool = True) -> Iterator[None]:
    """Within the block, prompts, completions and SQL are kept (``keep``) or dropped."""
    token = _keep.set(keep)
    previous = os.environ.get(KEEP_CONTENT_ENV)
    os.environ[KEEP_CONTENT_ENV] = "1" if keep else "0"  # for child processes of a reader
    try:
        yield
    finally:
        _keep.reset(token)
        if previous is None:
            os.environ.pop(KEEP_CONTENT_ENV, None)
        else:
            os.environ[KEEP_CONTENT_ENV] = previous


def _classify(key: str) -> int:
    hit = _key_cache.get(key)
    if hit is None:
        low = key.lower()
        hit = (
            (_SECRET if _SECRET_KEY.search(low) else 0)
            | (_TOKENISH if _TOKEN_WORD.search(low) else 0)
            | (_CONTENT if _CONTENT_KEY.search(low) else 0)
        )
        if len(_key_cache) < _KEY_CACHE_SIZE:
            _key_cache[key] = hit
    return hit


def is_secret_key(key: str) -> bool:
    """True when an attribute named ``key`` holds a credential (case-insensitive)."""
    return bool(_classify(key) & _SECRET)


def needs_redaction(keys: Iterable[str], blob: bytes | memoryview, nested: bool = False) -> bool:
    """Could :func:`redact_value` change attributes with these ``keys`` whose serialised JSON
    is ``blob``?  The one secret rule every reader applies before storing attributes as they
    are (False for nearly every span, cheaply):

    * key names: one of ``keys`` names a credential, a ``token`` word or content;
    * values: ``blob`` holds a credential pair, URL user info, a token shape or JSON inside a
      string;
    * ``nested``: some value is a map or a list (its inner keys are not among ``keys``).

    ``keys`` may be the union of many spans' keys and ``blob`` their JSON back to back (a
    batch reader asks once for all of them)."""
    return nested or _suspicious_bytes(blob) or any(_classify(k) for k in keys)


def _suspicious_bytes(blob: bytes | memoryview) -> bool:
    return any(b in blob for b in _GATE_BYTES) or any(n in blob for n in _NEEDLES)


def redact_text(value: str, depth: int = 0) -> str:
    """``value`` with secrets replaced (token shapes, credential pairs, URL user info); a
    string holding a JSON object or array is redacted as that JSON."""
    stripped = value.lstrip()
    if stripped[:1] in ("{", "[") and depth < MAX_DEPTH:
        try:
            doc = orjson.loads(value)
        except orjson.JSONDecodeError:
            pass
        else:
            if isinstance(doc, dict | list):
                return orjson.dumps(_redact_any("", doc, depth + 1)).decode()
    out = _TOKEN_SHAPES.sub(_keep_scheme, value)
    if "@" in out:
        out = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", out)
    if "=" in out or ":" in out:
        out = _NAMED_SECRET.sub(lambda m: m.group(1) + REDACTED, out)
    return out


def _keep_scheme(m: re.Match[str]) -> str:
    scheme = m.group(1)
    return f"{m.group(0)[: m.end(1) - m.start(0)]} {REDACTED}" if scheme else REDACTED


def redact_value(key: str, value: object) -> object:
    """The value to store for attribute ``key`` (any depth)."""
    return _redact_any(key, value, 0)


def _redact_any(key: str, value: object, depth: int) -> object:
    kind = _classify(key) if key else 0
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind & _SECRET:
        return REDACTED
    if kind & _TOKENISH and not number:
        return REDACTED
    if kind & _CONTENT and not number and value is not None and not _keep.get():
        return DROPPED
    if isinstance(value, str):
        return redact_text(value, depth)
    if depth >= MAX_DEPTH and isinstance(value, dict | list | tuple):
        return REDACTED
    if isinstance(value, dict):
        return {k: _redact_any(str(k), v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_any(key, v, depth + 1) for v in value]
    return value


def redact_json_text(text: str) -> str:
    """A JSON object's text (labels, event attributes) with every value redacted."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return redact_text(text)
    return orjson.dumps(_redact_any("", doc, 0), option=orjson.OPT_SORT_KEYS).decode()


def _redact_column(table: pa.Table, name: str, redact: Callable[[str], str]) -> pa.Table:
    """``table`` with column ``name`` redacted, one call per distinct value (labels and event
    texts repeat: a million samples have a few hundred label sets)."""
    if table.num_rows == 0:
        return table
    column = table[name]
    distinct = pc.unique(column)
    before = distinct.to_pylist()
    after = [None if v is None else redact(v) for v in before]
    if after == before:
        return table
    index = pc.index_in(column, value_set=distinct)
    redacted = pc.take(pa.array(after, type=pa.string()), index)
    return table.set_column(table.schema.get_field_index(name), name, redacted)


#: RE2 test for text :func:`redact_text` may change: a superset of its patterns (a ``{``/``[``
#: that may open JSON, the ``@``/``=``/``:`` of URL credentials and credential pairs, the
#: literal starts of the token shapes), so text without a hit is left as it is
_MAYBE_SECRET_RE2: Final = (
    r"[{\[@=:]|(?i:bearer|basic|token)|sk-|hf_|AKIA|ASIA|eyJ|gh[pousr]_|xox[abprs]-"
)
#: the same superset as byte strings, looked for in a whole column's bytes at once (a few
#: C-speed scans; RE2 value by value costs about a microsecond per value)
_MAYBE_SECRET_BYTES: Final = (
    *(b"{", b"[", b"@", b"=", b":", b"sk-", b"hf_", b"akia", b"asia"),
    *(b"bearer", b"basic", b"token", b"eyj", b"gh", b"xox"),
)  # lower case: looked for in the lower-cased bytes


def _may_hold_secret(column: pa.ChunkedArray) -> bool:
    """False when no value of ``column`` can hold text :func:`redact_text` would change."""
    for chunk in column.chunks:
        data = chunk.buffers()[2]  # the UTF-8 bytes of every value (a superset when sliced)
        if data is None:
            continue
        low = data.to_pybytes().lower()
        if any(b in low for b in _MAYBE_SECRET_BYTES):
            return True
    return False


def _redact_strings_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if not _may_hold_secret(column):
        return column
    distinct = pc.unique(column)
    suspects = pc.filter(distinct, pc.match_substring_regex(distinct, _MAYBE_SECRET_RE2))
    pairs = [(v, redact_text(v)) for v in suspects.to_pylist() if v is not None]
    changed = [(v, r) for v, r in pairs if r != v]
    if not changed:
        return column
    olds = pa.array([v for v, _ in changed], type=column.type)
    news = pa.array([r for _, r in changed], type=column.type)
    replaced = pc.take(news, pc.index_in(column, value_set=olds))
    return pc.coalesce(replaced, column)


def redact_strings(table: pa.Table) -> pa.Table:
    """``table`` with the secrets in its text columns replaced (:func:`redact_text`): for
    query results read back from a database (ClickHouse) whose values no reader redacted.
    A column whose bytes hold none of the characters and words a secret needs is passed
    whole; in the others only the distinct values an RE2 scan flags go through Python."""
    out = table
    for i, f in enumerate(table.schema):
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            before = table.column(i)
            column = _redact_strings_column(before)
            if column is not before:
                out = out.set_column(i, f, column)
    return out


def redact_capture(capture: Capture) -> Capture:
    """The capture with its span names (``GET https://user:pw@host/...``), metric labels,
    event messages and event attributes redacted (span attributes are redacted by their
    readers, value by value, as they are read)."""
    spans = _redact_column(capture.spans, "name", redact_text)
    series = _redact_column(capture.series, "labels", redact_json_text)
    events = _redact_column(capture.events, "message", redact_text)
    events = _redact_column(events, "attributes", redact_json_text)
    if spans is capture.spans and series is capture.series and events is capture.events:
        return capture
    return capture.replace(spans=spans, series=series, events=events)
