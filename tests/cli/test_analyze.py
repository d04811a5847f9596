"""`tailtriage analyze`: terminal view, JSON report, and one-line errors with exit codes."""

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
from tailtriage.cli._options import window_from
from tailtriage.errors import ConfigError
from tailtriage.model.timeparse import parse_time

runner = CliRunner()


@pytest.fixture(scope="module")
def capture_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 s healthy, then 300 s where a pending stage appears (the worked example's shape)."""
    rng = np.random.default_rng(1)
    n = 3000
    arrival = T0 + np.sort(rng.uniform(0, 600, n))
    bad = arrival - T0 >= 300
    stages = {
        "ingress": np.full(n, 0.05),
        "pending": np.where(bad, rng.uniform(0.15, 0.25, n), 0.0),
        "prefill": rng.normal(0.3, 0.03, n),
        "decode": rng.uniform(1, 2, n),
    }
    path = tmp_path_factory.mktemp("cap") / "incident.duckdb"
    capture_from_arrays(arrival, stages, output_tokens=rng.integers(20, 200, n)).save(path)
    return path


def test_terminal_view_and_json_report(capture_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = runner.invoke(
        app, ["analyze", str(capture_file), "--slo", "p95 ttft < 500ms", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    for text in ("BREACHED", "p95 ttft by stage", "pending", "What explains", "baseline"):
        assert text in result.output
    doc = orjson.loads(out.read_bytes())
    assert doc["schema_version"] == 1 and doc["kind"] == "analyze"
    slo = doc["slos"][0]
    assert (slo["metric"], slo["percentile"], slo["threshold_ms"]) == ("ttft", 95.0, 500.0)
    assert slo["breached"] and slo["observed_ms"] > 500
    assert doc["windows"]["baseline"] is not None and doc["windows"]["detected"]
    dec = doc["decomposition"]
    assert dec["metric"] == "ttft" and dec["percentile"] == 95.0
    assert sum(s["ms"] for s in dec["stages"]) == pytest.approx(slo["observed_ms"], abs=0.01)
    pending = next(s for s in dec["stages"] if s["stage"] == "pending")
    assert pending["ms"] > 150 and pending["baseline_ms"] == 0.0
    assert doc["attribution_ms"]["pending"]["shapley"] > 150
    assert doc["percentiles_ms"]["ttft"]["p95"] == pytest.approx(slo["observed_ms"], abs=0.001)
    assert doc["charts"]["percentile_series"] and doc["charts"]["cdfs_ms"]["ttft"]
    assert doc["charts"]["waterfall"] and "pod-0" in doc["charts"]["replicas"]
    assert doc["data_quality"]["requests"] == 3000


def test_given_windows_in_rfc3339(capture_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    inc = "2023-11-14T22:18:20Z..2023-11-14T22:23:20Z"  # T0+300 .. T0+600
    result = runner.invoke(
        app,
        [
            "analyze",
            str(capture_file),
            "--slo",
            "p99 e2e < 5s",
            "--incident",
            inc,
            "--baseline",
            f"{T0}..{T0 + 300}",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(out.read_bytes())
    assert doc["windows"] == {
        "incident": [T0 + 300, T0 + 600],
        "baseline": [T0, T0 + 300],
        "detected": False,
    }
    assert doc["decomposition"]["metric"] == "e2e"


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--slo", "p95 latency < 1s"], 2, "metric must be one of"),
        (["--slo", "p95 ttft < 1s", "--incident", "yesterday..today"], 2, "--incident"),
        (["--slo", "p95 ttft < 1s", "--baseline", "20..10"], 2, "END must be after START"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    capture_file: Path,
    args: list[str],
    code: int,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _run_main(["analyze", str(capture_file), *args], code, monkeypatch, capsys)
    assert needle in err and err.count("\n") == 1


def _run_main(
    argv: list[str],
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """Run the real entry point (its error boundary included); return stderr."""
    monkeypatch.setattr(sys, "argv", ["tailtriage", *argv])
    with pytest.raises(SystemExit) as ei:
        main()
    assert ei.value.code == code
    return capsys.readouterr().err


def test_missing_input_exits_3_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.duckdb"
    err = _run_main(["analyze", str(missing), "--slo", "p95 ttft < 1s"], 3, monkeypatch, capsys)
    assert str(missing) in err.replace("\n", "")


@pytest.mark.parametrize(
    ("url", "driver"),
    [("chdb:///{tmp}/ch?table=otel_traces", "chdb"),
     ("clickhouse://127.0.0.1:1/db?table=otel_traces", "clickhouse_connect")],
)  # fmt: skip
def test_a_missing_clickhouse_driver_says_how_to_install_it(
    url: str,
    driver: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, driver, None)  # what `import` sees when it is absent
    argv = ["analyze", url.format(tmp=tmp_path), "--slo", "p95 ttft < 1s"]
    err = _run_main(argv, 4, monkeypatch, capsys)
    assert "pip install 'tailtriage[clickhouse]'" in err and err.count("\n") == 1


def test_window_and_time_parsing() -> None:
    assert window_from(None) is None
    assert window_from("10..20.5") == (10.0, 20.5)
    assert parse_time("2024-06-01T10:00:00Z") == 1717236000.0
    assert parse_time("2024-06-01T12:00:00+02:00") == 1717236000.0
    for bad in ("10", "..20", "10..", "2024-06-01T10:00:00..2024-06-01T11:00:00Z"):
        with pytest.raises(ConfigError):
            window_from(bad, "--incident")


def test_a_slow_replica_is_named_in_the_view(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    n = 1000
    replica = np.where(rng.random(n) < 0.1, "pod-slow", "pod-ok")
    prefill = np.where(replica == "pod-slow", 0.9, 0.2) + rng.uniform(0, 0.05, n)
    path = tmp_path / "c.duckdb"
    capture_from_arrays(T0 + np.arange(n) * 0.2, {"prefill": prefill}, replica=replica).save(path)
    result = runner.invoke(app, ["analyze", str(path), "--slo", "p95 ttft < 500ms"])
    assert result.exit_code == 0, result.output
    assert "replica pod-slow:" in result.output and "of the ttft tail" in result.output
    assert "not additive" in result.output


def test_html_report_is_written_and_self_contained(capture_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(
        app, ["analyze", str(capture_file), "--slo", "p95 ttft < 500ms", "--html", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") or page.lower().startswith("<!doctype html>")
    assert "<svg" in page and "http://" not in page.replace("http://www.w3.org", "")
    assert "pending" in page
