"""Small hand-built incidents for rule tests: a capture, its series and events, and a
decomposition with known stage values (the rules' input, independent of the analyses)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from builders import T0, capture_from_arrays
from tailtriage.analyses.results import Decomposition, SloResult, SloSpec, StageValue, Windows
from tailtriage.diagnosis import DiagnosisContext, build_context
from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S
from tailtriage.store import DuckDBStore

BASELINE = (T0, T0 + 300.0)
INCIDENT = (T0 + 300.0, T0 + 600.0)


def series(rows: Iterable[tuple[str, Mapping[str, str], float, float]]) -> pa.Table:
    """(metric, labels, time, value) rows -> a series table."""
    rs = list(rows)
    return make_table(
        S.SERIES,
        {
            "metric": [r[0] for r in rs],
            "labels": [orjson.dumps(dict(sorted(r[1].items()))).decode() for r in rs],
            "time": [r[2] for r in rs],
            "value": [r[3] for r in rs],
        },
    )


def gauge(
    metric: str,
    values: Sequence[float] | np.ndarray,
    start: float = T0,
    step: float = 15.0,
    labels: Mapping[str, str] | None = None,
) -> list[tuple[str, Mapping[str, str], float, float]]:
    return [(metric, labels or {}, start + i * step, float(v)) for i, v in enumerate(values)]


def events(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    rs = list(rows)
    cols = {k: [r.get(k) for r in rs] for k in S.EVENTS.names}
    cols["attributes"] = [
        orjson.dumps(r["attributes"]).decode() if r.get("attributes") else None for r in rs
    ]
    return make_table(S.EVENTS, cols)


def requests(
    n_per_window: int = 400,
    incident_stages: Mapping[str, float] | None = None,
    baseline_stages: Mapping[str, float] | None = None,
    seed: int = 1,
    replicas: int = 2,
    prompt_tokens: np.ndarray | None = None,
) -> Capture:
    """Requests spread over baseline then incident with the given typical stage durations."""
    rng = np.random.default_rng(seed)
    base = baseline_stages or {
        "ingress": 0.02,
        "engine_queue": 0.02,
        "prefill": 0.15,
        "decode": 2.0,
    }
    inc = incident_stages or base
    arrival = np.concatenate(
        [
            np.sort(rng.uniform(BASELINE[0], BASELINE[1], n_per_window)),
            np.sort(rng.uniform(INCIDENT[0], INCIDENT[1], n_per_window)),
        ]
    )
    names = sorted(set(base) | set(inc))
    stages = {
        s: np.concatenate(
            [
                base.get(s, 0.0) * rng.lognormal(0.0, 0.2, n_per_window),
                inc.get(s, 0.0) * rng.lognormal(0.0, 0.2, n_per_window),
            ]
        )
        for s in names
    }
    reps = [f"vllm-{i % replicas}" for i in range(2 * n_per_window)]
    return capture_from_arrays(
        arrival,
        stages,
        replica=reps,
        prompt_tokens=prompt_tokens,
        output_tokens=np.full(2 * n_per_window, 64),
    )


def decomposition(
    incident: Mapping[str, float], baseline: Mapping[str, float] | None, metric: str = "ttft"
) -> Decomposition:
    stages = tuple(
        StageValue(s, incident.get(s, 0.0), None if baseline is None else baseline.get(s, 0.0))
        for s in sorted(set(incident) | set(baseline or {}))
    )
    return Decomposition(
        metric=metric,
        percentile=95.0,
        total=sum(incident.values()),
        stages=stages,
        baseline_total=None if baseline is None else sum(baseline.values()),
    )


def slo(metric: str, threshold: float, observed: float, pct: float = 95.0) -> SloResult:
    return SloResult(SloSpec(metric, pct, threshold), observed, observed > threshold, 400)


def context(
    capture: Capture,
    slos: Sequence[SloResult],
    decomp: Decomposition | None,
    *,
    series_rows: Iterable[tuple[str, Mapping[str, str], float, float]] = (),
    event_rows: Iterable[Mapping[str, Any]] = (),
    baseline: bool = True,
    attribution: Mapping[str, Mapping[str, float]] | None = None,
) -> DiagnosisContext:
    rows = list(series_rows)
    evs = list(event_rows)
    cap = capture.replace(
        series=series(rows) if rows else capture.series,
        events=events(evs) if evs else capture.events,
    )
    windows = Windows(INCIDENT, BASELINE if baseline else None)
    return build_context(cap, DuckDBStore(cap), slos, windows, decomp, attribution)
