"""A small capture with queue and execution stages and trace ids, built in memory."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tailtriage.model.capture import Capture
from tailtriage.model.schema import REQUESTS, STAGES

N = 60
T0 = 1_700_000_000.0


def _table(schema: pa.Schema, cols: dict[str, list[object]]) -> pa.Table:
    n = len(next(iter(cols.values())))
    full = {f.name: cols.get(f.name, pa.nulls(n, f.type)) for f in schema}
    return pa.table(full).cast(schema)


def build_capture() -> Capture:
    """Request i arrives at T0 + i; it queues 0.01 * (i % 5 + 1) s at the gateway and
    0.2 s in the engine, prefills 0.05 s and decodes 1 s."""
    ids = [f"r{i}" for i in range(N)]
    traces = [f"{i:032x}" for i in range(1, N + 1)]
    arrival = [T0 + i for i in range(N)]
    rows: dict[str, list[object]] = {"request_id": [], "stage": [], "start": [], "duration": []}
    for i, rid in enumerate(ids):
        t = arrival[i]
        for stage, d in (("gateway_queue", 0.01 * (i % 5 + 1)), ("engine_queue", 0.2),
                         ("prefill", 0.05), ("decode", 1.0), ("client", 0.5)):  # fmt: skip
            rows["request_id"].append(rid)
            rows["stage"].append(stage)
            rows["start"].append(t)
            rows["duration"].append(d)
            t += d
    ttft = [0.01 * (i % 5 + 1) + 0.25 for i in range(N)]
    requests = _table(REQUESTS, {
        "request_id": ids, "trace_id": traces, "arrival": arrival, "ttft": ttft,
        "status": ["ok"] * N,
    })  # fmt: skip
    return Capture(requests=requests, stages=_table(STAGES, rows))


@pytest.fixture
def capture() -> Capture:
    return build_capture()
