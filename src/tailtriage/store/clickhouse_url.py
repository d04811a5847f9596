"""Where an ``otel_traces`` table lives: ``clickhouse://`` and ``chdb://`` URLs.

* ``clickhouse://user@host:8123/db?table=otel_traces`` (``clickhouses://`` for TLS): a server,
  reached with ``clickhouse-connect`` over HTTP(S);
* ``chdb:///path/to/dir?table=otel_traces``: the same engine in-process (chDB) on a local
  database folder.

Optional query parameters: ``since`` and ``until`` (unix seconds or RFC 3339), the window of
span start times to read.  The password never comes from the URL (a URL lands in shell history,
logs and reports): it is read from ``TAILTRIAGE_CLICKHOUSE_PASSWORD`` or ``CLICKHOUSE_PASSWORD``.
A password written in the URL is refused rather than silently used or echoed.

The CLI types PATH as a file path, and ``pathlib`` collapses ``//``; ``chdb:/dir`` and
``clickhouse:/host`` are therefore accepted as the same URLs."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from tailtriage.errors import ConfigError

PASSWORD_VARIABLES = ("TAILTRIAGE_CLICKHOUSE_PASSWORD", "CLICKHOUSE_PASSWORD")
DEFAULT_TABLE = "otel_traces"
_SCHEMES = ("clickhouse", "clickhouses", "chdb")
_URL = re.compile(r"^(clickhouses?|chdb):/", re.IGNORECASE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_clickhouse_url(path: str | os.PathLike[str] | None) -> bool:
    """True when ``path`` names a ClickHouse or chDB table rather than a file."""
    return path is not None and bool(_URL.match(os.fspath(path)))


@dataclass(frozen=True)
class ClickHouseTarget:
    """A parsed ClickHouse / chDB URL (no password: see :func:`password`)."""

    scheme: str  # clickhouse | clickhouses | chdb
    database: str
    table: str = DEFAULT_TABLE
    host: str | None = None
    port: int | None = None
    user: str | None = None
    path: str | None = None  # chDB database folder
    since: str | None = None
    until: str | None = None

    @property
    def in_process(self) -> bool:
        return self.scheme == "chdb"

    @property
    def secure(self) -> bool:
        return self.scheme == "clickhouses"

    @property
    def where(self) -> str:
        """The host (or chDB folder) for error messages: never the password."""
        if self.in_process:
            return f"chdb:{self.path}"
        return f"{self.host}:{self.port}"

    @property
    def qualified_table(self) -> str:
        return f"`{self.database}`.`{self.table}`"

    def display(self) -> str:
        """The URL as shown in outputs (user and host, never a password)."""
        if self.in_process:
            return f"chdb://{self.path}?table={self.table}&database={self.database}"
        user = f"{self.user}@" if self.user else ""
        return f"{self.scheme}://{user}{self.host}:{self.port}/{self.database}?table={self.table}"


def password(env: Mapping[str, str] | None = None) -> str:
    """The ClickHouse password from the environment ('' when none is set)."""
    e = os.environ if env is None else env
    for name in PASSWORD_VARIABLES:
        if e.get(name):
            return e[name]
    return ""


def _ident(value: str, what: str) -> str:
    if not _IDENT.match(value):
        raise ConfigError(f"ClickHouse {what} {value!r}: expected letters, digits and _")
    return value


def parse_url(url: str | os.PathLike[str]) -> ClickHouseTarget:
    """Parse a ``clickhouse://`` / ``chdb://`` URL; ConfigError when it is malformed."""
    text = os.fspath(url)
    m = _URL.match(text)
    if not m:
        raise ConfigError("expected clickhouse://user@host:8123/db?table=... or chdb:///dir")
    scheme = m.group(1).lower()
    rest = text[m.end() :]
    if not rest.startswith("/"):  # pathlib collapsed "//" to "/"
        rest = "/" + rest
    if scheme == "chdb":
        return _parse_chdb(rest)
    parts = urlsplit(f"{scheme}:/{rest}")
    if parts.password is not None:
        raise ConfigError(
            f"{scheme}://{parts.hostname}: put the password in TAILTRIAGE_CLICKHOUSE_PASSWORD, "
            "not in the URL"
        )
    query = _query(parts.query)
    if not parts.hostname:
        raise ConfigError(f"{scheme} URL without a host")
    try:
        port = parts.port or (8443 if scheme == "clickhouses" else 8123)
    except ValueError as exc:
        raise ConfigError(f"{scheme}://{parts.hostname}: invalid port") from exc
    db = parts.path.strip("/") or query.get("database", "default")
    return ClickHouseTarget(
        scheme=scheme,
        database=_ident(db, "database"),
        table=_ident(query.get("table", DEFAULT_TABLE), "table"),
        host=parts.hostname,
        port=port,
        user=unquote(parts.username) if parts.username else None,
        since=query.get("since"),
        until=query.get("until"),
    )


def _parse_chdb(rest: str) -> ClickHouseTarget:
    # "chdb:///abs/dir" arrives as "///abs/dir"; "chdb:/abs/dir" (collapsed) as "/abs/dir"
    body, _, qs = rest.partition("?")
    folder = "/" + body.lstrip("/")
    query = _query(qs)
    if folder == "/":
        raise ConfigError("chdb URL without a database folder: chdb:///path/to/dir")
    return ClickHouseTarget(
        scheme="chdb",
        database=_ident(query.get("database", "otel"), "database"),
        table=_ident(query.get("table", DEFAULT_TABLE), "table"),
        path=str(Path(unquote(folder))),
        since=query.get("since"),
        until=query.get("until"),
    )


def _query(qs: str) -> dict[str, str]:
    known = {"table", "database", "since", "until"}
    out: dict[str, str] = {}
    for key, values in parse_qs(qs, keep_blank_values=True).items():
        if key not in known:
            raise ConfigError(
                f"unknown ClickHouse URL parameter {key!r}; known: {', '.join(sorted(known))}"
            )
        out[key] = values[-1]
    return out
