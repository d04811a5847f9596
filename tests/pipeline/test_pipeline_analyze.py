"""pipeline.analyze: Capture -> Report of kind "analyze" (the first step of triage)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from builders import T0, capture_from_arrays, make_capture, make_request
from tailtriage.model import Capture, Metadata, SkippedFile
from tailtriage.pipeline.analyze import analyze, analyze_store
from tailtriage.report import Report

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))
from chdb_store import ChdbStore


def _capture() -> Capture:
    rng = np.random.default_rng(2)
    n = 2000
    arrival = T0 + np.sort(rng.uniform(0, 400, n))
    bad = arrival - T0 >= 200
    stages = {
        "ingress": np.full(n, 0.04),
        "engine_queue": np.where(bad, rng.exponential(0.4, n), rng.exponential(0.02, n)),
        "prefill": rng.normal(0.2, 0.02, n),
        "decode": rng.uniform(0.5, 1.0, n),
        "unattributed": np.full(n, 0.01),
    }
    meta = Metadata(
        skipped_files=(SkippedFile("notes.txt", "unknown format"),),
        warnings=("clock skew repaired on 3 spans",),
        quality={"spans.duplicate_id": 2},
    )
    return capture_from_arrays(
        arrival, stages, metadata=meta, replica=np.where(rng.random(n) < 0.5, "pod-a", "pod-b")
    )


def test_report_fields_of_the_design_json() -> None:
    report = analyze(_capture(), "p95 ttft < 400ms, p99 e2e < 3s")
    assert isinstance(report, Report) and report.kind == "analyze"
    doc = report.to_dict()
    for key in (
        "schema_version",
        "slos",
        "windows",
        "decomposition",
        "findings",
        "remediations",
        "data_quality",
    ):
        assert key in doc
    assert [s["metric"] for s in doc["slos"]] == ["ttft", "e2e"]
    q = doc["data_quality"]
    assert q["requests"] == 2000
    assert q["skipped_files"] == [{"path": "notes.txt", "reason": "unknown format"}]
    assert "clock skew repaired on 3 spans" in q["warnings"]
    assert q["counts"] == {"spans.duplicate_id": 2}
    # unattributed share of all stage time, from the stages table itself
    cap = _capture()
    st = cap.stages
    unatt = sum(
        d
        for s, d in zip(st["stage"].to_pylist(), st["duration"].to_pylist(), strict=True)
        if s == "unattributed"
    )
    total = sum(st["duration"].to_pylist())
    assert q["unattributed_share"] == pytest.approx(unatt / total, abs=1e-4)
    assert set(report.charts.replicas) == {"pod-a", "pod-b"}
    assert {"count", "ttft_p95"} <= set(report.charts.replicas["pod-a"])
    assert report.attribution and "engine_queue" in report.attribution
    assert "breakdowns" in doc["extra"]["analysis"]


def test_report_survives_json_round_trip() -> None:
    report = analyze(_capture(), "p95 ttft < 400ms")
    back = Report.from_dict(report.to_dict())
    assert back.slos[0].spec == report.slos[0].spec
    assert back.decomposition is not None and report.decomposition is not None
    assert back.decomposition.total == pytest.approx(report.decomposition.total, abs=1e-6)


def test_the_same_report_from_the_clickhouse_engine() -> None:
    cap = _capture()
    duck = analyze(cap, "p95 ttft < 400ms").to_dict()
    store = ChdbStore(cap)
    try:
        from tailtriage.analyses.slo import parse_slos

        click = analyze_store(store, parse_slos("p95 ttft < 400ms"), metadata=cap.metadata)
    finally:
        store.close()
    other = click.to_dict()
    assert other["slos"] == duck["slos"]
    assert other["windows"] == duck["windows"]
    assert other["decomposition"] == duck["decomposition"]


def test_empty_capture_gives_a_report_that_says_so() -> None:
    report = analyze(make_capture([]), "p95 ttft < 500ms")
    assert report.slos[0].observed is None and not report.slos[0].breached
    assert report.decomposition is None
    assert any("no ttft requests" in w or "no requests" in w for w in report.data_quality.warnings)


def test_errors_only_capture_counts_errors_not_latency() -> None:
    reqs = [make_request(arrival=T0 + i, status="error") for i in range(20)]
    report = analyze(make_capture(reqs), "p95 ttft < 500ms")
    assert report.slos[0].count == 0
    assert report.data_quality.requests == 20
