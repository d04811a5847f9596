"""Prometheus HTTP API ``/api/v1/query_range`` answers, one file per metric family."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import orjson

from tailtriage.model import Capture


def _prom_value(v: float) -> str:
    """Prometheus renders sample values with Go's FormatFloat(v, 'f', -1, 64)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def write_series(capture: Capture, out_dir: Path) -> list[Path]:
    by_metric: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    se = capture.series.to_pydict()
    for metric, labels, t, v in zip(
        se["metric"], se["labels"], se["time"], se["value"], strict=True
    ):
        by_metric[metric][labels].append((t, v))
    paths = []
    for metric in sorted(by_metric):
        result = []
        for labels in sorted(by_metric[metric]):
            metric_labels = {"__name__": metric, **orjson.loads(labels or "{}")}
            samples = sorted(by_metric[metric][labels])
            result.append(
                {
                    "metric": metric_labels,
                    "values": [[round(t, 3), _prom_value(v)] for t, v in samples],
                }
            )
        doc = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        safe = metric.replace(":", "_")
        path = out_dir / f"prometheus-{safe}.json"
        path.write_bytes(orjson.dumps(doc))
        paths.append(path)
    return paths
