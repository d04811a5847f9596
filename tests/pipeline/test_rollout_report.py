"""A rolling update end to end: a simulated rollout written as real-format files, read back,
analysed, diagnosed and rendered.  The rollout analysis reaches the JSON report, the terminal
view, the HTML report's own section and the ``rollout`` finding's evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyses.test_rollout import small_rollout
from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze
from tailtriage.pipeline.triage import triage
from tailtriage.renderers import render
from tailtriage.simulator import simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.store.input import load_capture

SLO = "p95 ttft < 200ms"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    out: Path = tmp_path_factory.mktemp("rolled")
    write_bundle(simulate(small_rollout(0, 1)), out)
    return load_capture(out)


def test_the_json_report_carries_the_rollout(bundle: Capture) -> None:
    doc = analyze(bundle, SLO).to_dict()
    roll = doc["extra"]["rollout"]
    assert roll["max_unavailable"] == 1 and roll["max_surge"] == 0
    assert [v["new"] for v in roll["versions"]].count(True) == 1
    new = next(v for v in roll["versions"] if v["new"])
    assert new["replicaset"] == roll["new_replicaset"]
    assert roll["capacity_dip"]["lost"] == 1
    assert roll["ttft_p95_during_ms"] > roll["ttft_p95_before_ms"]


def test_terminal_and_html_show_the_rollout_section(bundle: Capture) -> None:
    report = analyze(bundle, SLO)
    assert report.sections.rollout is not None
    new = report.sections.rollout.new_replicaset
    text = render(report, "terminal", width=160)
    assert "Rolling update" in text and new in text and "maxUnavailable 1" in text
    page = render(report, "html")
    assert '<section id="rollout">' in page and 'href="#rollout"' in page
    section = page.split('<section id="rollout">', 1)[1].split("</section>", 1)[0]
    assert new in section and "p95 TTFT" in section


def test_the_rollout_finding_cites_the_analysis(bundle: Capture) -> None:
    report = triage(bundle, SLO, whatif=False)
    roll = next(f for f in report.findings if f.category == "rollout")
    signals = {e.signal for e in roll.evidence}
    assert "request.ttft_p95_by_version" in signals
    assert "kube_deployment_status_replicas_ready" in signals  # the capacity dip
    assert "pod.weight_load_s" in signals
