"""`tailtriage render`: re-render saved JSON reports and captures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from renderers.report_builders import make_empty_report, make_hostile_report, make_report
from tailtriage.cli._app import app
from tailtriage.cli.cmd_render import parse_options
from tailtriage.errors import ConfigError, InputError, ParseError
from tailtriage.renderers import render
from tailtriage.report import reports_pair_dict

runner = CliRunner()


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "report.json"
    path.write_text(render(make_report(), "json"), encoding="utf-8")
    return path


def test_json_report_to_html_file(saved: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "r.html"
    result = runner.invoke(app, ["render", str(saved), "-f", "html", "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "scaling_lag" in page


def test_format_follows_the_output_extension(saved: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.json"
    assert runner.invoke(app, ["render", str(saved), "-o", str(out)]).exit_code == 0
    # JSON -> Report -> JSON is stable
    assert orjson.loads(out.read_bytes()) == orjson.loads(saved.read_bytes())


def test_terminal_to_stdout_with_width_option(saved: Path) -> None:
    result = runner.invoke(app, ["render", str(saved), "-r", "width=80"])
    assert result.exit_code == 0, result.output
    assert "Where the p95 TTFT goes" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_json_to_stdout(saved: Path) -> None:
    result = runner.invoke(app, ["render", str(saved), "-f", "json"])
    assert result.exit_code == 0
    assert orjson.loads(result.output)["slos"][0]["observed_ms"] == 800.0


def test_demo_document_sides(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_bytes(
        orjson.dumps(reports_pair_dict(make_hostile_report(), make_empty_report(), ["combined"]))
    )
    before = runner.invoke(app, ["render", str(path), "-f", "json"])
    after = runner.invoke(app, ["render", str(path), "-f", "json", "--side", "after"])
    assert orjson.loads(before.output)["findings"] and not orjson.loads(after.output)["findings"]
    bad = runner.invoke(app, ["render", str(path), "--side", "middle"])
    assert isinstance(bad.exception, ConfigError)


def test_capture_is_analysed_with_the_default_slo(tmp_path: Path) -> None:
    import numpy as np

    from builders import capture_from_arrays

    rng = np.random.default_rng(5)
    n = 2000
    cap = capture_from_arrays(
        1_700_000_000 + np.sort(rng.uniform(0, 600, n)),
        {
            "ingress": rng.uniform(0.01, 0.05, n),
            "prefill": rng.lognormal(np.log(0.3), 0.5, n),
            "decode": rng.uniform(1, 2, n),
        },
    )
    path = tmp_path / "cap.duckdb"
    cap.save(path)
    out = tmp_path / "cap.json"
    result = runner.invoke(app, ["render", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = orjson.loads(out.read_bytes())
    assert (doc["slos"][0]["metric"], doc["slos"][0]["threshold_ms"]) == ("ttft", 500.0)
    assert doc["data_quality"]["requests"] == n
    with_slo = tmp_path / "cap2.json"
    assert (
        runner.invoke(
            app, ["render", str(path), "--slo", "p99 e2e < 3s", "-o", str(with_slo)]
        ).exit_code
        == 0
    )
    assert orjson.loads(with_slo.read_bytes())["slos"][0]["metric"] == "e2e"


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b'{"schema_version": 1,\n "slos": [', "line 2"),
        (b'{"schema_version": 1, "slos": [{"metric": "ttft"}]}', "malformed"),
    ],
)
def test_broken_json_is_a_parse_error_with_position(
    tmp_path: Path, content: bytes, where: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = runner.invoke(app, ["render", str(path)])
    assert isinstance(result.exception, ParseError)
    assert str(path) in str(result.exception) and where in str(result.exception)


def test_other_json_goes_to_the_sources(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_bytes(b'{"data": [1, 2]}')
    result = runner.invoke(app, ["render", str(path)])
    assert isinstance(result.exception, InputError) and not isinstance(result.exception, ParseError)


@pytest.mark.slow
def test_errors_are_one_line_with_exit_codes(saved: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "tailtriage", "render"]
    missing = subprocess.run(
        [*cmd, str(tmp_path / "nope.json")], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 3 and len(missing.stderr.strip().splitlines()) == 1
    unknown = subprocess.run(
        [*cmd, str(saved), "-f", "nope"], capture_output=True, text=True, check=False
    )
    assert unknown.returncode == 2 and "html, json, terminal" in unknown.stderr


def test_parse_options() -> None:
    assert parse_options(["width=120", "color=false", "embed-json=no", "x=1.5", "name=a=b"]) == {
        "width": 120,
        "color": False,
        "embed_json": False,
        "x": 1.5,
        "name": "a=b",
    }
    with pytest.raises(ConfigError):
        parse_options(["width"])
