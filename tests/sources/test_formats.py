"""OTLP protobuf framings, stage rules as data, and redaction helpers."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from trace_builders import Sp, otlp_doc, sid, tid, vllm_trace, write_jsonl

from tailtriage.derive.rules import builtin_rules, load_rules, parse_rules
from tailtriage.errors import ConfigError
from tailtriage.sources.base import detect
from tailtriage.sources.redact import redact_text, redact_value
from tailtriage.store.input import load_capture


def proto_bytes(doc: dict) -> bytes:  # type: ignore[type-arg]
    # OTLP/JSON ids are hex; the protobuf JSON mapping wants base64: convert explicitly
    import base64

    d = orjson.loads(orjson.dumps(doc))
    for rs in d["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()
    msg = json_format.ParseDict(d, ExportTraceServiceRequest())
    return bytes(msg.SerializeToString())


def comparable(path: Path) -> list[tuple[object, ...]]:
    cap = load_capture(path)
    return sorted(
        (
            r["trace_id"],
            r["span_id"],
            r["parent_id"],
            r["name"],
            r["kind"],
            round(r["start"], 6),
            orjson.loads(r["attributes"]).get("gen_ai.usage.completion_tokens"),
        )
        for r in cap.spans.to_pylist()
    )


@pytest.mark.parametrize("framing", ["single", "concatenated", "length_prefixed"])
def test_otlp_protobuf_reads_the_same_spans_as_json(tmp_path: Path, framing: str) -> None:
    docs = [otlp_doc(vllm_trace(0, 0.0)), otlp_doc(vllm_trace(1, 2.0))]
    json_path = write_jsonl(tmp_path / "t.jsonl", docs)
    blobs = [proto_bytes(d) for d in docs]
    if framing == "single":
        blob = proto_bytes({"resourceSpans": docs[0]["resourceSpans"] + docs[1]["resourceSpans"]})
    elif framing == "concatenated":
        blob = b"".join(blobs)
    else:  # the Collector file exporter's format: proto
        blob = b"".join(len(b).to_bytes(4, "big") + b for b in blobs)
    pb = tmp_path / "t.pb"
    pb.write_bytes(blob)
    assert detect(pb).name == "otlp_proto"  # type: ignore[union-attr]
    assert comparable(pb) == comparable(json_path)
    cap = load_capture(pb)
    assert cap.requests.num_rows == 2


def test_json_file_starting_with_newline_is_not_protobuf(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"\n" + orjson.dumps(otlp_doc(vllm_trace(0, 0.0)), option=orjson.OPT_INDENT_2))
    assert detect(path).name == "otlp_json"  # type: ignore[union-attr]


def test_builtin_rules_parse_and_name_real_stages() -> None:
    rules = builtin_rules()
    assert {r.id for r in rules} >= {"vllm.llm_request", "knative.throttler_try", "envoy.upstream"}


def test_user_rules_come_first(tmp_path: Path) -> None:
    t = tid(7)
    spans = vllm_trace(7, 0.0)
    spans.insert(
        2, Sp(t, sid(7, 8), sid(7, 2), "ext_authz", spans[1].start, spans[1].start + 0.004)
    )
    spans[2 + 1].parent = sid(7, 8)
    path = write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)])
    base = load_capture(path)
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - match: {name: [ext_authz]}\n    stage: gateway_queue\n")
    mine = load_capture(path, rules=rules)

    def stage_total(cap: object, stage: str) -> float:
        return sum(r["duration"] for r in cap.stages.to_pylist() if r["stage"] == stage)  # type: ignore[attr-defined]

    assert stage_total(base, "unattributed") == pytest.approx(0.004, abs=1e-6)
    assert stage_total(mine, "unattributed") == 0.0
    assert stage_total(mine, "gateway_queue") == pytest.approx(0.004, abs=1e-6)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("rules: [{stage: nowhere}]", "is not one of"),
        ("rules: [{stage: prefill, match: {name_regex: '('}}]", "invalid regular expression"),
        ("rules: [{stage: prefill, match: {colour: red}}]", "unknown condition"),
        ("rules: [{stage: prefill, inference: maybe}]", "inference"),
        ("rules: {", "invalid YAML"),
        ("- 3", "a rule must be a mapping"),
    ],
)
def test_bad_rules_are_config_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_rules(path)
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_parse_rules_accepts_a_bare_list() -> None:
    (rule,) = parse_rules("- {stage: pending, match: {name: [wait_for_pod]}}", "x")
    assert rule.stage == "pending" and rule.names == ("wait_for_pod",)


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("http.request.header.authorization", "Bearer abc", "[REDACTED]"),
        ("HTTP.Request.Header.X-API-Key", "abc", "[REDACTED]"),
        ("api-key", 12345, "[REDACTED]"),
        ("http.response.header.set-cookie", "a=b", "[REDACTED]"),
        ("gen_ai.usage.output_tokens", 17, 17),
        ("url.full", "https://u:p@h/x?token=t1&a=1", "https://[REDACTED]@h/x?token=[REDACTED]&a=1"),
        ("http.target", "/v1/chat?key=k&stream=true", "/v1/chat?key=[REDACTED]&stream=true"),
        ("note", "mail me at a@b.c", "mail me at a@b.c"),
    ],
)
def test_redaction(key: str, value: object, expected: object) -> None:
    assert redact_value(key, value) == expected


def test_redact_text_leaves_plain_text_alone() -> None:
    assert redact_text("POST /v1/chat/completions") == "POST /v1/chat/completions"
