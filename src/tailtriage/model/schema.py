"""Arrow schemas of the Capture's tables (documented in ``docs/model.md``).

Times are float seconds: absolute times are unix seconds, durations are seconds.
Everything that is not seconds or tokens carries its unit in the column name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa

SCHEMA_VERSION: Final = 1

REQUESTS: Final = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("trace_id", pa.string()),  # W3C trace id (32 lower-case hex) when known
        pa.field("arrival", pa.float64(), nullable=False),  # start of the outermost span
        pa.field("first_token", pa.float64()),  # first token leaves the edge
        pa.field("finish", pa.float64()),  # last byte leaves the edge
        pa.field("ttft", pa.float64()),  # first_token - arrival, or engine-reported
        pa.field("e2e", pa.float64()),  # finish - arrival
        pa.field("prompt_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("status", pa.string(), nullable=False),  # ok | error | timeout | cancelled
        pa.field("error", pa.string()),  # error class when status != ok
        pa.field("http_status", pa.int32()),
        pa.field("model", pa.string()),
        pa.field("replica", pa.string()),  # pod / instance that served it
        pa.field("node", pa.string()),
        pa.field("source", pa.string()),  # provenance: file or producer
    ]
)

STAGES: Final = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),  # one of vocabulary.STAGES
        pa.field("start", pa.float64(), nullable=False),
        pa.field("duration", pa.float64(), nullable=False),
        pa.field("span_id", pa.string()),  # span the time came from (null: derived)
        pa.field("span_name", pa.string()),
    ]
)

TOKEN_TIMES: Final = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("index", pa.int32(), nullable=False),  # 0 = first token/chunk
        pa.field("time", pa.float64(), nullable=False),
        pa.field("tokens", pa.int32(), nullable=False),  # tokens carried by this chunk
    ]
)

SPANS: Final = pa.schema(
    [
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("span_id", pa.string(), nullable=False),
        pa.field("parent_id", pa.string()),
        pa.field("name", pa.string(), nullable=False),
        pa.field("kind", pa.string()),  # SERVER | CLIENT | INTERNAL | PRODUCER | CONSUMER
        pa.field("service", pa.string()),
        pa.field("start", pa.float64(), nullable=False),
        pa.field("end", pa.float64(), nullable=False),
        pa.field("status", pa.string()),  # ok | error | unset
        pa.field("attributes", pa.string()),  # JSON object, secrets redacted
        pa.field("source", pa.string()),
    ]
)

SERIES: Final = pa.schema(
    [
        pa.field(
            "metric", pa.string(), nullable=False
        ),  # as exported, e.g. vllm:num_requests_waiting
        pa.field("labels", pa.string(), nullable=False),  # JSON object, keys sorted; le for buckets
        pa.field("time", pa.float64(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("source", pa.string()),
    ]
)

EVENTS: Final = pa.schema(
    [
        pa.field("time", pa.float64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # pod_scheduled, pod_ready, hpa_rescale, ...
        pa.field("object_kind", pa.string()),  # Pod, HorizontalPodAutoscaler, Deployment, ...
        pa.field("object_name", pa.string()),
        pa.field("namespace", pa.string()),
        pa.field("reason", pa.string()),  # Kubernetes reason as given
        pa.field("message", pa.string()),
        pa.field("duration", pa.float64()),  # derived durations (pending, cold start), seconds
        pa.field("attributes", pa.string()),  # JSON object
        pa.field("source", pa.string()),
    ]
)

TABLES: Final[Mapping[str, pa.Schema]] = {
    "requests": REQUESTS,
    "stages": STAGES,
    "token_times": TOKEN_TIMES,
    "spans": SPANS,
    "series": SERIES,
    "events": EVENTS,
}


def make_table(schema: pa.Schema, columns: Mapping[str, Sequence[Any]]) -> pa.Table:
    """Build a table of ``schema`` from python columns; missing nullable columns become nulls."""
    n = len(next(iter(columns.values()))) if columns else 0
    arrays = []
    for field in schema:
        values = columns.get(field.name)
        if values is None:
            arrays.append(pa.nulls(n, type=field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
