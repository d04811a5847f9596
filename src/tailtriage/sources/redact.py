"""Redaction of secrets on ingest (design section 6).

Attribute keys that name a credential (``authorization``, ``api-key``, ``x-api-key``, ``cookie``,
...) get the value ``[REDACTED]`` whatever it was; string values that carry credentials in a
URL (``https://user:pass@host``, ``?api_key=...``, ``&token=...``) keep the URL with only the
secret part replaced.  Every source calls this before a value reaches a Capture, so secrets
never reach a saved capture or a report."""

from __future__ import annotations

import re
from typing import Final

REDACTED: Final = "[REDACTED]"

# Substrings of a key (lower-cased) that mark its value as a secret.  ``token`` alone is not
# here on purpose: ``gen_ai.usage.output_tokens`` is a count, not a credential.
_SECRET_KEY_PARTS: Final = (
    "authorization",
    "api-key",
    "api_key",
    "apikey",
    "x-api-key",
    "cookie",
    "password",
    "passwd",
    "secret",
    "access_token",
    "access-token",
    "auth_token",
    "auth-token",
    "bearer",
)

_URL_USERINFO: Final = re.compile(r"(?i)([a-z][a-z0-9+.-]*://)[^/@\s?#]+@")
_URL_SECRET_PARAM: Final = re.compile(
    r"(?i)([?&;](?:api[-_]?key|x-api-key|key|token|access[-_]?token|auth[-_]?token|id[-_]?token"
    r"|refresh[-_]?token|password|passwd|secret|client[-_]?secret|sig|signature|credentials?)=)"
    r"[^&#;\s]*"
)

_key_cache: dict[str, bool] = {}


def is_secret_key(key: str) -> bool:
    """True when an attribute named ``key`` holds a credential (case-insensitive)."""
    hit = _key_cache.get(key)
    if hit is None:
        low = key.lower()
        hit = any(part in low for part in _SECRET_KEY_PARTS)
        if len(_key_cache) < 100_000:  # keys repeat; bound the cache against hostile input
            _key_cache[key] = hit
    return hit


def redact_text(value: str) -> str:
    """``value`` with URL credentials and secret query parameters replaced."""
    if "@" not in value and "=" not in value:  # fast path: nothing that could hold a secret
        return value
    out = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", value)
    return _URL_SECRET_PARAM.sub(lambda m: m.group(1) + REDACTED, out)


def redact_value(key: str, value: object) -> object:
    """The value to store for attribute ``key``."""
    if is_secret_key(key):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    return value
