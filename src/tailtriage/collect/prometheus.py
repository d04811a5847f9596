"""Prometheus ``query_range`` responses for the metric catalog, written as bundle files.

One query per catalog concept (every engine, DCGM, kube-state-metrics, gateway spelling, as
``model.metric_catalog.live_queries`` has them), through ``sources.prometheus_live`` (the
project's one Prometheus client: auth, credential-free names, the points-per-series split).
Each response is written as the API returned it, ``prometheus/<concept>.json`` (more files
when the window needs several requests), which ``sources.prometheus_api`` reads.

With a namespace, each selector is restricted to it, both as ``namespace`` (engines, DCGM
with pod mapping) and ``exported_namespace`` (kube-state-metrics scraped without
``honor_labels``)."""

from __future__ import annotations

import math
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from tailtriage.collect.manifest import SourceOutcome
from tailtriage.errors import BackendError, ConfigError
from tailtriage.model.metric_catalog import CATALOG, MetricSpec
from tailtriage.sources.prometheus_live import query_range_documents, shown_url

#: below a usual scrape interval a finer step adds points, not information
MIN_STEP_S = 15.0
#: points per series aimed at; an hour at 15 s is 240, a day coarsens to 87 s
TARGET_POINTS = 1_000
#: concurrent queries; Prometheus' default query concurrency is 20, leave it room
WORKERS = 4
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def step_for(start: float, end: float) -> float:
    """The ``query_range`` step for a window: the scrape-interval floor or coarser."""
    return max(MIN_STEP_S, float(math.ceil((end - start) / TARGET_POINTS)))


def query_for(spec: MetricSpec, namespace: str | None) -> str:
    """The concept's selector, restricted to ``namespace`` when given."""
    if namespace is None:
        return spec.selector
    if not _NAMESPACE.match(namespace):
        raise ConfigError(f"--namespace: {namespace!r} is not a Kubernetes namespace name")
    inner = spec.selector[1:-1]
    return f'{{{inner},namespace="{namespace}"}} or {{{inner},exported_namespace="{namespace}"}}'


def collect_prometheus(
    url: str,
    out: Path,
    window: tuple[float, float],
    namespace: str | None,
    timeout: float,
    specs: tuple[MetricSpec, ...] = CATALOG,
) -> SourceOutcome:
    """Run every concept's query and write the non-empty responses under ``out/prometheus``.

    The first query runs alone: if it fails, that is the source's one error line. Later
    connection failures stop the queries not yet started."""
    target = shown_url(url)
    start, end = window
    step = step_for(start, end)
    todo = [(s.canonical, query_for(s, namespace)) for s in specs]
    folder = out / "prometheus"
    broken = threading.Event()
    errors: dict[str, None] = {}
    files: list[str] = []
    empty: list[str] = []
    series = 0

    def one(name: str, query: str, probe: bool = False) -> None:
        nonlocal series
        if broken.is_set():
            return
        try:
            docs = query_range_documents(url, query, start, end, step, timeout)
        except BackendError as exc:
            if probe or "cannot reach" in str(exc):
                broken.set()  # the server is down or refusing: one line for the source
                errors[str(exc)] = None
            else:
                errors[f"{name}: {exc}"] = None
            return
        found = sum(len(d.get("data", {}).get("result", [])) for d in docs)
        if not found:
            empty.append(name)
            return
        folder.mkdir(parents=True, exist_ok=True)
        for i, doc in enumerate(docs):
            rel = f"prometheus/{name}.json" if i == 0 else f"prometheus/{name}.{i + 1}.json"
            (out / rel).write_bytes(orjson.dumps(doc) + b"\n")
            files.append(rel)
        series += found

    if todo:
        one(*todo[0], probe=True)
    if not broken.is_set():
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            list(pool.map(lambda t: one(*t), todo[1:]))
    notes = [f"query_range step {step:g} s"]
    if namespace:
        notes.append(f'label filter namespace="{namespace}" or exported_namespace="{namespace}"')
    if not broken.is_set():
        notes.append(f"{len(empty)} of {len(todo)} concepts had no series")
    return SourceOutcome(
        "prometheus",
        target,
        tuple(name for name, _ in todo),
        tuple(sorted(files)),
        series,
        tuple(errors),
        tuple(notes),
    )
