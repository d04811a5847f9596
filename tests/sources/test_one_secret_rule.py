"""Every span reader applies the one secret rule (``redact.needs_redaction`` before storing,
``redact.redact_value`` when it says so): the same attributes, fed through each reader and
each path of the OTLP/JSON reader, are stored redacted alike, key by key."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tailtriage.sources import otlp_json
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_file
from tailtriage.sources.spans import SpanColumns

TRACE, SPAN, US = "5b" * 16, "00000000000000c1", 1_717_236_000_000_000

# string values only: Zipkin tags and Jaeger string tags carry nothing else
PLANTS = {
    "authorization": "Basic dXNlcjpwYXNzd29yZA==",
    "x-api-key": "k-1234567890abcdef",
    "cookie": "session=abc123",
    "password": "hunter2",
    "http.request.header.x-amz-security-token": "FwoGZXIvYXdzEJr",
    "note": "retry with Bearer abcdefghijklmnopqrstuvwxyz",
    "url.full": "https://bob:pw@api.example.com/v1/chat?token=abc123",
    "gen_ai.prompt": "tell me a secret",
    "http.route": "/v1/chat/completions",
}
STORED = {
    "authorization": "[REDACTED]",
    "x-api-key": "[REDACTED]",
    "cookie": "[REDACTED]",
    "password": "[REDACTED]",
    "http.request.header.x-amz-security-token": "[REDACTED]",
    "note": "retry with Bearer [REDACTED]",
    "url.full": "https://[REDACTED]@api.example.com/v1/chat?token=[REDACTED]",
    "gen_ai.prompt": "[DROPPED]",
    "http.route": "/v1/chat/completions",
}


def _otlp() -> dict[str, Any]:
    span = {
        "traceId": TRACE, "spanId": SPAN, "name": "llm_request", "kind": 2,
        "startTimeUnixNano": str(US * 1000), "endTimeUnixNano": str(US * 1000 + 10**9),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in PLANTS.items()],
    }  # fmt: skip
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}


def otlp_typed(d: Path) -> Path:
    (d / "t.jsonl").write_bytes(orjson.dumps(_otlp()) + b"\n")
    return d / "t.jsonl"


def otlp_careful(d: Path) -> Path:
    doc = _otlp()
    doc["resource_spans"] = doc.pop("resourceSpans")  # a spelling only the careful path reads
    (d / "t.jsonl").write_bytes(orjson.dumps(doc) + b"\n")
    return d / "t.jsonl"


def otlp_document(d: Path) -> Path:
    (d / "t.json").write_bytes(orjson.dumps(_otlp(), option=orjson.OPT_INDENT_2))
    return d / "t.json"


def otlp_proto(d: Path) -> Path:
    doc = _otlp()
    sp = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in ("traceId", "spanId"):
        sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    (d / "t.pb").write_bytes(ParseDict(doc, ExportTraceServiceRequest()).SerializeToString())
    return d / "t.pb"


def jaeger(d: Path) -> Path:
    span = {
        "traceID": TRACE, "spanID": SPAN, "operationName": "llm_request", "references": [],
        "startTime": US, "duration": 1000, "processID": "p1", "logs": [],
        "tags": [{"key": k, "type": "string", "value": v} for k, v in PLANTS.items()],
    }  # fmt: skip
    doc = {"data": [{"traceID": TRACE, "spans": [span], "processes": {"p1": {"serviceName": "v"}}}]}
    (d / "jaeger.json").write_bytes(orjson.dumps(doc))
    return d / "jaeger.json"


def jaeger_domain(d: Path) -> Path:
    span = {
        "traceId": base64.b64encode(bytes.fromhex(TRACE)).decode(),
        "spanId": base64.b64encode(bytes.fromhex(SPAN)).decode(),
        "operationName": "llm_request", "startTime": "2024-06-01T10:00:00Z",
        "duration": "1000000ns", "process": {"serviceName": "vllm"},
        "tags": [{"key": k, "vType": "STRING", "vStr": v} for k, v in PLANTS.items()],
    }  # fmt: skip
    (d / "domain.json").write_bytes(orjson.dumps({"spans": [span]}))
    return d / "domain.json"


def zipkin(d: Path) -> Path:
    span = {
        "traceId": TRACE, "id": SPAN, "name": "llm_request", "timestamp": US, "duration": 1000,
        "localEndpoint": {"serviceName": "vllm"}, "tags": PLANTS,
    }  # fmt: skip
    (d / "zipkin.json").write_bytes(orjson.dumps([span]))
    return d / "zipkin.json"


@pytest.mark.parametrize(
    "write",
    [otlp_typed, otlp_careful, otlp_document, otlp_proto, jaeger, jaeger_domain, zipkin],
)
def test_every_reader_redacts_the_same_keys_alike(
    write: Callable[[Path], Path], tmp_path: Path
) -> None:
    spans = read_file(write(tmp_path), ReadOptions()).spans
    row = spans["span_id"].to_pylist().index(SPAN)
    stored = orjson.loads(spans["attributes"][row].as_py())
    assert {k: stored.get(k) for k in PLANTS} == STORED


def test_the_otlp_paths_are_the_ones_named() -> None:
    """otlp_typed feeds the typed path, otlp_careful the careful one (else the test above
    would check one path twice)."""
    typed = orjson.dumps(_otlp())
    assert otlp_json.read_typed(typed, SpanColumns("t", "otlp_json"))
    careful = _otlp()
    careful["resource_spans"] = careful.pop("resourceSpans")
    assert not otlp_json.read_typed(orjson.dumps(careful), SpanColumns("t", "otlp_json"))
