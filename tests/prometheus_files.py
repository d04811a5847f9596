"""Builders of Prometheus ``query_range`` files holding classic histograms, shaped exactly as
``GET /api/v1/query_range`` returns them (``resultType: matrix``, one result per labelled
series, values as ``[unix_seconds, "string"]``), from per-scrape observations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import orjson

#: vLLM's TTFT buckets (vllm/v1/metrics/loggers.py)
VLLM_TTFT = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
#: vLLM's ITL / TPOT buckets
VLLM_ITL = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
#: vLLM's request-phase buckets (queue, prefill, decode, inference, e2e)
VLLM_PHASE = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
#: SGLang's TTFT buckets and per-stage buckets (python/sglang/srt/metrics/collector.py)
SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_QUEUE = (0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100)
SGLANG_STAGE = tuple(round(0.001 * 1.62**i, 6) for i in range(30))


def histogram_rows(
    name: str,
    labels: Mapping[str, str],
    buckets: Sequence[float],
    times: Sequence[float],
    observations: Sequence[np.ndarray],
    start_counts: float = 0.0,
) -> list[dict[str, object]]:
    """The ``_bucket``/``_sum``/``_count`` results of one series: ``observations[i]`` are the
    values observed between scrape ``i - 1`` and scrape ``i`` (cumulative from
    ``start_counts`` extra observations of 0 before the first scrape)."""
    edges = [*buckets, np.inf]
    cum = np.zeros(len(edges))
    cum += start_counts
    total = 0.0
    per_bucket: list[list[list[object]]] = [[] for _ in edges]
    sums: list[list[object]] = []
    counts: list[list[object]] = []
    for t, obs in zip(times, observations, strict=True):
        obs = np.asarray(obs, dtype=float)
        for j, le in enumerate(edges):
            cum[j] += float(np.sum(obs <= le))
            per_bucket[j].append([t, f"{cum[j]:g}"])
        total += float(obs.sum())
        sums.append([t, repr(total)])
        counts.append([t, f"{cum[-1]:g}"])
    out: list[dict[str, object]] = []
    for le, values in zip(edges, per_bucket, strict=True):
        le_s = "+Inf" if np.isinf(le) else str(float(le))
        out.append(
            {"metric": {"__name__": f"{name}_bucket", **labels, "le": le_s}, "values": values}
        )
    out.append({"metric": {"__name__": f"{name}_sum", **labels}, "values": sums})
    out.append({"metric": {"__name__": f"{name}_count", **labels}, "values": counts})
    return out


def gauge_rows(
    name: str, labels: Mapping[str, str], times: Sequence[float], values: Sequence[float]
) -> list[dict[str, object]]:
    return [
        {
            "metric": {"__name__": name, **labels},
            "values": [[t, repr(float(v))] for t, v in zip(times, values, strict=True)],
        }
    ]


def write_query_range(path: Path, results: Sequence[Mapping[str, object]]) -> Path:
    """One ``query_range`` answer (``resultType: matrix``) holding ``results``, written to
    ``path``; shared with the realistic corpus (``realistic.write_prom``)."""
    doc = {"status": "success", "data": {"resultType": "matrix", "result": list(results)}}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY))
    return path
