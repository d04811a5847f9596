"""`tailtriage bench` on the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailtriage.model import Capture

from .servers import fast_server


def _tt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tailtriage", *args], capture_output=True, text=True,
        timeout=120, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_bench_writes_a_capture_and_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with fast_server(ttft=0.02, itl=0.005) as port:
        done = _tt(
            "bench", f"http://127.0.0.1:{port}", "--model", "m", "--rate", "40",
            "--arrival", "constant", "--requests", "20", "--warmup-requests", "4",
            "--output-len", "8", "--slo", "p95 ttft < 1s, p99 itl < 200ms",
            "--out", str(out), "--json", str(tmp_path / "s.json"), "--quiet",
            "--otlp-out", str(tmp_path / "client.otlp.jsonl"),
            env={"OPENAI_API_KEY": "sk-never-written"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "TTFT" in done.stdout and "goodput" in done.stdout
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["requests"] == 20 and s["ok"] == 20 and s["warmup_excluded"] == 4
    assert all(o["met"] for o in s["slos"])
    cap = Capture.load(out / "capture.duckdb")
    assert cap.requests.num_rows == 20 and cap.token_times.num_rows == 20 * 8
    assert cap.metadata.extra["loadgen"]["rate"] == 40.0
    for f in [*out.iterdir(), tmp_path / "client.otlp.jsonl"]:
        assert b"sk-never-written" not in f.read_bytes()


@pytest.mark.slow
def test_bad_arguments_are_one_line_config_errors() -> None:
    for args in (
        ["--rate", "5", "--concurrency", "2", "--duration", "1s"],
        ["--rate", "5"],
        ["--rate", "5", "--duration", "soon"],
        ["--rate", "5", "--duration", "1s", "--slo", "p95 ttft < fast"],
        ["--rate", "5", "--duration", "1s", "--output-len", "zipf:2"],
    ):
        done = _tt("bench", "http://127.0.0.1:9", "--model", "m", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip().startswith("error:") and done.stderr.count("\n") == 1


def test_bench_says_why_requests_failed() -> None:
    # an https URL on a plain-http server: no TLS handshake completes, and the output says why
    with fast_server() as port:
        done = _tt(
            "bench", f"https://127.0.0.1:{port}", "--model", "m", "--concurrency", "2",
            "--requests", "2", "--output-len", "4", "--quiet", "--connect-timeout", "0.5",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "errors {'timeout': 2}" in done.stdout
    assert (
        "first timeout error: connect failed: no connection within 0.5 s (TCP connect and TLS "
        "handshake)" in done.stdout
    )
