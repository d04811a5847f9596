"""The typed OTLP/JSON line reader (msgspec Structs) must give exactly what the orjson reader
gives: same rows in the same order, same attributes JSON, same quality counts and warnings,
whether it takes a line or hands it back (odd spans, snake_case names,
instrumentationLibrarySpans, array values, secrets, long values)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_otlp_batch import _attr, _span

from support import DATA
from tailtriage.sources import otlp_json
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.spans import SpanColumns


def _lines_read(lines: list[bytes], typed: bool, monkeypatch: pytest.MonkeyPatch) -> SpanColumns:
    cols = SpanColumns("f.jsonl", "otlp_json", max_attribute_bytes=200)
    with monkeypatch.context() as m:
        if not typed:
            m.setattr(otlp_json, "_read_line_typed", lambda line, cols: False)
        otlp_json.OtlpJsonSource._read_lines(lines, Path("f.jsonl"), cols, ReadOptions())
    return cols


def _same(lines: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    typed, plain = _lines_read(lines, True, monkeypatch), _lines_read(lines, False, monkeypatch)
    assert typed.table().equals(plain.table())
    assert typed.counts == plain.counts
    assert typed.warnings == plain.warnings


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    spans = draw(st.lists(_span(), min_size=1, max_size=8))
    rs: dict[str, Any] = {"resource": {"attributes": draw(st.lists(_attr, max_size=3))}}
    layout = draw(st.sampled_from(["scopeSpans", "scopeSpans", "instrumentationLibrarySpans"]))
    rs[layout] = [{"spans": spans}]
    top = draw(st.sampled_from(["resourceSpans", "resourceSpans", "resource_spans"]))
    return orjson.dumps({top: [rs]}) + b"\n"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_line(), min_size=1, max_size=4))
def test_typed_lines_equal_the_orjson_reader(
    lines: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    _same(lines, monkeypatch)


def _clean_line(i: int, value: dict[str, Any]) -> bytes:
    span = {
        "traceId": f"{i:032x}",
        "spanId": f"{i + 1:016x}",
        "parentSpanId": "",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": 1767225600500000000,
        "attributes": [
            {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
            {"key": "v", "value": value},
        ],
        "events": [{"name": "first", "timeUnixNano": "1767225600100000000"}],
        "status": {"code": 1, "message": "ok"},
        "droppedAttributesCount": 0,
    }
    rs = {
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]},
        "scopeSpans": [{"scope": {"name": "x"}, "spans": [span]}],
    }
    return orjson.dumps({"resourceSpans": [rs]}) + b"\n"


@pytest.mark.parametrize(
    "value",
    [{"stringValue": "s"}, {"intValue": "12"}, {"intValue": 12}, {"doubleValue": 1},
     {"doubleValue": 1.5}, {"boolValue": True}, {}],
)  # fmt: skip
def test_well_formed_lines_are_taken_by_the_typed_reader(
    value: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _clean_line(1, value)
    cols = SpanColumns("f.jsonl", "otlp_json")
    assert otlp_json._read_line_typed(line, cols)
    _same([line, _clean_line(2, value)], monkeypatch)
    # a JSON number stays an integer or a float as written
    (attrs,) = cols.table()["attributes"].to_pylist()
    assert orjson.loads(attrs)["v"] == otlp_json.any_value(value)
    assert type(orjson.loads(attrs).get("v")) is type(otlp_json.any_value(value))


@pytest.mark.parametrize(
    "value",
    [{"arrayValue": {"values": []}}, {"kvlistValue": {"values": []}}, {"doubleValue": "NaN"},
     {"stringValue": None}],
)  # fmt: skip
def test_unusual_values_go_through_the_orjson_reader(
    value: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _clean_line(1, value)
    assert not otlp_json._read_line_typed(line, SpanColumns("f.jsonl", "otlp_json"))
    _same([line], monkeypatch)


def test_the_sample_trace_as_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = orjson.loads((DATA / "otlp" / "trace.json").read_bytes())
    _same([orjson.dumps(doc) + b"\n"] * 2, monkeypatch)
