"""Saved Prometheus HTTP API responses (query_range / query) into ``series``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.errors import InputError, ParseError
from tailtriage.sources import base
from tailtriage.sources.prometheus_api import SOURCE

OPTS = base.ReadOptions()

# The shape Prometheus answers /api/v1/query_range with (docs/querying/api.md).
MATRIX: dict[str, Any] = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {
                "metric": {
                    "__name__": "vllm:num_requests_waiting",
                    "engine": "0",
                    "instance": "10.0.0.7:8000",
                    "job": "vllm",
                    "model_name": "meta-llama/Llama-3.1-8B-Instruct",
                },
                "values": [[1714564800, "0"], [1714564815, "12"], [1714564830.5, "NaN"]],
            },
            {
                "metric": {
                    "__name__": "vllm:e2e_request_latency_seconds_bucket",
                    "le": "+Inf",
                    "model_name": "m",
                },
                "values": [[1714564800, "3"], [1714564815, "+Inf"]],
            },
        ],
    },
    "warnings": ["PromQL info: metric might not be a counter"],
}


def _write(tmp_path: Path, doc: Any, name: str = "resp") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc, indent=1))
    return p


def test_query_range_matrix(tmp_path: Path) -> None:
    path = _write(tmp_path, MATRIX)
    assert base.detect(path) is SOURCE
    cap = SOURCE.read(path, OPTS)
    rows = cap.series.to_pylist()
    assert len(rows) == 5
    first = rows[0]
    assert first["metric"] == "vllm:num_requests_waiting"
    assert json.loads(first["labels"]) == {
        "engine": "0",
        "instance": "10.0.0.7:8000",
        "job": "vllm",
        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
    }
    assert [r["value"] for r in rows[:2]] == [0.0, 12.0]
    assert rows[2]["time"] == 1714564830.5 and math.isnan(rows[2]["value"])
    assert rows[4]["value"] == math.inf
    assert json.loads(rows[3]["labels"]) == {"le": "+Inf", "model_name": "m"}
    assert any("might not be a counter" in w for w in cap.metadata.warnings)
    assert cap.metadata.provenance[0].format == "prometheus_api"


def test_instant_vector_scalar_and_json_lines(tmp_path: Path) -> None:
    vector = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"__name__": "up", "job": "vllm"}, "value": [1714564800.1, "1"]},
                {"metric": {"job": "vllm"}, "value": [1714564800.1, "0.25"]},  # rate(...)
            ],
        },
    }
    scalar = {"status": "success", "data": {"resultType": "scalar", "result": [1714564801, "7"]}}
    path = tmp_path / "lines.jsonl"
    path.write_text(json.dumps(vector) + "\n" + json.dumps(scalar) + "\n")
    assert base.detect(path) is SOURCE
    rows = SOURCE.read(path, OPTS).series.to_pylist()
    assert [(r["metric"], r["time"], r["value"]) for r in rows] == [
        ("up", 1714564800.1, 1.0),
        ("", 1714564800.1, 0.25),
        ("", 1714564801.0, 7.0),
    ]


def test_native_histogram_becomes_cumulative_buckets(tmp_path: Path) -> None:
    doc = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {
                    "metric": {"__name__": "vllm:time_to_first_token_seconds"},
                    "histogram": [
                        1714564800,
                        {
                            "count": "6",
                            "sum": "1.5",
                            "buckets": [[0, "0", "0.25", "2"], [0, "0.25", "0.5", "3"]],
                        },
                    ],
                }
            ],
        },
    }
    rows = SOURCE.read(_write(tmp_path, doc), OPTS).series.to_pylist()
    got = {(r["metric"], json.loads(r["labels"]).get("le")): r["value"] for r in rows}
    assert got == {
        ("vllm:time_to_first_token_seconds_bucket", "0.25"): 2.0,
        ("vllm:time_to_first_token_seconds_bucket", "0.5"): 5.0,
        ("vllm:time_to_first_token_seconds_bucket", "+Inf"): 6.0,
        ("vllm:time_to_first_token_seconds_count", None): 6.0,
        ("vllm:time_to_first_token_seconds_sum", None): 1.5,
    }


def test_error_response_is_a_clear_one_line_error(tmp_path: Path) -> None:
    doc = {
        "status": "error",
        "errorType": "bad_data",
        "error": 'parse error at char 5: unexpected "{"',
    }
    path = _write(tmp_path, doc, "err.json")
    assert base.detect(path) is SOURCE
    with pytest.raises(InputError) as info:
        SOURCE.read(path, OPTS)
    msg = str(info.value)
    assert "err.json" in msg and "bad_data" in msg and "unexpected" in msg and "\n" not in msg
    assert not isinstance(info.value, ParseError)


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d["data"].update(resultType="table"), "$.data"),
        (lambda d: d["data"]["result"][0].update(values=[[1, "x"]]), "values[0][1]"),
        (lambda d: d["data"]["result"][1].update(values=[[1]]), "result[1].values[0]"),
        (lambda d: d["data"].update(result={}), "$.data.result"),
    ],
)
def test_malformed_response_names_file_and_json_path(
    tmp_path: Path, mutate: Any, where: str
) -> None:
    doc = json.loads(json.dumps(MATRIX))
    mutate(doc)
    path = _write(tmp_path, doc)
    with pytest.raises(ParseError) as info:
        SOURCE.read(path, OPTS)
    assert str(path) in str(info.value) and where in str(info.value)


def test_truncated_json_is_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(MATRIX)[:60])
    with pytest.raises(ParseError, match=r"cut\.json"):
        SOURCE.read(path, OPTS)
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(MATRIX, indent=2)[:300])
    with pytest.raises(ParseError, match=r"pretty\.json:line \d+, column \d+: invalid JSON"):
        SOURCE.read(pretty, OPTS)


def test_trace_documents_are_not_sniffed(shared_data: Path) -> None:
    for name in ("otlp/trace.json", "jaeger/ui_01.json", "zipkin/yelp.json", "otlp/metrics.json"):
        p = shared_data / name
        assert not SOURCE.sniff(p.read_bytes()[: base.SNIFF_BYTES], p)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 4e9, allow_nan=False),
            st.floats(allow_nan=False, allow_infinity=True),
        ),
        max_size=20,
    )
)
def test_values_written_as_strings_read_back(
    tmp_path_factory: pytest.TempPathFactory, points: list[tuple[float, float]]
) -> None:
    def prom(v: float) -> str:  # how Prometheus formats sample values
        return "+Inf" if v == math.inf else "-Inf" if v == -math.inf else repr(v)

    doc = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"__name__": "x"}, "values": [[t, prom(v)] for t, v in points]}],
        },
    }
    path = _write(tmp_path_factory.mktemp("h"), doc)
    rows = SOURCE.read(path, OPTS).series.to_pylist()
    assert [(r["time"], r["value"]) for r in rows] == points
