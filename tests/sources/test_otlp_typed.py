"""The two OTLP/JSON span readers must agree: the typed fast path (msgspec Structs, a scope's
spans column by column) gives exactly what the careful path (orjson dicts, span by span)
gives: same rows in the same order, same attributes JSON (redacted and truncated alike), same
quality counts and warnings, whether it takes a line or hands it back (odd spans, snake_case
names, instrumentationLibrarySpans, array and kvlist values, secrets, long values)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import DATA
from tailtriage.sources import otlp_json
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.redact import REDACTED
from tailtriage.sources.spans import SpanColumns

_HEX = "0123456789abcdef"

_values = st.one_of(
    st.builds(lambda s: {"stringValue": s}, st.text(max_size=12)),
    st.builds(lambda s: {"stringValue": s}, st.sampled_from(["a=b", "https://u:p@h/x?token=1"])),
    st.builds(lambda i: {"intValue": str(i)}, st.integers(-(2**70), 2**70)),
    st.builds(lambda i: {"intValue": i}, st.integers(-(2**62), 2**62)),
    st.builds(lambda f: {"doubleValue": f}, st.floats(allow_nan=False, allow_infinity=False)),
    st.builds(lambda b: {"boolValue": b}, st.booleans()),
    st.just({"arrayValue": {"values": [{"intValue": "3"}, {"stringValue": "x"}]}}),
    st.just({}),
    st.just("not an AnyValue"),
)
_keys = st.sampled_from(
    ["http.route", "gen_ai.usage.prompt_tokens", "Authorization", "x-api-key", "k", "service.name"]
)
_attr = st.one_of(
    st.builds(lambda k, v: {"key": k, "value": v}, _keys, _values),
    st.just({"key": "no value"}),
)


@st.composite
def _span(draw: st.DrawFn) -> dict[str, Any]:
    odd = draw(st.integers(0, 9)) == 0  # most spans are well formed, as in real files
    hexid = st.text(_HEX, min_size=16, max_size=16)
    sp: dict[str, Any] = {
        "traceId": draw(hexid) + draw(hexid),
        "spanId": draw(hexid),
        "name": draw(st.sampled_from(["llm_request", "POST /v1/chat/completions", "x"])),
        "kind": draw(st.integers(0, 5)),
        "startTimeUnixNano": str(1_767_225_600_000_000_000 + draw(st.integers(0, 10**12))),
        "attributes": draw(st.lists(_attr, max_size=6)),
        "status": draw(st.sampled_from([{}, {"code": 2}, {"code": 1, "message": "m"}])),
    }
    sp["endTimeUnixNano"] = str(int(sp["startTimeUnixNano"]) + draw(st.integers(0, 10**10)))
    if draw(st.booleans()):
        sp["parentSpanId"] = draw(st.sampled_from(["", draw(hexid)]))
    if draw(st.booleans()):
        t = sp["startTimeUnixNano"]
        sp["events"] = [{"name": n, "timeUnixNano": t} for n in draw(st.lists(st.text(max_size=3)))]
    if odd:
        field, value = draw(
            st.sampled_from(
                [
                    ("traceId", "AB" * 16),
                    ("spanId", "123"),
                    ("kind", "SPAN_KIND_CLIENT"),
                    ("startTimeUnixNano", int(sp["startTimeUnixNano"])),
                    ("endTimeUnixNano", "1"),
                    ("status", "weird"),
                    ("name", 7),
                    ("events", [{"name": "e"}]),
                ]
            )
        )
        sp[field] = value
    return sp


def _lines_read(lines: list[bytes], typed: bool, monkeypatch: pytest.MonkeyPatch) -> SpanColumns:
    cols = SpanColumns("f.jsonl", "otlp_json", max_attribute_bytes=200)
    with monkeypatch.context() as m:
        if not typed:
            m.setattr(otlp_json, "read_typed", lambda data, cols: False)
        otlp_json.read_lines(lines, Path("f.jsonl"), cols, ReadOptions())
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
    ("value", "stored"),
    [({"stringValue": "s"}, "s"), ({"intValue": "12"}, 12), ({"intValue": 12}, 12),
     ({"intValue": "x1"}, "x1"), ({"doubleValue": 1}, 1), ({"doubleValue": 1.5}, 1.5),
     ({"doubleValue": "NaN"}, "NaN"), ({"boolValue": True}, True), ({"bytesValue": "AAE="}, "AAE="),
     ({}, None)],
)  # fmt: skip
def test_well_formed_lines_are_taken_by_the_typed_reader(
    value: dict[str, Any], stored: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _clean_line(1, value)
    cols = SpanColumns("f.jsonl", "otlp_json")
    assert otlp_json.read_typed(line, cols)
    _same([line, _clean_line(2, value)], monkeypatch)
    # a JSON number stays an integer or a float as written
    (attrs,) = cols.table()["attributes"].to_pylist()
    assert orjson.loads(attrs)["v"] == stored
    assert type(orjson.loads(attrs)["v"]) is type(stored)


@pytest.mark.parametrize(
    "value",
    [{"arrayValue": {"values": [{"stringValue": "Bearer abcdefghijkl"}]}},
     {"kvlistValue": {"values": [{"key": "authorization", "value": {"stringValue": "s"}}]}},
     {"stringValue": None}, {"intValue": [1]}],
)  # fmt: skip
def test_nested_and_malformed_values_go_through_the_careful_reader(
    value: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _clean_line(1, value)
    assert not otlp_json.read_typed(line, SpanColumns("f.jsonl", "otlp_json"))
    _same([line], monkeypatch)


def test_nested_values_are_decoded_and_redacted_at_every_depth() -> None:
    value = {
        "kvlistValue": {
            "values": [
                {"key": "authorization", "value": {"stringValue": "s3cr3t"}},
                {"key": "n", "value": {"arrayValue": {"values": [{"intValue": "3"}, {}]}}},
            ]
        }
    }
    cols = SpanColumns("f.jsonl", "otlp_json")
    otlp_json.read_lines([_clean_line(1, value)], Path("f.jsonl"), cols, ReadOptions())
    (attrs,) = cols.table()["attributes"].to_pylist()
    assert orjson.loads(attrs)["v"] == {"authorization": REDACTED, "n": [3, None]}


def test_a_malformed_attribute_is_skipped_counted_and_named() -> None:
    cols = SpanColumns("f.jsonl", "otlp_json")
    line = _clean_line(1, {"stringValue": None})
    otlp_json.read_lines([line], Path("f.jsonl"), cols, ReadOptions())
    (attrs,) = cols.table()["attributes"].to_pylist()
    assert "v" not in orjson.loads(attrs) and orjson.loads(attrs)["gen_ai.request.model"] == "m"
    assert cols.counts == {"attributes.invalid": 1, "otlp.good_lines": 1}
    assert cols.warnings[0].startswith(
        "f.jsonl:line 1 resourceSpans[0].scopeSpans[0].spans[0].attributes[1]: "
    )


def test_secret_keys_stay_on_the_typed_reader_and_are_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line = _clean_line(1, {"stringValue": "Bearer abcdefghijkl"}).replace(
        b'"v"', b'"authorization"'
    )
    cols = SpanColumns("f.jsonl", "otlp_json")
    assert otlp_json.read_typed(line, cols)
    _same([line], monkeypatch)
    (attrs,) = cols.table()["attributes"].to_pylist()
    assert orjson.loads(attrs)["authorization"] == REDACTED


def test_the_sample_trace_as_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = orjson.loads((DATA / "otlp" / "trace.json").read_bytes())
    _same([orjson.dumps(doc) + b"\n"] * 2, monkeypatch)


def test_attributes_run_splits_at_each_span() -> None:
    """Values holding commas, braces, quotes and escaped NULs stay with their own span."""
    tricky = ['},{"', "\x00", '"\\', "]"]
    spans = [
        {
            "traceId": "a" * 32,
            "spanId": f"{i + 1:016x}",
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
            "attributes": [{"key": "v", "value": {"stringValue": s}}],
        }
        for i, s in enumerate(tricky)
    ]
    cols = SpanColumns("f.jsonl", "otlp_json", max_attribute_bytes=200)
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    assert otlp_json.read_typed(orjson.dumps(doc), cols)
    # taken as one run (pending until a few MB have gathered), not span by span
    assert not cols.cols["attributes"] and cols._pending
    got = [orjson.loads(a)["v"] for a in cols.table()["attributes"].to_pylist()]
    assert len(cols.cols["attributes"]) == 1
    assert got == tricky
    assert pa.types.is_string(cols.table()["attributes"].type)
