"""The typed sections of a report (``report_sections``): what the JSON ``extra`` object holds,
read back field for field, and names outside the vocabulary refused when a report is read."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from renderers.report_builders import make_compare_report, make_report
from tailtriage.analyses.decomposition import Breakdown, BreakdownRow
from tailtriage.renderers import render
from tailtriage.report import Report
from tailtriage.report_sections import (
    AnalysisSection,
    AttributionSummary,
    EdgeEngineRow,
    EngineHistograms,
    Sections,
    SignalsRead,
    TriageSection,
    extra_dict,
    sections_from,
)

SECTIONS = Sections(
    analysis=AnalysisSection(
        series_metric="ttft",
        bin_width_s=30.0,
        definitions={"ttft": "first token minus arrival"},
        counts={"ttft": 1200},
        baseline_percentiles={"ttft": {"p50": 0.18, "p95": 0.27}},
        breakdowns=(
            Breakdown(
                "replica",
                "ttft",
                (BreakdownRow("pod-a", 700, 0.5833, 0.75, ((50.0, 0.2), (95.0, 0.9))),),
            ),
        ),
        attribution=AttributionSummary("ttft", 95.0, 0.84, 0.27, 0.28, 0, 1200),
        notes=("a note",),
    ),
    engine_histograms=EngineHistograms(
        True, (EdgeEngineRow("ttft", 95.0, 0.84, 0.5, 0.34, "vllm:time_to_first_token_seconds"),)
    ),
    triage=TriageSection(
        whatif_seed=3,
        calibrated=True,
        timings={"analyze_s": 1.5},
        signals=SignalsRead(("vllm:num_requests_waiting",), ("cpu",), 4, 19.0, 18.5, None, True),
    ),
)


def test_sections_read_back_equal() -> None:
    assert sections_from(orjson.loads(orjson.dumps(extra_dict(SECTIONS)))) == SECTIONS
    compare = make_compare_report().sections
    assert sections_from(extra_dict(compare)) == compare


def test_extra_holds_milliseconds_with_the_unit_in_the_key() -> None:
    extra = extra_dict(SECTIONS)
    assert list(extra) == ["analysis", "engine_histograms", "triage"]
    row = extra["analysis"]["breakdowns"]["replica"]["rows"][0]
    assert row["p95_ms"] == 900.0 and row["share"] == 0.5833
    assert extra["engine_histograms"]["edge_vs_engine"][0]["before_engine_ms"] == 340.0
    assert extra["triage"] == {
        "timings": {"analyze_s": 1.5},
        "signals": {
            "metrics": ["vllm:num_requests_waiting"],
            "hpa_metrics": ["cpu"],
            "events": 4,
            "incident_arrival_rps": 19.0,
            "incident_completion_rps": 18.5,
            "baseline_arrival_rps": None,
            "token_times": True,
        },
        "whatif": {"seed": 3, "calibrated": True},
    }


def test_a_report_with_every_section_round_trips() -> None:
    r = replace(make_report(), sections=SECTIONS)
    d = orjson.loads(render(r, "json"))
    assert orjson.loads(render(Report.from_dict(d), "json")) == d


@pytest.mark.parametrize(
    ("path", "name"),
    [(("findings", 0, "category"), "slow_gpus"), (("remediations", 0, "action"), "reboot")],
)
def test_a_name_outside_the_vocabulary_is_refused(path: tuple[str, int, str], name: str) -> None:
    d = make_report().to_dict()
    d[path[0]][path[1]][path[2]] = name
    with pytest.raises(ValueError, match=name):
        Report.from_dict(d)
