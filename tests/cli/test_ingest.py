"""`tailtriage ingest` end to end through the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from support import DATA
from tailtriage.cli import app
from tailtriage.model import Capture

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources"))
from trace_builders import otlp_doc, vllm_trace, write_jsonl


def test_ingest_writes_capture_and_json_summary(tmp_path: Path) -> None:
    write_jsonl(
        tmp_path / "b" / "t.jsonl" if (tmp_path / "b").mkdir() is None else tmp_path,
        [otlp_doc(vllm_trace(0, 0.0) + vllm_trace(1, 1.0))],
    )
    (tmp_path / "b" / "junk.txt").write_text("hello")
    out, js = tmp_path / "c.duckdb", tmp_path / "s.json"
    res = CliRunner().invoke(
        app, ["ingest", str(tmp_path / "b"), "-o", str(out), "--json", str(js)]
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(js.read_text())
    for key in ("requests", "spans", "series", "events", "skipped_files", "warnings"):
        assert key in summary
    assert summary["requests"] == 2 and summary["spans"] == 8
    assert [Path(s["path"]).name for s in summary["skipped_files"]] == ["junk.txt"]
    assert set(summary["stages_s"]) >= {"ingress", "engine_queue", "prefill", "decode"}
    assert summary["unattributed_share"] == 0.0
    assert Capture.load(out).requests.num_rows == 2
    assert "2 requests" in res.output and "junk.txt" in res.output


def test_ingest_bad_file_is_one_line_error_with_exit_code(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"resourceSpans": [')
    proc = subprocess.run(
        [sys.executable, "-m", "tailtriage", "ingest", str(bad), "-o", str(tmp_path / "c.duckdb")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3
    assert proc.stderr.strip().count("\n") == 0 and str(bad) in proc.stderr


def test_ingest_says_what_to_run_next_or_why_nothing_can_be_triaged(tmp_path: Path) -> None:
    """A capture with requests names the triage command for it, with readable UTC times; spans
    that are no inference request say why and how to map them; real sample files are used."""
    write_jsonl(tmp_path / "t.jsonl", [otlp_doc(vllm_trace(0, 0.0))])
    out = tmp_path / "c.duckdb"
    res = CliRunner().invoke(app, ["ingest", str(tmp_path / "t.jsonl"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert f"Next: tailtriage triage {out} --slo" in text
    assert " UTC (" in text and "time range: 20" in text  # a date, not unix seconds
    real = DATA / "otlp" / "trace.json"
    res = CliRunner().invoke(app, ["ingest", str(real), "-o", str(tmp_path / "r.duckdb")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert text.startswith("0 requests, 1 spans")
    assert "No span is an inference request" in text and "--rules FILE" in text
    assert "Next:" not in text
