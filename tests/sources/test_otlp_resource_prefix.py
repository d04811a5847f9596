"""The typed reader puts the resource's attributes JSON ahead of each span's own when no span
overrides one of them (no merged dict per span).  The stored JSON must be exactly what the
careful (per-span) reader stores: same members in the same order, for spans with and without
attributes or events, and the overriding case must still merge (span value, resource place)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tailtriage.sources import otlp_json
from tailtriage.sources.spans import SpanColumns


def _span(i: int, attrs: list[tuple[str, dict[str, Any]]], events: bool) -> dict[str, Any]:
    sp: dict[str, Any] = {
        "traceId": "ab" * 16,
        "spanId": f"{i + 1:016x}",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225601000000000",
        "attributes": [{"key": k, "value": v} for k, v in attrs],
    }
    if events:
        sp["events"] = [{"name": "first_token", "timeUnixNano": "1767225600250000000"}]
    return sp


def _read(doc: dict[str, Any], batch: bool) -> SpanColumns:
    """Through the typed path (which must take it) or the careful one."""
    cols = SpanColumns("f.jsonl", "otlp_json")
    if batch:
        assert otlp_json.read_typed(orjson.dumps(doc), cols)
    else:
        otlp_json.read_request(doc, cols, "line 1")
    return cols


@pytest.mark.parametrize("override", [False, True])
def test_resource_prefix_equals_per_span_merge(override: bool) -> None:
    resource = [
        {"key": "service.name", "value": {"stringValue": "vllm"}},
        {"key": "k8s.pod.name", "value": {"stringValue": "vllm-0"}},
    ]
    own = [("gen_ai.usage.prompt_tokens", {"intValue": "512"}), ("x", {"doubleValue": 0.5})]
    if override:
        own.append(("k8s.pod.name", {"stringValue": "vllm-7"}))
    spans = [_span(0, own, True), _span(1, [], False), _span(2, [], True), _span(3, own, False)]
    doc = {
        "resourceSpans": [{"resource": {"attributes": resource}, "scopeSpans": [{"spans": spans}]}]
    }
    fast, slow = _read(doc, True), _read(doc, False)
    assert not fast.cols["attributes"] and fast._pending  # the batch path produced it
    assert fast.table().equals(slow.table())
    got = [orjson.loads(a) for a in fast.table()["attributes"].to_pylist()]
    # an overriding span value keeps the resource's place, as dict merging does
    keys = ["service.name", "k8s.pod.name", "gen_ai.usage.prompt_tokens", "x", "tailtriage.events"]
    assert list(got[0]) == keys
    assert got[0]["k8s.pod.name"] == ("vllm-7" if override else "vllm-0")
    assert got[1] == {"service.name": "vllm", "k8s.pod.name": "vllm-0"}
    assert got[2]["tailtriage.events"] == {"first_token": 0.25}
