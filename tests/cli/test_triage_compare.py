"""`tailtriage triage` and `tailtriage compare`: terminal story, JSON/HTML outputs, one-line
errors with exit codes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from builders import T0, capture_from_arrays
from tailtriage.cli._app import app, main

runner = CliRunner()


def _save(path: Path, pending: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    n = 2400
    arrival = T0 + np.sort(rng.uniform(0, 600, n))
    bad = arrival - T0 >= 300
    stages = {
        "ingress": np.full(n, 0.05),
        "pending": np.where(bad, pending * rng.uniform(0.75, 1.25, n), 0.0),
        "prefill": rng.normal(0.3, 0.03, n),
        "decode": rng.uniform(1, 2, n),
    }
    capture_from_arrays(arrival, stages, output_tokens=rng.integers(20, 200, n)).save(path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("caps")
    return _save(d / "before.duckdb", 0.3, 1), _save(d / "after.duckdb", 0.01, 2)


def test_triage_prints_the_story_and_writes_json_and_html(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    res = runner.invoke(
        app,
        [
            "triage",
            str(files[0]),
            "--slo",
            "p95 ttft < 500ms",
            "--no-whatif",
            "--incident",
            f"{T0 + 300}..{T0 + 600}",
            "--baseline",
            f"{T0}..{T0 + 300}",
            "--json",
            str(out),
            "--html",
            str(html),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "pending" in res.output and "BREACHED" in res.output.upper()
    doc = orjson.loads(out.read_bytes())
    assert doc["kind"] == "triage" and doc["slos"][0]["breached"] is True
    assert doc["findings"][0]["stage"] == "pending"
    assert html.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


def test_compare_says_which_slo_and_stage_changed(files: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    window = f"{T0 + 300}..{T0 + 600}"
    res = runner.invoke(
        app,
        [
            "compare",
            str(files[0]),
            str(files[1]),
            "--slo",
            "p95 ttft < 500ms",
            "--before-window",
            window,
            "--after-window",
            window,
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "improved" in res.output
    doc = orjson.loads(out.read_bytes())
    row = doc["extra"]["compare"]["slos"][0]
    assert row["verdict"] == "improved" and row["after_breached"] is False
    assert doc["extra"]["compare"]["changed_stages"][0] == "pending"


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["triage", "{f}", "--slo", "p95 ttft <"], 2, "slo"),
        (["triage", "{f}", "--slo", "p95 ttft < 1s", "--incident", "5..1"], 2, "--incident"),
        (["triage", "{missing}", "--slo", "p95 ttft < 1s"], 3, "nope"),
        (["compare", "{f}", "{missing}", "--slo", "p95 ttft < 1s"], 3, "nope"),
    ],
)
def test_bad_input_is_one_line_with_exit_code(
    files: tuple[Path, Path],
    tmp_path: Path,
    argv: list[str],
    code: int,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [a.format(f=files[0], missing=tmp_path / "nope.duckdb") for a in argv]
    monkeypatch.setattr(sys, "argv", ["tailtriage", *args])
    with pytest.raises(SystemExit) as ei:
        main()
    assert ei.value.code == code
    err = capsys.readouterr().err
    assert needle in err.lower() and err.strip().count("\n") == 0
