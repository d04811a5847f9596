"""The OTLP/JSON batch reader (a whole ``spans`` list column by column) must give exactly what
the per-span reader gives: same rows in the same order, same attributes JSON (redacted and
truncated alike), same quality counts and warnings, for well-formed and odd spans mixed."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import DATA
from tailtriage.sources import otlp_json
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


def _read(doc: dict[str, Any], batch: bool, monkeypatch: pytest.MonkeyPatch) -> SpanColumns:
    cols = SpanColumns("f.jsonl", "otlp_json", max_attribute_bytes=200)
    with monkeypatch.context() as m:
        if not batch:
            m.setattr(otlp_json, "_fast_batch", lambda *a: False)
        otlp_json.read_request(doc, cols, "line 1")
    return cols


def _same(doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = _read(doc, True, monkeypatch), _read(doc, False, monkeypatch)
    assert fast.table().equals(slow.table())
    assert fast.counts == slow.counts
    assert fast.warnings == slow.warnings


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    spans=st.lists(_span(), min_size=1, max_size=12),
    resource=st.lists(_attr, max_size=3),
)
def test_batch_equals_per_span(
    spans: list[dict[str, Any]], resource: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = {
        "resourceSpans": [{"resource": {"attributes": resource}, "scopeSpans": [{"spans": spans}]}]
    }
    _same(doc, monkeypatch)


def test_batch_equals_per_span_on_real_example(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = orjson.loads((DATA / "otlp" / "trace.json").read_bytes())
    _same(doc, monkeypatch)


def test_batch_attributes_run_splits_at_each_span(monkeypatch: pytest.MonkeyPatch) -> None:
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
    cols = _read({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}, True, monkeypatch)
    # taken as one run (pending until a few MB have gathered), not span by span
    assert not cols.cols["attributes"] and cols._pending
    got = [orjson.loads(a)["v"] for a in cols.table()["attributes"].to_pylist()]
    assert len(cols.cols["attributes"]) == 1
    assert got == tricky
    assert pa.types.is_string(cols.table()["attributes"].type)
