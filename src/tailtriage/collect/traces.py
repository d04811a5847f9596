"""Traces of an incident window from a trace store's query API, written as bundle files.

* Jaeger query API (``jaeger+http://host:16686``): ``GET /api/services``, then per service
  ``GET /api/traces?service=S&start=µs&end=µs&limit=N``; written as the API answers,
  ``{"data": [trace, ...]}`` (``sources.jaeger`` reads it).
* Tempo (``tempo+http://host:3200``): ``GET /api/search?start=s&end=s&limit=N``, then
  ``GET /api/traces/<id>`` (JSON) per hit; written as OTLP/JSON, one trace per line
  (``sources.otlp_json`` reads it).
* ClickHouse ``otel_traces`` (``clickhouse://user@host:8123/db?table=otel_traces``,
  ``chdb:///dir?table=otel_traces``): the slowest root spans of the window, their traces
  written as OTLP/JSON lines (``collect.clickhouse_traces``).

Stores cap what a search returns, so the traces kept are the slowest first: search results
are ordered by duration before the per-trace fetches and before the ``max_traces`` cut, and
the manifest says when a store's limit was reached.  A plain ``http(s)://`` URL is probed:
Jaeger when ``/api/services`` answers, else Tempo."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tailtriage.collect._http import get_json, shown
from tailtriage.collect.manifest import SourceOutcome
from tailtriage.errors import BackendError
from tailtriage.sources.redact import REDACTED, is_secret_key, redact_text
from tailtriage.store.clickhouse_url import is_clickhouse_url

#: traces asked of a store per search (Jaeger per service); stores cap this themselves
SEARCH_LIMIT = 1_000
#: traces written at most; the slowest are kept
MAX_TRACES = 1_000

Reader = Callable[[str, Path, tuple[float, float], float, int], SourceOutcome]


def collect_traces(
    url: str, out: Path, window: tuple[float, float], timeout: float, max_traces: int = MAX_TRACES
) -> SourceOutcome:
    """The window's traces from the store at ``url`` (see the module doc for the schemes)."""
    if is_clickhouse_url(url):
        from tailtriage.collect.clickhouse_traces import collect_clickhouse

        return collect_clickhouse(url, out, window, timeout, max_traces)
    scheme, _, rest = url.partition("+")
    if rest and scheme in READERS:
        return READERS[scheme](rest, out, window, timeout, max_traces)
    try:
        get_json(_join(url, "/api/services"), "Jaeger", timeout)
    except BackendError as exc:
        if "HTTP 404" not in str(exc):
            return SourceOutcome("traces", shown(url), errors=(str(exc),))
        return collect_tempo(url, out, window, timeout, max_traces)
    return collect_jaeger(url, out, window, timeout, max_traces)


def redact_attributes(node: Any, redacted: dict[str, int]) -> None:
    """Redact credentials in place in OTLP ``attributes`` (``{key, value: {stringValue}}``)
    and Jaeger ``tags``/``fields`` (``{key, value}``) anywhere under ``node``; ``redacted``
    counts the keys whose values changed."""
    if isinstance(node, list):
        for item in node:
            redact_attributes(item, redacted)
        return
    if not isinstance(node, dict):
        return
    key = node.get("key")
    if isinstance(key, str) and "value" in node:
        value = node["value"]
        # OTLP: {"key", "value": {"stringValue": ...}}; Jaeger: {"key", "type", "value"}
        holder, field = (value, "stringValue") if isinstance(value, dict) else (node, "value")
        old = holder.get(field)
        if is_secret_key(key) and old is not None:
            new: Any = REDACTED
        elif isinstance(old, str):
            new = redact_text(old)
        else:
            return
        if new != old:
            holder[field] = new
            redacted[key] = redacted.get(key, 0) + 1
        return
    for child in node.values():
        redact_attributes(child, redacted)


def redaction_lines(redacted: dict[str, int]) -> tuple[str, ...]:
    return tuple(f"attribute {k} redacted (x{n})" for k, n in sorted(redacted.items()))


def _join(base: str, path: str, **params: Any) -> str:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    return base.rstrip("/") + path + query


def _trace_seconds(trace: Any) -> float:
    """A Jaeger trace's extent in seconds (its spans' earliest start to latest end)."""
    spans = trace.get("spans") if isinstance(trace, dict) else None
    times = [
        (s["startTime"], s["startTime"] + s["duration"])
        for s in spans or ()
        if isinstance(s, dict)
        and isinstance(s.get("startTime"), int)
        and isinstance(s.get("duration"), int)
    ]
    if not times:
        return 0.0
    return float(max(e for _, e in times) - min(s for s, _ in times)) / 1e6


def collect_jaeger(
    url: str, out: Path, window: tuple[float, float], timeout: float, max_traces: int = MAX_TRACES
) -> SourceOutcome:
    target = shown(url)
    start_us, end_us = int(window[0] * 1e6), int(window[1] * 1e6)
    try:
        services_doc = get_json(_join(url, "/api/services"), "Jaeger", timeout)
    except BackendError as exc:
        return SourceOutcome("traces", target, ("GET /api/services",), errors=(str(exc),))
    services = sorted(s for s in services_doc.get("data") or () if isinstance(s, str))
    asked, errors, notes = ["GET /api/services"], [], []
    traces: dict[str, Any] = {}
    for service in services:
        params = {"service": service, "start": start_us, "end": end_us, "limit": SEARCH_LIMIT}
        asked.append(f"GET /api/traces?service={service}")
        try:
            doc = get_json(_join(url, "/api/traces", **params), "Jaeger", timeout)
        except BackendError as exc:
            errors.append(f"service {service}: {exc}")
            continue
        got = [t for t in doc.get("data") or () if isinstance(t, dict) and t.get("traceID")]
        if len(got) >= SEARCH_LIMIT:
            notes.append(f"service {service}: the store's limit ({SEARCH_LIMIT}) was reached")
        for t in got:
            traces.setdefault(str(t["traceID"]), t)
    kept = sorted(traces.values(), key=_trace_seconds, reverse=True)
    if len(kept) > max_traces:
        notes.append(f"kept the {max_traces} slowest of {len(kept)} traces")
        kept = kept[:max_traces]
    files: tuple[str, ...] = ()
    redacted: dict[str, int] = {}
    redact_attributes(kept, redacted)
    if kept:
        (out / "traces").mkdir(parents=True, exist_ok=True)
        doc = {"data": kept, "total": 0, "limit": 0, "offset": 0, "errors": None}
        (out / "traces" / "jaeger.json").write_bytes(orjson.dumps(doc) + b"\n")
        files = ("traces/jaeger.json",)
    elif not errors:
        notes.append("no traces in the window")
    return SourceOutcome(
        "traces",
        target,
        tuple(asked),
        files,
        len(kept),
        tuple(errors),
        tuple(notes),
        redaction_lines(redacted),
    )


def collect_tempo(
    url: str, out: Path, window: tuple[float, float], timeout: float, max_traces: int = MAX_TRACES
) -> SourceOutcome:
    target = shown(url)
    params = {"start": int(window[0]), "end": int(window[1]) + 1, "limit": SEARCH_LIMIT}
    asked = [f"GET /api/search?start={params['start']}&end={params['end']}"]
    try:
        found = get_json(_join(url, "/api/search", **params), "Tempo", timeout)
    except BackendError as exc:
        return SourceOutcome("traces", target, tuple(asked), errors=(str(exc),))
    hits = [h for h in found.get("traces") or () if isinstance(h, dict) and h.get("traceID")]
    notes, errors, lines = [], [], []
    redacted: dict[str, int] = {}
    if len(hits) >= SEARCH_LIMIT:
        notes.append(f"the store's search limit ({SEARCH_LIMIT}) was reached")
    hits.sort(key=lambda h: float(h.get("durationMs") or 0), reverse=True)
    if len(hits) > max_traces:
        notes.append(f"kept the {max_traces} slowest of {len(hits)} traces")
        hits = hits[:max_traces]
    for hit in hits:
        trace_id = str(hit["traceID"])
        asked.append(f"GET /api/traces/{trace_id}")
        try:
            doc = get_json(
                _join(url, f"/api/traces/{urllib.parse.quote(trace_id)}"), "Tempo", timeout
            )
        except BackendError as exc:
            errors.append(f"trace {trace_id}: {exc}")
            if "cannot read" in str(exc):  # the store went away: stop, keep what came back
                break
            continue
        # Tempo answers {"batches": [...]} (v1) or OTLP's {"resourceSpans": [...]}
        batches = doc.get("batches", doc.get("resourceSpans")) if isinstance(doc, dict) else None
        if isinstance(batches, list) and batches:
            redact_attributes(batches, redacted)
            lines.append(orjson.dumps({"resourceSpans": batches}))
    files: tuple[str, ...] = ()
    if lines:
        (out / "traces").mkdir(parents=True, exist_ok=True)
        (out / "traces" / "tempo.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        files = ("traces/tempo.jsonl",)
    elif not errors:
        notes.append("no traces in the window")
    return SourceOutcome(
        "traces",
        target,
        tuple(asked),
        files,
        len(lines),
        tuple(errors),
        tuple(notes),
        redaction_lines(redacted),
    )


READERS: dict[str, Reader] = {"jaeger": collect_jaeger, "tempo": collect_tempo}
