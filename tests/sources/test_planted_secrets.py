"""No planted secret reaches a saved capture or a report, whatever the source format, the
depth or the shape it hides in (issue 21); prompts, completions and SQL are dropped unless
--keep-content."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from trace_builders import Sp, otlp_doc, tid, vllm_trace

from tailtriage.model import Capture
from tailtriage.renderers.jsonrenderer import dumps
from tailtriage.sources.redact import DROPPED, REDACTED, redact_text, redact_value
from tailtriage.store.input import load_capture

US = 1_717_236_000_000_000  # a start time in µs


def secret(n: int) -> str:
    """A distinct planted secret (long enough for every token shape)."""
    return f"PLANTED{n:02d}x9Qz7Lm3Vb8Kd2Rf6Tn4Wy1"


# where a secret hides in span attributes (the same set for every trace format that can hold
# it): name -> (attribute key, value)
SPAN_PLANTS: dict[str, tuple[str, Any]] = {
    "sk-proj key in exception.message": (
        "exception.message",
        f"401 Unauthorized: invalid key sk-proj-{secret(1)}",
    ),
    "nested kvlist authorization": ("http.request", {"headers": {"authorization": secret(2)}}),
    "Bearer in a JSON header string": (
        "http.request.headers",
        orjson.dumps({"Authorization": f"Bearer {secret(3)}", "x-api-key": secret(4)}).decode(),
    ),
    "Bearer in an array": ("http.request.header.x-forwarded", [f"Bearer {secret(5)}"]),
    "x-amz-security-token": ("http.request.header.x-amz-security-token", secret(6)),
    "x-hf-token": ("http.request.header.x-hf-token", f"hf_{secret(7)}"),
    "URL credentials": (
        "url.full",
        f"https://bob:{secret(8)}@api.example.com/v1?token={secret(9)}",
    ),
    "prompt text": ("gen_ai.prompt", f"my password is {secret(10)}"),
    "completion text": ("gen_ai.completion", f"ok {secret(11)}"),
    "SQL statement": ("db.statement", f"SELECT * FROM users WHERE pw = '{secret(12)}'"),
    "header line in free text": ("log.line", f"curl -H 'Authorization: Basic {secret(13)}'"),
}
#: only string-valued attributes (Zipkin tags are strings; Jaeger tags are scalars)
STRING_PLANTS = {k: v for k, v in SPAN_PLANTS.items() if isinstance(v[1], str)}


def otlp_with(plants: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    spans = vllm_trace(0, 0.0)
    last = spans[-1]
    spans[-1] = Sp(
        last.trace, last.id, last.parent, last.name, last.start, last.end, last.kind,
        last.service, {**last.attrs, **dict(plants.values())}, last.events, last.resource,
    )  # fmt: skip
    egress = spans[1]  # a client span named after the URL it called, credentials and all
    spans[1] = Sp(
        egress.trace, egress.id, egress.parent, f"GET https://bob:{secret(14)}@api.example.com/",
        egress.start, egress.end, egress.kind, egress.service, egress.attrs, egress.events,
        egress.resource,
    )  # fmt: skip
    return otlp_doc(spans)


def otlp_proto(doc: dict[str, Any]) -> bytes:
    for rs in doc["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId", "parentSpanId"):
                if key in sp:
                    sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    return ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()


def jaeger(plants: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    tags = [{"key": k, "type": "string", "value": v} for k, v in plants.values()]
    span = {
        "traceID": tid(1), "spanID": "00000000000000a1", "operationName": "llm_request",
        "references": [], "startTime": US, "duration": 1000, "tags": tags, "processID": "p1",
        "logs": [],
    }  # fmt: skip
    proc = {"serviceName": "vllm", "tags": [{"key": "api_key", "type": "string", "value": "x"}]}
    return {"data": [{"traceID": tid(1), "spans": [span], "processes": {"p1": proc}}]}


def zipkin(plants: dict[str, tuple[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "traceId": tid(2),
            "id": "00000000000000b1",
            "name": "llm_request",
            "timestamp": US,
            "duration": 1000,
            "localEndpoint": {"serviceName": "vllm"},
            "tags": dict(plants.values()),
        }
    ]


LABEL_SECRETS = {"token": secret(20), "authorization": f"Bearer {secret(21)}"}


def prometheus_api() -> dict[str, Any]:
    metric = {"__name__": "vllm:num_requests_waiting", "pod": "vllm-0", **LABEL_SECRETS}
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": metric, "values": [[US / 1e6, "3"]]}],
        },
    }


def exposition() -> str:
    labels = ",".join(f'{k}="{v}"' for k, v in {"pod": "vllm-0", **LABEL_SECRETS}.items())
    return (
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{labels}}} 2 {US // 1000}\n"
    )


def kubectl() -> dict[str, Any]:
    return {
        "kind": "List",
        "items": [
            {
                "kind": "Event",
                "reason": "Failed",
                "type": "Warning",
                "message": f"Failed to pull: unauthorized, Authorization: Bearer {secret(30)} "
                f"and ?token={secret(31)}",
                "involvedObject": {"kind": "Pod", "name": "vllm-0", "namespace": "llm"},
                "lastTimestamp": "2024-06-01T10:00:00Z",
            }
        ],
    }


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "otlp.jsonl").write_bytes(orjson.dumps(otlp_with(SPAN_PLANTS)) + b"\n")
    (b / "otlp.pb").write_bytes(otlp_proto(otlp_with(SPAN_PLANTS)))
    (b / "jaeger.json").write_bytes(orjson.dumps(jaeger(STRING_PLANTS)))
    (b / "zipkin.json").write_bytes(orjson.dumps(zipkin(STRING_PLANTS)))
    (b / "prom.json").write_bytes(orjson.dumps(prometheus_api()))
    (b / "metrics.prom").write_text(exposition())
    (b / "events.json").write_bytes(orjson.dumps(kubectl()))
    return b


def everything_stored(path: Path) -> str:
    """Every value of every table of a saved capture, as text."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SHOW TABLES").fetchall()]
        rows = [con.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables]
    finally:
        con.close()
    return repr(rows)


def test_no_planted_secret_reaches_the_capture_or_the_report(bundle: Path, tmp_path: Path) -> None:
    from tailtriage.pipeline.analyze import analyze

    cap = load_capture(bundle)
    assert cap.metadata.skipped_files == ()
    formats = {p.format for p in cap.metadata.provenance}
    assert len(formats) == 7, formats  # every format was read, so every plant was seen
    saved = cap.save(tmp_path / "c.duckdb")
    stored = everything_stored(saved)
    report = dumps(analyze(Capture.load(saved), "p95 ttft < 1s").to_dict())
    leaked = [n for n in range(1, 32) if secret(n) in stored or secret(n) in report]
    assert leaked == []
    assert REDACTED in stored and DROPPED in stored
    assert "vllm-0" in stored and "llm_request" in stored  # what is not secret stays


def test_keep_content_keeps_prompts_and_sql_but_never_secrets(bundle: Path) -> None:
    cap = load_capture(bundle / "otlp.jsonl", keep_content=True)
    text = repr(cap.spans["attributes"].to_pylist())
    assert secret(10) in text and secret(12) in text  # content kept
    assert secret(2) not in text and secret(7) not in text  # secrets still redacted


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("llm.token_count.prompt", 12, 12),  # a count under a "token" word stays
        ("gen_ai.usage.output_tokens", 7, 7),
        ("x.session.token", "abc", REDACTED),
        ("exception.message", "key sk-abcdefghijklmnop1234", f"key {REDACTED}"),
        ("h", "Bearer abcdefgh123", f"Bearer {REDACTED}"),
        ("msg", "POST /v1/chat/completions took 3 ms", "POST /v1/chat/completions took 3 ms"),
        ("a", ["x", {"password": "p"}], ["x", {"password": REDACTED}]),
    ],
)
def test_redaction_at_any_depth(key: str, value: object, expected: object) -> None:
    assert redact_value(key, value) == expected


def test_json_inside_a_string_is_redacted_as_json() -> None:
    text = redact_text('{"headers": {"X-Api-Key": "k1", "accept": "json"}}')
    assert orjson.loads(text) == {"headers": {"X-Api-Key": REDACTED, "accept": "json"}}
