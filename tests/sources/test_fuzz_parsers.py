"""Fuzzing campaign over every parser (issue 21), in CI time: Hypothesis mutates real-shaped
OTLP JSON, OTLP protobuf, Jaeger, Zipkin, Prometheus API, exposition and kubectl files (field
values replaced by hostile ones at any depth, bytes cut, flipped or inserted) and asserts

* no traceback: the file reads, or fails with one line of the project's own error type, and
  never through the file boundary's "reader failed" net (that would be a parser bug);
* request time is never lost: every second inside a request is in some stage
  (``check_sums``: stages sum to TTFT and e2e).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import orjson
from google.protobuf.json_format import ParseDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_derive import check_sums
from trace_builders import Sp, otlp_doc, vllm_trace

from tailtriage.errors import TailtriageError
from tailtriage.store.input import load_capture

FUZZ = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

HOSTILE: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.sampled_from(["0" * 32, "ab" * 8, "f" * 40, "1e400", "NaN", "-1", "\x00", "Bearer x"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON document (keys and indexes)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, (*prefix, i))
    return out


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = list(doc) if isinstance(doc, list) else dict(doc)
    copy[path[0]] = replaced(doc[path[0]], path[1:], value)
    return copy


def mutate_json(data: st.DataObject, doc: Any) -> bytes:
    """A few values of ``doc`` replaced by hostile ones, then maybe its bytes damaged."""
    for _ in range(data.draw(st.integers(0, 3))):
        where = data.draw(st.sampled_from(paths(doc)))
        doc = replaced(doc, where, data.draw(HOSTILE))
    return mutate_bytes(data, json.dumps(doc).encode())  # stdlib: big ints and NaN too


def mutate_bytes(data: st.DataObject, blob: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["none", "none", "cut", "flip", "insert"]))
    if kind == "none" or not blob:
        return blob
    at = data.draw(st.integers(0, len(blob) - 1))
    if kind == "cut":
        return blob[:at]
    if kind == "flip":
        return blob[:at] + bytes([blob[at] ^ data.draw(st.integers(1, 255))]) + blob[at + 1 :]
    return blob[:at] + data.draw(st.binary(min_size=1, max_size=4)) + blob[at:]


def survives(path: Path) -> None:
    try:
        cap = load_capture(path)
    except TailtriageError as exc:
        message = str(exc)
        assert "\n" not in message
        assert "reader failed" not in message, message  # a parser bug caught by the net
        return
    check_sums(cap)


def traces() -> list[Sp]:
    return [sp for i in range(2) for sp in vllm_trace(i, float(i))]


def jaeger_doc(spans: list[Sp]) -> dict[str, Any]:
    out = []
    for s in spans:
        refs = [{"refType": "CHILD_OF", "traceID": s.trace, "spanID": s.parent}] if s.parent else []
        out.append({
            "traceID": s.trace, "spanID": s.id, "operationName": s.name, "references": refs,
            "startTime": int((1.7e9 + s.start) * 1e6),
            "duration": int((s.end - s.start) * 1e6), "processID": s.service,
            "tags": [{"key": k, "type": "string", "value": str(v)} for k, v in s.attrs.items()]
            + [{"key": "span.kind", "type": "string", "value": s.kind.lower()}],
        })  # fmt: skip
    procs = {s.service: {"serviceName": s.service, "tags": []} for s in spans}
    return {"data": [{"traceID": spans[0].trace, "spans": out, "processes": procs}]}


def zipkin_doc(spans: list[Sp]) -> list[dict[str, Any]]:
    return [
        {"traceId": s.trace, "id": s.id, **({"parentId": s.parent} if s.parent else {}),
         "name": s.name, "kind": s.kind if s.kind in ("SERVER", "CLIENT") else None,
         "timestamp": int((1.7e9 + s.start) * 1e6), "duration": int((s.end - s.start) * 1e6),
         "localEndpoint": {"serviceName": s.service},
         "tags": {k: str(v) for k, v in s.attrs.items()}}
        for s in spans
    ]  # fmt: skip


@FUZZ
@given(st.data())
def test_otlp_json(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(mutate_json(data, otlp_doc(traces())) + b"\n")
    survives(path)


@FUZZ
@given(st.data())
def test_otlp_protobuf(tmp_path: Path, data: st.DataObject) -> None:
    doc = otlp_doc(traces())
    for rs in doc["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId", "parentSpanId"):
                if key in sp:
                    sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    blob = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    framed = b"".join(len(b).to_bytes(4, "big") + b for b in (blob, blob))
    path = tmp_path / "t.pb"
    path.write_bytes(mutate_bytes(data, framed))
    survives(path)


@FUZZ
@given(st.data())
def test_jaeger(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "jaeger.json"
    path.write_bytes(mutate_json(data, jaeger_doc(traces())))
    survives(path)


@FUZZ
@given(st.data())
def test_zipkin(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "zipkin.json"
    path.write_bytes(mutate_json(data, zipkin_doc(traces())))
    survives(path)


PROM_API = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {"metric": {"__name__": "vllm:num_requests_waiting", "pod": "a"},
             "values": [[1700000000, "1"], [1700000015, "4"]]},
        ],
    },
}  # fmt: skip
EXPOSITION = (
    "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{pod="a"} 2 1700000000000\n'
    "# TYPE vllm:e2e_request_latency_seconds histogram\n"
    'vllm:e2e_request_latency_seconds_bucket{le="1"} 3 1700000000000\n'
    'vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 4 1700000000000\n'
    "vllm:e2e_request_latency_seconds_count 4 1700000000000\n"
)
KUBECTL = {
    "kind": "List",
    "items": [
        {"kind": "Event", "reason": "SuccessfulRescale", "message": "New size: 3; reason: cpu",
         "involvedObject": {"kind": "HorizontalPodAutoscaler", "name": "vllm"},
         "lastTimestamp": "2023-11-14T22:13:20Z"},
        {"kind": "Pod", "metadata": {"name": "vllm-0", "namespace": "llm",
                                     "creationTimestamp": "2023-11-14T22:13:20Z"},
         "status": {"conditions": [{"type": "Ready", "status": "True",
                                    "lastTransitionTime": "2023-11-14T22:14:00Z"}]}},
    ],
}  # fmt: skip


@FUZZ
@given(st.data())
def test_prometheus_api(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "prom.json"
    path.write_bytes(mutate_json(data, PROM_API))
    survives(path)


@FUZZ
@given(st.data())
def test_exposition(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "metrics.prom"
    path.write_bytes(mutate_bytes(data, EXPOSITION.encode()))
    survives(path)


@FUZZ
@given(st.data())
def test_kubectl(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "events.json"
    path.write_bytes(mutate_json(data, KUBECTL))
    survives(path)


def test_the_mutators_do_mutate() -> None:
    """The campaign is not vacuous: a replaced value lands where the path says."""
    doc = {"a": [1, {"b": 2}]}
    assert replaced(doc, ("a", 1, "b"), "x") == {"a": [1, {"b": "x"}]}
    assert doc == {"a": [1, {"b": 2}]}
    assert ("a", 1, "b") in paths(doc)
    assert orjson.loads(json.dumps(doc)) == doc
