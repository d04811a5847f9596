"""The one way in: ``open_input(PATH or URL, since, until)`` gives the Store every command
reads, and ``load_capture`` the local Capture of commands that need the rows themselves.

A ``clickhouse://`` or ``chdb://`` URL opens a ClickHouseStore: the per-span work runs in
ClickHouse over [since, until), and only aggregates come back.  Anything else is read into a
Capture (a saved capture, a bundle folder, a single telemetry file, and/or a live Prometheus
over [since, until]); requests and stages are derived from the spans once, over everything,
and a DuckDBStore runs the SQL over it.  ``since`` and ``until`` follow ``model.timeparse``:
unix seconds, RFC 3339, or a duration ago (``30m``, ``1h30m``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from tailtriage.derive.derive import derive
from tailtriage.derive.rules import load_rules
from tailtriage.errors import ConfigError, InputError
from tailtriage.model import Capture, concat
from tailtriage.model.timeparse import parse_time
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_bundle, read_file
from tailtriage.sources.events_merge import dedupe_events
from tailtriage.sources.plausible import plausible
from tailtriage.sources.redact import keeping_content, redact_capture
from tailtriage.store.base import DuckDBStore, InputStore
from tailtriage.store.clickhouse_url import is_clickhouse_url

Time = str | float | None
#: how far back a live Prometheus is read without --since: an incident is usually this recent
DEFAULT_RANGE_S = 3600.0


def open_input(
    path: str | Path | None,
    since: Time = None,
    until: Time = None,
    *,
    rules: str | Path | None = None,
    prometheus: str | None = None,
    progress: Callable[[int], None] | None = None,
    keep_content: bool = False,
) -> InputStore:
    """The Store over PATH (or a ClickHouse URL) and/or a live Prometheus; close it after use.

    A ClickHouse URL alone stays in ClickHouse; with ``prometheus`` too, its requests and
    stages are pulled into one local Capture with the metrics."""
    lo, hi = _times(since, until)
    if path is not None and is_clickhouse_url(path) and prometheus is None:
        from tailtriage.store.clickhouse import open_store

        return open_store(
            str(path), rules=None if rules is None else str(rules), since=lo, until=hi
        )
    return DuckDBStore(
        load_capture(
            path,
            rules=rules,
            prometheus=prometheus,
            since=lo,
            until=hi,
            progress=progress,
            keep_content=keep_content,
        )
    )


def _times(since: Time, until: Time) -> tuple[float | None, float | None]:
    """[since, until] as unix seconds, both resolved against one ``now``."""
    now = time.time()
    lo = None if since is None else parse_time(since, "--since", now=lambda: now)
    hi = None if until is None else parse_time(until, "--until", now=lambda: now)
    return lo, hi


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
    ``chdb://`` PATH derives them inside ClickHouse over [since, until) and brings them here.
    Secrets are redacted; prompts, completions and SQL dropped unless ``keep_content``."""
    lo, hi = _times(since, until)
    with keeping_content(keep_content):
        return _load(path, rules, prometheus, lo, hi, progress)


def _load(
    path: str | Path | None,
    rules: str | Path | None,
    prometheus: str | None,
    since: float | None,
    until: float | None,
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
            since=since,
            until=until,
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


def _read_prometheus(url: str, since: float | None, until: float | None) -> Capture:
    # Imported lazily: the live reader pulls in an HTTP client that file ingest never needs.
    from tailtriage.sources.prometheus_live import read_prometheus

    end = time.time() if until is None else until
    start = end - DEFAULT_RANGE_S if since is None else since
    if start >= end:
        raise ConfigError(f"--since ({start}) must be before --until ({end})")
    return read_prometheus(url, start, end)
