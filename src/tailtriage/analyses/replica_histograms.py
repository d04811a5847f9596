"""One engine histogram split by replica: what each replica served over a window.

Without request spans the engines' histograms are the only per-request record, and every
replica exports its own series (``pod``, ``instance`` ... label).  Per replica, over a window:
how many requests it observed (the ``+Inf`` bucket's increase, as ``increase()`` reads it),
their mean (``_sum / _count``), and how long the replica was scraped inside the window (a pod
created or removed mid-window served for less of it).  The load-imbalance test reads these
where traces would give request counts per replica; the same counter semantics as
:mod:`~tailtriage.analyses.histograms` (a series born mid-capture counts from zero)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import orjson

from tailtriage.analyses.histograms import Histogram, load_histogram
from tailtriage.store.base import Store

#: label keys that name the replica a series belongs to, most specific first
REPLICA_LABELS: tuple[str, ...] = ("pod", "exported_pod", "instance", "replica", "engine")


@dataclass(frozen=True)
class ReplicaWindow:
    """One replica's observations of a histogram family over a window."""

    replica: str
    count: float  # observations (requests) in the window
    mean: float | None  # their mean value (seconds, tokens: the family's unit)
    exposure: float  # seconds of the window the replica was scraped, from its first request


def _replica_label(labels: str | None) -> tuple[str, str] | None:
    """(label key, value) naming the replica of a series, else None."""
    try:
        obj = orjson.loads(labels or "{}")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    for key in REPLICA_LABELS:
        if key in obj:
            return key, str(obj[key])
    return None


def per_replica(
    store: Store,
    family: str,
    window: tuple[float, float],
    where: Mapping[str, str] | None = None,
) -> dict[str, ReplicaWindow]:
    """Each replica's count, mean and exposure of ``family`` over ``window`` (series narrowed
    by ``where``); empty when the family has no replica label."""
    names = store.query(
        "SELECT DISTINCT labels FROM series WHERE metric = ?", [family + "_count"]
    ).column(0)
    replicas = dict.fromkeys(
        got for labels in names.to_pylist() if (got := _replica_label(labels)) is not None
    )
    row = store.query("SELECT min(time) AS lo FROM series").to_pylist()[0]
    start = None if row["lo"] is None else float(row["lo"])
    lo, hi = window
    out: dict[str, ReplicaWindow] = {}
    for key, value in replicas:
        hist = load_histogram(store, family, {**(where or {}), key: value}, capture_start=start)
        if hist is None:
            continue
        w = hist.window(lo, hi)
        exposure = max(min(hist.end, hi) - max(_serving_from(hist), lo), 0.0)
        out[value] = ReplicaWindow(value, w.count, w.mean, exposure)
    return out


def _serving_from(hist: Histogram) -> float:
    """When the replica began to serve: the scrape before its first observation.  A pod's
    series appear while it still loads (the exporter or the queue-proxy answer first), and
    the seconds it was scraped without serving are not seconds it could take requests."""
    if not hist.bucket_deltas.size:
        return hist.end
    served = np.flatnonzero(hist.bucket_deltas[:, -1] > 0)
    if served.size == 0:
        return hist.end  # never served: no exposure
    return max(float(hist.times[served[0]]) - hist.step, hist.start)
