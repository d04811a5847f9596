"""Impossible timestamps are dropped and counted by reason, never in a percentile or a window
(issue 21)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from trace_builders import T0, otlp_doc, tid, vllm_trace, write_jsonl

from tailtriage.pipeline.analyze import analyze
from tailtriage.renderers import render
from tailtriage.sources.plausible import AFTER_MEDIAN_S, EARLIEST_S
from tailtriage.store.input import load_capture


def spans_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [sp for rs in doc["resourceSpans"] for sp in rs["scopeSpans"][0]["spans"]]


def test_a_span_ending_past_uint64_does_not_hijack_the_percentiles(tmp_path: Path) -> None:
    docs = [otlp_doc(vllm_trace(i, float(i))) for i in range(201)]
    for sp in spans_of(docs[7]):
        sp["endTimeUnixNano"] = str(2**64 + 5)  # past uint64
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", docs))
    assert cap.metadata.quality["time.over_a_day.spans"] == 4
    assert cap.requests.num_rows == 200
    report = analyze(cap, "p99 e2e < 10s")
    (slo,) = report.slos
    assert slo.observed is not None and slo.observed < 10.0


def test_a_request_at_epoch_0_does_not_open_the_window_in_1970(tmp_path: Path) -> None:
    docs = [otlp_doc(vllm_trace(i, float(i))) for i in range(50)]
    for sp in spans_of(docs[0]):
        sp["startTimeUnixNano"] = "0"
        sp["endTimeUnixNano"] = "1000000000"
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", docs))
    assert cap.metadata.quality["time.before_2000.spans"] == 4
    lo, _ = cap.time_range or (0.0, 0.0)
    assert lo >= EARLIEST_S


def jaeger_span(k: int, start_us: int, duration_us: int) -> dict[str, Any]:
    return {
        "traceID": tid(k), "spanID": f"{k:016x}", "operationName": "llm_request",
        "references": [], "startTime": start_us, "duration": duration_us, "processID": "p1",
        "tags": [{"key": "gen_ai.request.model", "type": "string", "value": "m"}],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("start_us", "duration_us", "reason"),
    [
        (0, 1000, "time.before_2000"),
        (-5_000_000, 1000, "time.before_2000"),
        (int(T0 * 1e6), 10**25, "time.over_a_day"),
        (int((T0 + 2 * AFTER_MEDIAN_S) * 1e6), 1000, "time.after_median"),
        (int(5.7e11 * 1e6), 1000, "time.after_2100"),  # year 20000
    ],
)
def test_jaeger_and_zipkin_implausible_times_are_dropped_by_reason(
    tmp_path: Path, start_us: int, duration_us: int, reason: str
) -> None:
    good = [jaeger_span(k, int((T0 + k) * 1e6), 200_000) for k in range(1, 6)]
    doc = {
        "data": [
            {
                "traceID": tid(1),
                "spans": [*good, jaeger_span(99, start_us, duration_us)],
                "processes": {"p1": {"serviceName": "vllm", "tags": []}},
            }
        ]
    }
    (tmp_path / "jaeger.json").write_text(json.dumps(doc))  # 10**25: beyond orjson
    zipkin = [
        {"traceId": tid(50 + k), "id": f"{50 + k:016x}", "name": "x", "timestamp": s["startTime"],
         "duration": s["duration"], "localEndpoint": {"serviceName": "z"}}
        for k, s in enumerate([*good, jaeger_span(98, start_us, duration_us)])
    ]  # fmt: skip
    (tmp_path / "zipkin.json").write_text(json.dumps(zipkin))
    cap = load_capture(tmp_path)
    assert cap.metadata.quality[f"{reason}.spans"] == 2
    assert cap.spans.num_rows == 10


def test_year_20000_everywhere_is_analysed_and_rendered_without_a_crash(tmp_path: Path) -> None:
    docs = [otlp_doc(vllm_trace(i, 5.7e11 - T0 + i)) for i in range(5)]
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", docs))
    assert cap.requests.num_rows == 0
    assert cap.metadata.quality["time.after_2100.spans"] == 20
    report = analyze(cap, "p95 ttft < 1s")
    for fmt in ("terminal", "json", "html"):
        assert render(report, fmt)
