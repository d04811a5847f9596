"""Spans read where they live (ClickHouse ``otel_traces``, through chDB) get file ingest's
issue-21 rules: secrets in what comes back are redacted before a report or a capture sees
them, and implausible times are dropped and counted exactly as file ingest counts them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from trace_builders import T0, otlp_doc, tid, vllm_trace, write_jsonl

from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze
from tailtriage.pipeline.triage import triage
from tailtriage.renderers.jsonrenderer import dumps
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_file
from tailtriage.sources.plausible import AFTER_MEDIAN_S
from tailtriage.sources.redact import REDACTED
from tailtriage.store.clickhouse import ClickHouseStore, connect, ingest
from tailtriage.store.clickhouse_export import export_spans
from tailtriage.store.clickhouse_url import parse_url
from tailtriage.store.input import load_capture, open_input

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SECRET = "PLANTEDx9Qz7Lm3Vb8Kd2Rf6Tn4Wy1"
#: the largest ``Duration`` the exporter's UInt64 column holds (584 years): a 10^25 ns
#: duration cannot be stored, this is the nearest a table can come
MAX_UINT64 = 2**64 - 1
#: a start in 2255 (int64 nanoseconds, as near year 20000 as ``DateTime64(9)`` goes)
LATE_NS = 9_000_000_000 * 10**9


def url_of(tmp_path: Path) -> str:
    return f"chdb://{tmp_path / 'ch'}?table=otel_traces"


def export(tmp_path: Path, spans: pa.Table) -> str:
    url = url_of(tmp_path)
    target = parse_url(url)
    engine = connect(target)
    try:
        export_spans(engine, target, spans)
    finally:
        engine.close()
    return url


def slow_every_fourth() -> list[dict[str, Any]]:
    return [otlp_doc(vllm_trace(i, i * 0.5, queue=0.2 + 3.0 * (i % 4 == 0))) for i in range(40)]


# -- secrets ------------------------------------------------------------------------------------
def planted(raw: Capture) -> pa.Table:
    """The spans with secrets planted where a reader would have redacted them: a ClickHouse
    table is filled by the Collector, not by tailtriage, so it holds them as sent."""
    rows = raw.spans.to_pylist()
    for r in rows:
        attrs = orjson.loads(r["attributes"]) if r["attributes"] else {}
        if r["name"] == "llm_request":
            attrs["k8s.pod.name"] = f"vllm-0 Authorization: Bearer {SECRET}1"
            attrs["exception.message"] = f"401 Unauthorized: invalid key sk-proj-{SECRET}2"
            if r["trace_id"] == tid(0):
                r["status"] = "error"
                attrs["error.type"] = f"AuthError sk-proj-{SECRET}3"
        if r["parent_id"] is None:  # the gateway's span, named after the URL it served
            r["name"] = f"GET /v1/chat?api_key={SECRET}4"
        r["attributes"] = orjson.dumps(attrs).decode()
    return pa.Table.from_pylist(rows, schema=raw.spans.schema)


def test_planted_secrets_in_otel_traces_never_reach_the_report(tmp_path: Path) -> None:
    raw = read_file(write_jsonl(tmp_path / "t.jsonl", slow_every_fourth()), ReadOptions())
    url = export(tmp_path, planted(raw))
    with open_input(url) as store:
        report = triage(store, "p95 ttft < 500ms", whatif=False)
    text = dumps(report)
    assert SECRET not in text
    # the planted values did come back (pod name, the waterfall's span name), redacted
    assert f'"vllm-0 Authorization: {REDACTED}' in text  # a replica
    assert f'"GET /v1/chat?api_key={REDACTED}"' in text  # a waterfall span


def test_requests_pulled_from_clickhouse_are_redacted(tmp_path: Path) -> None:
    raw = read_file(write_jsonl(tmp_path / "t.jsonl", slow_every_fourth()), ReadOptions())
    url = export(tmp_path, planted(raw))
    with ClickHouseStore(parse_url(url)) as store:
        cap = ingest(store)
    text = dumps({"requests": cap.requests.to_pylist(), "stages": cap.stages.to_pylist()})
    assert SECRET not in text
    errors = {r["error"] for r in cap.requests.to_pylist()} - {None}
    assert errors == {f"AuthError {REDACTED}"}


# -- implausible times --------------------------------------------------------------------------
def shifted(doc: dict[str, Any], start_ns: int | None, long_span: str | None) -> None:
    """Move every span of ``doc`` to start at ``start_ns`` and/or make ``long_span`` last
    ``MAX_UINT64`` ns."""
    for rs in doc["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            s, e = int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])
            if start_ns is not None:
                s, e = start_ns + (s - int(T0 * 1e9)), start_ns + (e - int(T0 * 1e9))
            if sp["name"] == long_span:
                e = s + MAX_UINT64
            sp["startTimeUnixNano"], sp["endTimeUnixNano"] = str(s), str(e)


def implausible_docs() -> list[dict[str, Any]]:
    docs = slow_every_fourth()
    shifted(docs[1], 0, None)  # epoch 0
    shifted(docs[2], LATE_NS, None)  # past 2100
    shifted(docs[3], None, "llm_request")  # a 584-year span
    shifted(docs[5], int((T0 + 3 * AFTER_MEDIAN_S) * 1e9), None)  # days after the rest
    return docs


def test_implausible_times_count_and_cut_as_file_ingest_does(tmp_path: Path) -> None:
    docs = implausible_docs()
    path = write_jsonl(tmp_path / "t.jsonl", docs)
    from_file = load_capture(path)
    # the same spans into otel_traces, as the Collector would write them (the 584-year
    # Duration set in SQL: the exporter's float seconds cannot carry it)
    good = write_jsonl(tmp_path / "good.jsonl", [d for i, d in enumerate(docs) if i != 3])
    url = export(tmp_path, read_file(good, ReadOptions()).spans)
    ok3 = slow_every_fourth()[3]
    export(tmp_path, read_file(write_jsonl(tmp_path / "3.jsonl", [ok3]), ReadOptions()).spans)
    target = parse_url(url)
    engine = connect(target)
    try:
        engine.command(
            f"ALTER TABLE {target.qualified_table} UPDATE Duration = {MAX_UINT64} "
            f"WHERE TraceId = '{tid(3)}' AND SpanName = 'llm_request' "
            "SETTINGS mutations_sync = 1"
        )
    finally:
        engine.close()
    slos = "p95 ttft < 500ms, p99 e2e < 10s"
    with open_input(url) as store:
        by_file, by_ch = analyze(from_file, slos), analyze(store, slos)
    want = {k: v for k, v in by_file.data_quality.counts.items() if k.startswith("time.")}
    got = {k: v for k, v in by_ch.data_quality.counts.items() if k.startswith("time.")}
    assert set(want) == {
        "time.before_2000.spans",
        "time.after_2100.spans",
        "time.over_a_day.spans",
        "time.after_median.spans",
    }
    assert got == want
    assert by_ch.data_quality.requests == by_file.data_quality.requests < len(docs)
    observed = [s.observed for s in by_ch.slos]
    assert observed == pytest.approx([s.observed for s in by_file.slos], rel=1e-9)
    assert all(v is not None and v < 10.0 for v in observed)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
