"""OTLP/JSON metrics (the Collector's file exporter) land in ``series`` as Prometheus data does."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tailtriage.errors import ParseError
from tailtriage.pipeline.analyze import analyze
from tailtriage.sources.base import detect
from tailtriage.store.input import load_capture


def _rows(cap) -> dict[tuple[str, str], float]:  # type: ignore[no-untyped-def]
    return {(r["metric"], r["labels"]): r["value"] for r in cap.series.to_pylist()}


def test_the_real_sample_is_detected_and_every_point_kind_lands(shared_data: Path) -> None:
    path = shared_data / "otlp" / "metrics.json"
    source = detect(path)
    assert source is not None and source.name == "otlp_metrics_json"
    cap = load_capture(path)
    rows = {(m, orjson.loads(lab).get("le")): v for (m, lab), v in _rows(cap).items()}
    assert rows[("my.counter", None)] == 5
    assert rows[("my.gauge", None)] == 10
    # explicit buckets [1] with counts [1, 1]: cumulative 1 at le=1, 2 at +Inf
    assert rows[("my.histogram_bucket", "1")] == 1
    assert rows[("my.histogram_bucket", "+Inf")] == 2
    assert rows[("my.histogram_count", None)] == 2 and rows[("my.histogram_sum", None)] == 2
    # exponential, scale 0 (base 2), offset 1, counts [0, 2], one zero: (2,4] 0, (4,8] 2
    assert rows[("my.exponential.histogram_bucket", "0")] == 1
    assert rows[("my.exponential.histogram_bucket", "4")] == 1
    assert rows[("my.exponential.histogram_bucket", "8")] == 3
    labels = {orjson.loads(lab)["job"] for (_m, lab) in _rows(cap)}
    assert labels == {"my.service"}  # resource service.name, as Prometheus' job label


def _vllm_ttft_doc(t: float, counts: list[int], pod: str, delta: bool) -> dict[str, object]:
    bounds = [0.1, 0.25, 0.5, 1.0, 2.5]
    return {
        "resourceMetrics": [
            {
                "resource": {"attributes": [
                    {"key": "k8s.pod.name", "value": {"stringValue": pod}}]},
                "scopeMetrics": [{"metrics": [{
                    "name": "vllm:time_to_first_token_seconds",
                    "histogram": {
                        "aggregationTemporality": 1 if delta else 2,
                        "dataPoints": [{
                            "timeUnixNano": str(int(t * 1e9)),
                            "count": str(sum(counts)),
                            "sum": 0.3 * sum(counts),
                            "bucketCounts": [str(c) for c in counts],
                            "explicitBounds": bounds,
                            "attributes": [{"key": "model_name",
                                            "value": {"stringValue": "m"}}],
                        }],
                    },
                }]}],
            }
        ]
    }  # fmt: skip


def test_collector_lines_of_delta_histograms_feed_the_engine_percentiles(tmp_path: Path) -> None:
    t0 = 1_767_000_000.0
    # healthy scrapes: everything under 250 ms; then 40 % of each batch between 1 and 2.5 s
    healthy, slow = [50, 50, 0, 0, 0, 0], [30, 20, 5, 5, 40, 0]
    lines = [
        json.dumps(_vllm_ttft_doc(t0 + 15 * i, slow if 20 <= i < 28 else healthy, "p0", True))
        for i in range(40)
    ]
    path = tmp_path / "otel-metrics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rep = analyze(load_capture(path), "p95 ttft < 500ms")
    slo = rep.slos[0]
    assert slo.source == "engine_histograms" and slo.breached
    assert slo.ci_low == 1.0 and slo.ci_high == 2.5  # the bucket that holds the true p95
    lo, hi = rep.windows.incident
    assert t0 + 15 * 18 <= lo <= t0 + 15 * 21 and t0 + 15 * 26 <= hi <= t0 + 15 * 30


def test_a_broken_point_names_the_file_and_the_json_path(tmp_path: Path) -> None:
    doc = _vllm_ttft_doc(1.0, [1, 2, 3, 4, 5, 6], "p0", False)
    point = doc["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["histogram"]  # type: ignore[index]
    point["dataPoints"][0]["bucketCounts"] = ["1", "2"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ParseError, match=r"bad\.json.*dataPoints\[0\]"):
        load_capture(path)


@pytest.mark.parametrize(
    "doc",
    [
        {"resourceMetrics": ["not an object"]},
        {"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"name": "x", "gauge": {
            "dataPoints": [{"timeUnixNano": "1", "asDouble": "abc"}]}}]}]}]},
        {"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"name": "x", "gauge": {
            "dataPoints": [{"asDouble": 1}]}}]}]}]},
    ],
)  # fmt: skip
def test_malformed_documents_are_one_line_parse_errors(tmp_path: Path, doc: object) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ParseError) as err:
        load_capture(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
