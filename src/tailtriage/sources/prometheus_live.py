"""Read the catalog's metrics from a live Prometheus through its HTTP API.

``read_prometheus(url, start, end, step)`` runs one ``/api/v1/query_range`` per catalog
concept (a raw ``{__name__=~"..."}`` selector over every spelling, so series come back as
exported) and returns them as a Capture's ``series``, plus pod lifecycle ``events`` derived
from the kube-state-metrics pod gauges (there is no kubectl output to give them).  Long
ranges are split so no query asks for more than Prometheus' 11,000 points per series.

Credentials: a bearer token is read from ``TAILTRIAGE_PROMETHEUS_TOKEN`` at call time and
sent only in the ``Authorization`` header; ``user:password@`` in the URL becomes basic auth.
Neither is stored: the capture and every message name the server as ``scheme://host:port``.
Every failure is one BackendError line naming that host."""

from __future__ import annotations

import base64
import functools
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
import pyarrow as pa

from tailtriage.errors import BackendError, ConfigError
from tailtriage.model import Capture, FileProvenance, Metadata
from tailtriage.model.metric_catalog import live_queries
from tailtriage.sources._safety import network_timeout
from tailtriage.sources._series import SeriesRows
from tailtriage.sources.kubernetes import pod_events_from_kube_metrics
from tailtriage.sources.prometheus_api import ResponseError, parse_response

FORMAT = "prometheus_live"
TOKEN_ENV = "TAILTRIAGE_PROMETHEUS_TOKEN"
#: Prometheus refuses query_range results with more points per series than this
MAX_POINTS = 11_000


@dataclass(frozen=True)
class _Endpoint:
    """Where to send queries, and the credential-free name to show for it."""

    api: str  # .../api/v1/query_range
    shown: str  # scheme://host:port, safe to print and store
    headers: tuple[tuple[str, str], ...]


def _endpoint(url: str) -> _Endpoint:
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port out of range or not a number
    except ValueError as exc:
        raise ConfigError(f"Prometheus URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"Prometheus URL must be http(s)://host[:port][/prefix], got {url!r}")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = f"{host}:{port}" if port else host
    shown = f"{parts.scheme}://{netloc}"
    headers = [("Accept", "application/json"), ("User-Agent", "tailtriage")]
    token = os.environ.get(TOKEN_ENV)
    if token:
        headers.append(("Authorization", f"Bearer {token}"))
    elif parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        pw = urllib.parse.unquote(parts.password or "")
        basic = base64.b64encode(f"{user}:{pw}".encode()).decode()
        headers.append(("Authorization", f"Basic {basic}"))
    path = parts.path.rstrip("/")
    api = urllib.parse.urlunsplit((parts.scheme, netloc, f"{path}/api/v1/query_range", "", ""))
    return _Endpoint(api, shown + path, tuple(headers))


def _windows(start: float, end: float, step: float) -> list[tuple[float, float]]:
    """[start, end] cut into windows of at most MAX_POINTS - 1 steps, without overlap."""
    span = step * (MAX_POINTS - 1)
    out = []
    lo = start
    while lo <= end:
        hi = min(lo + span, end)
        out.append((lo, hi))
        lo = hi + step
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _fetch(ep: _Endpoint, query: str, lo: float, hi: float, step: float, timeout: float) -> Any:
    params = urllib.parse.urlencode({"query": query, "start": lo, "end": hi, "step": step})
    return _get(ep, params, timeout)


def _get(ep: _Endpoint, params: str, timeout: float) -> Any:
    req = urllib.request.Request(f"{ep.api}?{params}", headers=dict(ep.headers))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:  # Prometheus explains 400/422/503 in a JSON error document
            doc = orjson.loads(body)
            detail = f"{doc.get('errorType', 'error')}: {doc.get('error', '')}"
        except (orjson.JSONDecodeError, AttributeError):
            detail = exc.reason if isinstance(exc.reason, str) else str(exc.code)
        hint = f" (set {TOKEN_ENV})" if exc.code in (401, 403) else ""
        raise BackendError(
            _one_line(f"Prometheus at {ep.shown} answered HTTP {exc.code}{hint}: {detail}")
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BackendError(_one_line(f"cannot reach Prometheus at {ep.shown}: {reason}")) from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BackendError(
            f"Prometheus at {ep.shown} did not answer JSON (is this a Prometheus URL?)"
        ) from None


def _run_query(
    ep: _Endpoint, query: str, windows: Sequence[tuple[float, float]], step: float, timeout: float
) -> tuple[SeriesRows, list[str]]:
    rows = SeriesRows()
    notes: list[str] = []
    for lo, hi in windows:
        doc = _fetch(ep, query, lo, hi, step, timeout)
        try:
            notes.extend(parse_response(doc, rows))
        except ResponseError as exc:
            raise BackendError(_one_line(f"Prometheus at {ep.shown}: {exc}")) from None
    return rows, notes


def shown_url(url: str) -> str:
    """The credential-free name of a Prometheus URL (ConfigError when it is not one)."""
    return _endpoint(url).shown


def query_range_documents(
    url: str, query: str, start: float, end: float, step: float, timeout: float | None = None
) -> list[Any]:
    """The raw ``query_range`` responses of one query over [start, end], split like
    :func:`read_prometheus` so none passes Prometheus' points limit (for bundle files)."""
    ep = _endpoint(url)
    timeout = network_timeout() if timeout is None else timeout
    docs = []
    for lo, hi in _windows(start, end, step):
        doc = _fetch(ep, query, lo, hi, step, timeout)
        if not isinstance(doc, dict) or doc.get("status") != "success":
            detail = doc.get("error", "") if isinstance(doc, dict) else ""
            raise BackendError(_one_line(f"Prometheus at {ep.shown} refused {query}: {detail}"))
        docs.append(doc)
    return docs


def instant_query(url: str, query: str, at: float, timeout: float | None = None) -> Any:
    """The ``data.result`` of one ``/api/v1/query`` at unix time ``at`` (vector or scalar)."""
    ep = _endpoint(url)
    params = urllib.parse.urlencode({"query": query, "time": at})
    instant = _Endpoint(ep.api.removesuffix("_range"), ep.shown, ep.headers)
    doc = _get(instant, params, network_timeout() if timeout is None else timeout)
    if not isinstance(doc, dict) or doc.get("status") != "success":
        detail = doc.get("error", "") if isinstance(doc, dict) else ""
        raise BackendError(_one_line(f"Prometheus at {ep.shown} refused {query}: {detail}"))
    return (doc.get("data") or {}).get("result")


_T = TypeVar("_T")


def _all_or_first_error(jobs: Sequence[Callable[[], _T]], workers: int) -> list[_T]:
    """Run ``jobs`` on ``workers`` daemon threads; their results in order, or the first
    exception as soon as it happens (the other requests are abandoned, not awaited: each
    ends by its own timeout, and daemon threads never hold the process open)."""
    results: list[Any] = [None] * len(jobs)
    failures: list[BaseException] = []
    lock = threading.Lock()
    finished = threading.Event()
    pending = iter(range(len(jobs)))
    left = [len(jobs)]

    def work() -> None:
        while not finished.is_set():
            with lock:
                i = next(pending, None)
            if i is None:
                return
            try:
                results[i] = jobs[i]()
            except BaseException as exc:  # handed to the caller's thread
                with lock:
                    failures.append(exc)
                finished.set()
                return
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    finished.set()

    if not jobs:
        return []
    for _ in range(max(1, min(workers, len(jobs)))):
        threading.Thread(target=work, daemon=True, name="tailtriage-prometheus").start()
    finished.wait()
    if failures:
        raise failures[0]
    return results


def read_prometheus(
    url: str,
    start: float,
    end: float,
    step: float = 15.0,
    *,
    queries: Iterable[tuple[str, str]] | None = None,
    timeout: float | None = None,
    workers: int = 4,
) -> Capture:
    """The catalog's metrics between ``start`` and ``end`` (unix seconds) every ``step`` s.

    ``queries`` replaces the catalog's ``(name, PromQL)`` pairs (e.g. to read one metric).
    Raises ConfigError for a bad URL or range, BackendError when Prometheus fails.  Every
    connect and read waits at most ``timeout`` seconds (default: ``network_timeout()``), and
    the first failure ends the read, so a Prometheus that accepts and never answers fails
    after one timeout rather than one per batch of parallel queries."""
    if not (end >= start and step > 0):
        raise ConfigError(
            f"Prometheus range needs start <= end and step > 0 (got {start}..{end}, step {step})"
        )
    ep = _endpoint(url)
    timeout = network_timeout() if timeout is None else timeout
    todo = list(queries if queries is not None else live_queries())
    windows = _windows(start, end, step)
    results = _all_or_first_error(
        [functools.partial(_run_query, ep, q, windows, step, timeout) for _, q in todo], workers
    )
    tables: list[pa.Table] = []
    warnings: list[str] = []
    found: list[str] = []
    for (name, _), (rows, notes) in zip(todo, results, strict=True):
        if len(rows):
            found.append(name)
            tables.append(rows.table(ep.shown))
        warnings.extend(f"{ep.shown}: Prometheus: {n}" for n in dict.fromkeys(notes))
    series = pa.concat_tables(tables) if tables else SeriesRows().table(ep.shown)
    meta = Metadata(
        provenance=(FileProvenance(ep.shown, FORMAT, series.num_rows),),
        warnings=tuple(warnings),
        extra={
            "prometheus": {
                "url": ep.shown,
                "start": start,
                "end": end,
                "step": step,
                "queries": len(todo),
                "found": found,
            }
        },
    )
    # with no kubectl output at hand, kube-state-metrics gives the pods' pending/cold start
    return Capture(
        series=series, events=pod_events_from_kube_metrics(series, ep.shown), metadata=meta
    )
