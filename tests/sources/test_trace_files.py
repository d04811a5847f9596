"""Every real trace file in shared/data: the values read (ids, times, parents, kinds,
duplicates, shared spans, skew), checked against the raw JSON, not against our own output."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from support import DATA
from tailtriage.sources.base import ReadOptions, detect
from tailtriage.sources.zipkin import split_shared_id
from tailtriage.store.input import load_capture


def rows(table: object) -> dict[str, dict[str, object]]:
    return {r["span_id"]: r for r in table.to_pylist()}  # type: ignore[attr-defined]


def test_otlp_example_trace() -> None:
    path = DATA / "otlp" / "trace.json"
    assert detect(path).name == "otlp_json"  # type: ignore[union-attr]
    cap = load_capture(path)
    raw = json.loads(path.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    (sp,) = cap.spans.to_pylist()
    assert sp["trace_id"] == raw["traceId"].lower() and sp["span_id"] == raw["spanId"].lower()
    assert sp["parent_id"] == raw["parentSpanId"].lower()
    assert sp["start"] == int(raw["startTimeUnixNano"]) / 1e9
    assert sp["end"] - sp["start"] == pytest.approx(1.0)
    assert sp["kind"] == "SERVER" and sp["service"] == "my.service" and sp["name"] == raw["name"]
    attrs = orjson.loads(sp["attributes"])
    assert attrs["my.span.attr"] == "some value" and attrs["service.name"] == "my.service"
    assert cap.metadata.quality["spans.orphan"] == 1  # its parent is not in the file
    assert cap.requests.num_rows == 0  # no inference span: not a request


def test_jaeger_ui_file() -> None:
    path = DATA / "jaeger" / "ui_01.json"
    raw = json.loads(path.read_text())
    src = detect(path)
    assert src is not None and src.name == "jaeger"
    read = src.read(path, ReadOptions())
    assert read.spans.num_rows == len(raw["spans"]) == 5
    cap = load_capture(path)
    assert cap.spans.num_rows == 4  # span id ...0002 appears twice: one copy kept
    assert cap.metadata.quality["spans.duplicate_id"] == 1
    assert cap.metadata.quality["spans.cross_trace_reference"] == 1
    by = rows(cap.spans)
    pad = "0" * 16
    s2, s3, s4, s5 = (by[f"{i:016x}"] for i in (2, 3, 4, 5))
    assert s2["trace_id"] == pad + "0000000000000001"
    # the copies agree on start, parent, end and kind; the kept one is the first by status
    # ("error" < "unset"), whatever their order in the file (the order ClickHouse keeps too)
    assert s2["name"] == raw["spans"][1]["operationName"] and s2["status"] == "error"
    assert s3["parent_id"] == s2["span_id"]
    assert s4["parent_id"] == s2["span_id"]  # the CHILD_OF in the same trace, not ...00ff
    assert s5["parent_id"] == s4["span_id"]
    assert s2["start"] == pytest.approx(1485467191.639875)
    assert s2["end"] - s2["start"] == pytest.approx(5e-6, abs=1e-6)
    assert s5["end"] - s5["start"] == pytest.approx(4e-6, abs=1e-6)
    assert s2["service"] == "service-x" and s3["service"] == "service-y"
    # typed tags, read into the copy kept
    tags = orjson.loads(s2["attributes"])
    assert tags["peer.ipv4"] == 23456 and tags["temperature"] == 72.5
    assert tags["javascript_limit"] == 9223372036854775222 and tags["blob"] == "AAAwOQ=="
    # logs, read into the copy that derive drops
    dropped = [
        r
        for r in read.spans.to_pylist()
        if r["name"] == raw["spans"][0]["operationName"] and r["span_id"].endswith("2")
    ]
    assert orjson.loads(dropped[0]["attributes"])["tailtriage.events"] == {"some-event": 0.0}


def test_jaeger_domain_form_reads_base64_ids_and_rfc3339_times() -> None:
    """The api_v2 / domain form: base64 ids, RFC 3339 times with ns, Go durations."""
    path = DATA / "jaeger" / "domain_01.json"
    raw = json.loads(path.read_text())["spans"]
    cap = load_capture(path)
    by = {r["span_id"]: r for r in cap.spans.to_pylist()}
    # "AAAAAAAAAAM=" is the 8 bytes 00..03; its CHILD_OF "AAAAAAAAAAI=" is ..02
    assert by["0000000000000003"]["parent_id"] == "0000000000000002"
    assert by["0000000000000003"]["trace_id"] == "0" * 31 + "1"
    # the first CHILD_OF into the same trace wins over one into another trace
    assert by["0000000000000004"]["parent_id"] == "0000000000000002"
    # 2017-01-26T16:46:31.639875139-05:00 is 21:46:31.639875139 UTC
    start = by["0000000000000005"]["start"]
    assert start == pytest.approx(1485467191.639875139, abs=1e-6)
    assert by["0000000000000005"]["end"] - start == pytest.approx(4e-6, abs=1e-6)
    tagged = next(s for s in raw if s.get("tags"))
    attrs = next(
        orjson.loads(r["attributes"])
        for r in cap.spans.to_pylist()
        if r["name"] == tagged["operationName"] and "peer.service" in r["attributes"]
    )
    assert attrs["peer.service"] == "service-y" and attrs["temperature"] == 72.5
    assert attrs["javascript_limit"] == 9223372036854775222
    assert {r["service"] for r in cap.spans.to_pylist()} == {"service-x", "service-y"}


def test_zipkin_shared_span_and_clock_skew() -> None:
    path = DATA / "zipkin" / "skew.json"
    raw = {(s["id"], s.get("kind")): s for s in json.loads(path.read_text())}
    cap = load_capture(path)
    by = rows(cap.spans)
    assert len(by) == 4
    client = by["74280ae0c10d8062"]
    server_id = split_shared_id(client["trace_id"], "74280ae0c10d8062")
    server = by[server_id]
    assert server["kind"] == "SERVER" and server["parent_id"] == client["span_id"]
    assert by["43210ae0c10d1234"]["parent_id"] == server_id  # the async child follows the server
    assert client["trace_id"] == "0" * 16 + "1e223ff1f80f1c69"  # 64-bit id padded
    # Jaeger adjuster: server fits in the client once centred (latency split evenly)
    c, s = raw[("74280ae0c10d8062", "CLIENT")], raw[("74280ae0c10d8062", "SERVER")]
    expected_delta_us = c["timestamp"] + (c["duration"] - s["duration"]) / 2 - s["timestamp"]
    adj = {a.span_id: a.delta for a in cap.metadata.clock_adjustments}
    assert adj[server_id] == pytest.approx(expected_delta_us / 1e6, abs=1e-6)
    # the async span is on the server's host: it moves by the same delta
    assert adj["43210ae0c10d1234"] == pytest.approx(adj[server_id])
    assert server["start"] == pytest.approx((s["timestamp"] + expected_delta_us) / 1e6)
    assert client["start"] <= server["start"] and server["end"] <= client["end"]
    assert cap.metadata.quality["spans.clock_skew_adjusted"] == 2
    root = by["bf396325699c84bf"]
    assert root["start"] == raw[("bf396325699c84bf", "SERVER")]["timestamp"] / 1e6  # not moved


@pytest.mark.parametrize("name", ["yelp.json", "simple-db-p6.json"])
def test_zipkin_traces(name: str) -> None:
    path = DATA / "zipkin" / name
    raw = json.loads(path.read_text())
    clients = {(s["traceId"], s["id"]) for s in raw if s.get("kind") == "CLIENT"}
    splits = sum(1 for s in raw if s.get("shared") and (s["traceId"], s["id"]) in clients)
    cap = load_capture(path)
    assert cap.spans.num_rows == len(raw)
    assert cap.metadata.quality.get("spans.shared_id_split", 0) == splits
    assert len(set(cap.spans["span_id"].to_pylist())) == len(raw)  # ids unique after the split
    services = {s["localEndpoint"]["serviceName"] for s in raw}
    assert set(cap.spans["service"].to_pylist()) == services
    durations = sorted(s.get("duration", 0) / 1e6 for s in raw)
    got = sorted(r["end"] - r["start"] for r in cap.spans.to_pylist())
    assert got == pytest.approx(durations, abs=1e-6)


def test_every_trace_file_in_data_is_detected() -> None:
    names = {
        Path("otlp/trace.json"): "otlp_json",
        Path("jaeger/ui_01.json"): "jaeger",
        Path("jaeger/domain_01.json"): "jaeger_domain",
        Path("zipkin/skew.json"): "zipkin",
        Path("zipkin/yelp.json"): "zipkin",
        Path("zipkin/simple-db-p6.json"): "zipkin",
    }
    for rel, source in names.items():
        found = detect(DATA / rel)
        assert found is not None and found.name == source, rel
