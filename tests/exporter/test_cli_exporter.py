"""`tailtriage exporter` and `tailtriage dashboards` through the command line."""

from __future__ import annotations

from pathlib import Path

import orjson
import yaml
from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from tailtriage.cli._app import app
from tailtriage.model.capture import Capture

RUNNER = CliRunner()


def test_exporter_serves_a_saved_capture_for_its_duration(capture: Capture, tmp_path: Path) -> None:
    path = capture.save(tmp_path / "cap.duckdb")
    out = tmp_path / "exported.json"
    result = RUNNER.invoke(app, ["exporter", str(path), "--port", "0", "--duration", "0.5",
                                 "--json", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:" in result.output and "engine_queue" in result.output
    doc = orjson.loads(out.read_bytes())
    assert doc["samples_per_pass"]["decode"] == 60 and doc["filed"] == 300


def test_dashboards_writes_the_files_with_the_slo(tmp_path: Path) -> None:
    out = tmp_path / "mon"
    listing = tmp_path / "files.json"
    result = RUNNER.invoke(app, ["dashboards", "--out", str(out), "--slo",
                                 "p95 ttft < 300ms, p99 itl < 50ms", "--json", str(listing)])  # fmt: skip
    assert result.exit_code == 0, result.output
    files = orjson.loads(listing.read_bytes())["files"]
    assert {Path(f).name for f in files} == {"tailtriage-rules.yml",
                                             "tailtriage-queue-vs-execution.json"}  # fmt: skip
    rules = yaml.safe_load((out / "tailtriage-rules.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert any(e.endswith("> 0.3") for e in exprs)
