"""watch's bookkeeping: one triage per incident (queue + persisted log), and the chat
summary built from a triage report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.renderers.report_builders import make_report

from tailtriage.pipeline.notify import triage_message
from tailtriage.pipeline.watch import Incident, IncidentLog, IncidentQueue, incident_folder


def _incident(key: str) -> Incident:
    return Incident(key, "TTFT burn", 1780308000.0, "llm", "alertmanager")


def test_an_incident_is_queued_once_and_remembered_across_restarts(tmp_path: Path) -> None:
    async def run() -> None:
        log = IncidentLog.open(tmp_path)
        queue = IncidentQueue(log, limit=2)
        assert queue.offer(_incident("a")) and queue.offer(_incident("a"))
        assert queue.queue.qsize() == 1
        assert queue.offer(_incident("b")) and not queue.offer(_incident("c"))  # full: retry
        log.add("a", tmp_path / incident_folder(_incident("a")))
        restarted = IncidentQueue(IncidentLog.open(tmp_path))
        assert restarted.offer(_incident("a")) and restarted.queue.qsize() == 0

    asyncio.run(run())
    assert json.loads((tmp_path / "incidents.json").read_text())["incidents"].keys() == {"a"}


def test_incident_folders_sort_by_time_and_differ_by_key() -> None:
    a, b = incident_folder(_incident("a")), incident_folder(_incident("b"))
    assert a.startswith("20260601T100000Z-TTFT-burn-") and a != b


def test_summary_names_top_finding_split_and_fix() -> None:
    report = make_report()
    message = triage_message("TTFT burn", report, "https://reports/x/report.html")
    top = report.findings[0]
    assert f"Top finding: {top.category}" in message.text
    assert message.text.endswith("Report: https://reports/x/report.html")
    assert report.decomposition is not None
    d = report.decomposition
    assert f"p{d.percentile:g} {d.metric} {d.total * 1000:.0f} ms = " in message.text
    fix = next(r for r in report.remediations if r.recommended)
    assert f"Recommended fix: {fix.summary}" in message.text
    assert [b["type"] for b in message.blocks] == ["header", "section", "context"]
    assert json.loads(message.payload())["text"] == message.text
