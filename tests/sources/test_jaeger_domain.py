"""Jaeger's api_v2 gateway stream (``{"result": {"spans": [...]}}`` per line) and its value
syntax: Go/protobuf durations, base64 ids, RFC 3339 with nanoseconds."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tailtriage.sources.jaeger_domain import b64_id, duration_s, rfc3339
from tailtriage.store.input import load_capture


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5000ns", 5e-6), ("1.5s", 1.5), ("0.000005s", 5e-6), ("1m30s", 90.0), ("2.5ms", 2.5e-3)],
)
def test_durations(text: str, seconds: float) -> None:
    assert duration_s(text) == pytest.approx(seconds)


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="duration"):
        duration_s("5 parsecs")
    with pytest.raises(ValueError, match="RFC 3339"):
        rfc3339("2017-01-26 16:46:31")
    assert b64_id("not base64!", 16) is None and b64_id("AAAAAAAAAAA=", 16) is None


def _span(
    trace: bytes, span: bytes, parent: bytes | None, start: str, dur: str
) -> dict[str, object]:
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    out: dict[str, object] = {
        "traceId": b64(trace), "spanId": b64(span), "operationName": "op",
        "startTime": start, "duration": dur, "process": {"serviceName": "vllm"},
        "tags": [{"key": "span.kind", "vStr": "server"}],
    }  # fmt: skip
    if parent is not None:
        out["references"] = [{"refType": "CHILD_OF", "traceId": b64(trace), "spanId": b64(parent)}]
    return out


def test_the_gateway_stream_of_results_is_read_line_by_line(tmp_path: Path) -> None:
    trace = bytes(range(16))
    root = _span(trace, b"\x00" * 7 + b"\x01", None, "2026-01-01T10:00:00.123456789Z", "2s")
    child = _span(trace, b"\x00" * 7 + b"\x02", b"\x00" * 7 + b"\x01",
                  "2026-01-01T10:00:00.5Z", "250ms")  # fmt: skip
    broken = {**child, "startTime": "yesterday"}
    lines = [json.dumps({"result": {"spans": [root]}}),
             json.dumps({"result": {"spans": [child, broken]}})]  # fmt: skip
    path = tmp_path / "api_v2.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cap = load_capture(path)
    rows = {r["span_id"]: r for r in cap.spans.to_pylist()}
    assert rows["0000000000000002"]["parent_id"] == "0000000000000001"
    assert rows["0000000000000001"]["trace_id"] == bytes(range(16)).hex()
    assert rows["0000000000000002"]["end"] - rows["0000000000000002"]["start"] == pytest.approx(
        0.25
    )
    assert rows["0000000000000001"]["kind"] == "SERVER"
    assert cap.metadata.quality["spans.invalid"] == 1  # the broken span: skipped, counted
