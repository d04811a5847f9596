"""Load a Capture from whatever PATH the user gave: a saved capture (DuckDB file), a bundle
folder, a single telemetry file, and/or a live Prometheus; then derive requests and stages
from the spans once, over everything."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from tailtriage.errors import ConfigError, InputError
from tailtriage.model import Capture, concat
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_bundle, read_file
from tailtriage.sources.derive import derive
from tailtriage.sources.events_merge import dedupe_events
from tailtriage.sources.plausible import plausible
from tailtriage.sources.redact import keeping_content, redact_capture
from tailtriage.sources.rules import load_rules
from tailtriage.store.clickhouse_url import is_clickhouse_url

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_time(text: str, now: Callable[[], float] = time.time) -> float:
    """Unix seconds from unix seconds, RFC 3339, or a duration ago (``30m``, ``2h``)."""
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    m = _DURATION.match(s)
    if m:
        return now() - float(m.group(1)) * _UNIT_S[m.group(2)]
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(
            f"time {text!r}: expected unix seconds, RFC 3339, or a duration like 30m"
        ) from exc
    if dt.tzinfo is None:
        raise ConfigError(f"time {text!r}: RFC 3339 times need a zone (Z or +hh:mm)")
    return dt.timestamp()


def load_capture(
    path: str | Path | None,
    *,
    rules: str | Path | None = None,
    prometheus: str | None = None,
    since: str | float | None = None,
    until: str | float | None = None,
    progress: Callable[[int], None] | None = None,
    keep_content: bool = False,
) -> Capture:
    """Read PATH (bundle folder, single file or saved capture) and/or a live Prometheus over
    [since, until], and derive requests and stages from the spans.  A ``clickhouse://`` or
    ``chdb://`` PATH derives them inside ClickHouse over [since, until) (pipeline.clickhouse).
    Secrets are redacted; prompts, completions and SQL dropped unless ``keep_content``."""
    with keeping_content(keep_content):
        return _load(path, rules, prometheus, since, until, progress)


def _load(
    path: str | Path | None,
    rules: str | Path | None,
    prometheus: str | None,
    since: str | float | None,
    until: str | float | None,
    progress: Callable[[int], None] | None,
) -> Capture:
    rule_set = load_rules(rules)
    options = ReadOptions(progress=progress)
    parts: list[Capture] = []
    if path is not None and is_clickhouse_url(path):
        # the per-span work runs in ClickHouse; requests and stages come back, spans do not
        from tailtriage.store.clickhouse import ingest, open_store

        with open_store(
            str(path),
            rules=None if rules is None else str(rules),
            since=None if since is None else _as_time(since),
            until=None if until is None else _as_time(until),
        ) as store:
            parts.append(ingest(store))
    elif path is not None:
        p = Path(path)
        if not p.exists():
            raise InputError("no such file or folder", path=str(p))
        parts.append(read_bundle(p, options) if p.is_dir() else read_file(p, options))
    if prometheus is not None:
        parts.append(_read_prometheus(prometheus, since, until))
    if not parts:
        raise ConfigError("nothing to load: give a PATH or --prometheus URL")
    return derive(_merge_events(redact_capture(plausible(concat(parts)))), rule_set)


def _merge_events(capture: Capture) -> Capture:
    events, dropped = dedupe_events(capture.events)
    if not dropped:
        return capture
    quality = dict(capture.metadata.quality)
    quality["events.duplicate"] = quality.get("events.duplicate", 0) + dropped
    meta = dataclasses.replace(capture.metadata, quality=quality)
    return capture.replace(events=events, metadata=meta)


def _read_prometheus(url: str, since: str | float | None, until: str | float | None) -> Capture:
    # Imported lazily: the live reader pulls in an HTTP client that file ingest never needs.
    from tailtriage.sources.prometheus_live import read_prometheus

    end = time.time() if until is None else _as_time(until)
    start = end - 3600.0 if since is None else _as_time(since)
    if start >= end:
        raise ConfigError(f"--since ({start}) must be before --until ({end})")
    return read_prometheus(url, start, end)


def _as_time(v: str | float) -> float:
    return float(v) if isinstance(v, int | float) else parse_time(v)
