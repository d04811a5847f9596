"""`triage` shows doctor's gaps when they limit the diagnosis: a section in the terminal view
and a `telemetry_gaps` list in the JSON report, nothing when the telemetry is complete."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tailtriage.pipeline.triage import triage
from tailtriage.renderers import render
from tailtriage.report import Report
from tailtriage.store.input import load_capture

SLOS = "p95 ttft < 500ms"


def test_triage_lists_the_gaps_that_limit_it(cut_bundle: Callable[[str], Path]) -> None:
    report = triage(load_capture(cut_bundle("engine spans")), SLOS, whatif=False)
    doc = report.to_dict()
    assert [g["check"] for g in doc["telemetry_gaps"]] == ["engine_spans"]
    assert "engine-vllm.yaml" in doc["telemetry_gaps"][0]["fix"]
    text = render(report, "terminal", width=140)
    assert "telemetry gaps limit this diagnosis" in text and "no engine spans" in text
    assert Report.from_dict(doc).telemetry_gaps == report.telemetry_gaps


def test_complete_telemetry_adds_no_section(complete_bundle: Path) -> None:
    report = triage(load_capture(complete_bundle), SLOS, whatif=False)
    assert report.to_dict()["telemetry_gaps"] == []
    assert "telemetry gaps" not in render(report, "terminal", width=140)
