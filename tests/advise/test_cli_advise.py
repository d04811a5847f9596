"""`tailtriage advise parallelism` end to end through the CLI: table, JSON, exit codes."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from tailtriage.cli._app import app, main

RUNNER = CliRunner()


def run(*args: str) -> tuple[int, str]:
    import tailtriage.cli.commands  # noqa: F401

    result = RUNNER.invoke(app, ["advise", "parallelism", *args])
    return result.exit_code, result.output


def test_json_lists_layouts_best_first(tmp_path: Path) -> None:
    out = tmp_path / "advice.json"
    code, text = run("--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100-SXM-80GB",
                     "--gpus", "16", "--nodes", "2", "--interconnect", "ethernet",
                     "--slo", "p95 tpot < 60ms", "--json", str(out))  # fmt: skip
    assert code == 0, text
    assert "best:" in text
    doc = orjson.loads(out.read_bytes())
    rows = doc["layouts"]
    for key in ("tp", "pp", "replicas", "fits", "ttft_ms", "tpot_ms", "throughput_per_gpu", "why"):
        assert all(key in row for row in rows)
    meeting = [r for r in rows if r["meets_slo"]]
    assert meeting and rows[: len(meeting)] == meeting  # SLO-meeting layouts first
    assert [r["throughput_per_gpu"] for r in meeting] == sorted(
        (r["throughput_per_gpu"] for r in meeting), reverse=True
    )
    labels = [r["layout"] for r in rows]
    assert labels.index("TP8×PP2") < labels.index("TP16")


def test_architecture_numbers_give_a_ranking() -> None:
    code, text = run("--model", "my-13b", "--layers", "40", "--hidden", "5120", "--heads", "40",
                     "--kv-heads", "40", "--params-b", "13", "--gpu", "L40S", "--gpus", "2")  # fmt: skip
    assert code == 0, text
    assert "my-13b" in text and "pcie" in text  # L40S has no NVLink


def _main(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
          ) -> tuple[int, str]:  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["tailtriage", "advise", "parallelism", *argv])
    with pytest.raises(SystemExit) as ei:
        main()
    return int(ei.value.code or 0), capsys.readouterr().err


def test_a_model_that_does_not_fit_exits_5_with_the_arithmetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "a.json"
    argv = ["--model", "meta-llama/Llama-3.1-405B", "--gpu", "A100-80GB", "--gpus", "4",
            "--json", str(out)]  # fmt: skip
    code, err = _main(argv, monkeypatch, capsys)
    assert code == 5
    assert "does not fit" in err and "GB/GPU" in err and err.count("\n") == 1
    assert not any(r["fits"] for r in orjson.loads(out.read_bytes())["layouts"])


def test_incomplete_architecture_numbers_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _main(["--model", "x", "--layers", "40", "--gpu", "H100", "--gpus", "2"],
                      monkeypatch, capsys)  # fmt: skip
    assert code == 2 and "--params-b" in err
