"""The JSON renderer writes design 3.5, and Report.from_dict reads it back."""

from __future__ import annotations

import math
from dataclasses import replace

import orjson
from golden_support import assert_golden
from hypothesis import given, settings
from hypothesis import strategies as st

from renderers.report_builders import (
    STAGE_MS,
    make_empty_report,
    make_hostile_report,
    make_report,
)
from tailtriage.analyses.results import SloResult, SloSpec, StageMove, StageValue
from tailtriage.remediation.actions import Remediation
from tailtriage.renderers import render
from tailtriage.report import Report
from tailtriage.report_sections import sections_from


def test_required_fields_of_design_3_5() -> None:
    doc = orjson.loads(render(make_report(), "json"))
    assert doc["schema_version"] == 1
    slo = doc["slos"][0]
    assert (
        slo["metric"],
        slo["percentile"],
        slo["threshold_ms"],
        slo["observed_ms"],
        slo["breached"],
    ) == (
        "ttft",
        95.0,
        500.0,
        800.0,
        True,
    )
    assert doc["windows"]["incident"][1] - doc["windows"]["incident"][0] == 600.0
    stages = {s["stage"]: (s["ms"], s["baseline_ms"]) for s in doc["decomposition"]["stages"]}
    assert stages == {s: (ms, b) for s, ms, b in STAGE_MS}
    assert doc["findings"][0]["category"] == "scaling_lag"
    assert doc["findings"][0]["evidence"][0].keys() >= {"signal", "value", "detail"}
    rem = doc["remediations"][2]
    assert rem["predicted"] == {"ttft_p95_ms": 370.0, "throughput_change_pct": -6.5}
    assert rem["parameters"]["engine.max_num_batched_tokens"] == 128
    assert doc["data_quality"].keys() >= {
        "requests",
        "spans",
        "unattributed_share",
        "skipped_files",
        "warnings",
    }


def test_charts_are_in_milliseconds() -> None:
    doc = orjson.loads(render(make_report(), "json"))
    charts = doc["charts"]
    assert charts["waterfall"][1] == {
        "stage": "pending",
        "offset_ms": 50.0,
        "duration_ms": 200.0,
        "span": "activator buffering",
    }
    rep = charts["replicas"]["llm-7f9c-0"]
    assert rep == {"count": 900.0, "ttft_p95_ms": 620.0, "itl_p95_ms": 31.0}
    assert all(0 < f < 1 for _, f in charts["cdfs_ms"]["ttft"])


def test_worked_example_matches_golden() -> None:
    assert_golden("report_worked_example.json", render(make_report(), "json"))


def test_compact_is_one_line() -> None:
    assert render(make_report(), "json", indent=False).count("\n") == 1


def test_non_finite_numbers_become_null() -> None:
    nan_rate = sections_from({"compare": {"throughput": {"before": {"requests_per_s": math.nan}}}})
    r = replace(make_report(), throughput={"requests_per_s": math.inf}, sections=nan_rate)
    doc = orjson.loads(render(r, "json"))
    assert doc["throughput"]["requests_per_s"] is None
    assert doc["extra"]["compare"]["throughput"]["before"]["requests_per_s"] is None


def _roundtrip(r: Report) -> None:
    d = orjson.loads(render(r, "json"))
    again = Report.from_dict(d)
    assert orjson.loads(render(again, "json")) == d


def test_from_dict_round_trips_builders() -> None:
    for r in (make_report(), make_empty_report(), make_hostile_report()):
        _roundtrip(r)


def test_from_dict_restores_seconds() -> None:
    r = Report.from_dict(orjson.loads(render(make_report(), "json")))
    assert r.slos[0].observed == 0.8 and r.slos[0].spec.threshold == 0.5
    assert r.decomposition is not None and math.isclose(r.decomposition.total, 0.8)
    assert r.remediations[2].predicted["ttft_p95"] == 0.37
    assert r.charts.replicas["llm-7f9c-1"]["ttft_p95"] == 0.67
    assert r.charts == make_report().charts or len(r.charts.cdfs["ttft"]) == 200


ms_values = st.floats(0, 1e5, allow_nan=False).map(lambda x: round(x, 3))


@settings(max_examples=40, deadline=None)
@given(
    stages=st.lists(
        st.tuples(
            st.sampled_from(["ingress", "pending", "prefill", "x"]),
            ms_values,
            ms_values | st.none(),
        ),
        max_size=6,
    ),
    observed=ms_values | st.none(),
    predicted=ms_values,
    pct=st.floats(-100, 100).map(lambda x: round(x, 2)),
    metric=st.sampled_from(["ttft", "itl", "tpot", "e2e"]),
)
def test_from_dict_round_trip_property(
    stages: list[tuple[str, float, float | None]],
    observed: float | None,
    predicted: float,
    pct: float,
    metric: str,
) -> None:
    base = make_report()
    assert base.decomposition is not None
    dec = replace(
        base.decomposition,
        metric=metric,
        stages=tuple(
            StageValue(s, ms / 1000, None if b is None else b / 1000) for s, ms, b in stages
        ),
        total=sum(ms for _, ms, _ in stages) / 1000,
    )
    slo = SloResult(
        SloSpec(metric, 99.0, 0.25), None if observed is None else observed / 1000, True, 10
    )
    rem = Remediation(
        "replicas",
        ("compute_saturation",),
        "more",
        predicted={f"{metric}_p99": predicted / 1000, "throughput_change_pct": pct},
    )
    _roundtrip(replace(base, decomposition=dec, slos=(slo,), remediations=(rem,)))


def test_from_dict_reads_the_minimal_document_of_design_3_5() -> None:
    doc = {
        "schema_version": 1,
        "slos": [
            {
                "metric": "ttft",
                "percentile": 95,
                "threshold_ms": 500,
                "observed_ms": 812.4,
                "breached": True,
            }
        ],
        "windows": {"incident": [1000.0, 1600.0], "baseline": None},
        "decomposition": {
            "metric": "ttft",
            "percentile": 95,
            "stages": [
                {"stage": "ingress", "ms": 50.2, "baseline_ms": 49.8},
                {"stage": "pending", "ms": 762.2},
            ],
        },
        "findings": [
            {
                "category": "scaling_lag",
                "stage": "pending",
                "confidence": 0.92,
                "summary": "...",
                "evidence": [{"signal": "s", "value": 1, "detail": "d"}],
            }
        ],
        "remediations": [
            {
                "action": "hpa_metric",
                "addresses": ["scaling_lag"],
                "summary": "...",
                "parameters": {"hpa.metric": "vllm:num_requests_waiting", "hpa.target": 5},
                "predicted": {"ttft_p95_ms": 620.0, "throughput_change_pct": 0.0},
                "config": "...",
            }
        ],
        "data_quality": {
            "requests": 4812,
            "spans": 21344,
            "unattributed_share": 0.01,
            "skipped_files": [],
            "warnings": [],
        },
    }
    r = Report.from_dict(doc)
    assert r.slos[0].observed == 0.8124 and r.slos[0].breached
    assert r.decomposition is not None and math.isclose(r.decomposition.total, 0.8124)
    assert r.decomposition.stages[1].baseline_seconds is None
    assert r.remediations[0].predicted == {"ttft_p95": 0.62, "throughput_change_pct": 0.0}
    assert r.windows is not None and r.windows.baseline is None
    for fmt in ("terminal", "html", "json"):
        assert render(r, fmt)


def test_stage_moves_are_written_and_read_back() -> None:
    base = make_report()
    assert base.decomposition is not None
    move = StageMove("pending", "gateway_queue", 0.25, 0.0, "the activator held requests")
    r = replace(base, decomposition=replace(base.decomposition, moves=(move,)))
    doc = orjson.loads(render(r, "json"))
    assert doc["decomposition"]["moved"] == [
        {
            "from": "pending",
            "to": "gateway_queue",
            "ms": 250.0,
            "baseline_ms": 0.0,
            "why": "the activator held requests",
        }
    ]
    again = Report.from_dict(doc)
    assert again.decomposition is not None and again.decomposition.moves == (move,)
    _roundtrip(r)
