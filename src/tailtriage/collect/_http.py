"""GET a JSON document from a query API (Tempo, Jaeger) with a timeout; every failure is one
BackendError line naming the server, never its credentials."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson

from tailtriage.errors import BackendError
from tailtriage.sources.redact import redact_text


def shown(url: str) -> str:
    """``scheme://host:port/path`` of ``url``, credentials and query left out."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def get_json(url: str, what: str, timeout: float) -> Any:
    """The decoded JSON body of ``GET url``; ``what`` names the API in messages."""
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    where = shown(url)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        raise BackendError(f"{what} at {where} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or exc.__class__.__name__
        raise BackendError(redact_text(f"cannot read {what} at {where}: {reason}")) from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BackendError(f"{what} at {where} did not answer JSON") from None
