"""`tailtriage simulate`: list, run with overrides, outputs, errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tailtriage.model.capture import Capture


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tailtriage", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def small_scenario(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.yaml"
    p.write_text(
        "name: tiny\nseed: 3\nroot_cause: gateway_queue\n"
        "hpa: {enabled: false}\npods: {initial_replicas: 1}\n"
        "gateway: {concurrency_limit: 4}\n"
        "workload:\n"
        "  - {name: healthy, duration_s: 20, arrivals: {rate: 2}}\n"
        "  - {name: incident, duration_s: 20, arrivals: {rate: 12}}\n"
    )
    return p


def test_list_shows_every_builtin() -> None:
    res = run("--list")
    assert res.returncode == 0, res.stderr
    for name in ("canonical-example", "scaling_lag", "rollout", "kv_cache_pressure"):
        assert name in res.stdout


def test_run_writes_capture_and_summary_with_overrides(tmp_path: Path) -> None:
    scenario = small_scenario(tmp_path)
    out_json, out_db = tmp_path / "s.json", tmp_path / "c.duckdb"
    res = run(str(scenario), "--json", str(out_json), "-o", str(out_db), "-q",
              "--set", "gateway.concurrency_limit=2", "--seed", "9")  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads(out_json.read_text())
    assert summary["seed"] == 9
    assert summary["overrides"] == {"gateway.concurrency_limit": 2}
    cap = Capture.load(out_db)
    assert summary["all"]["requests"] == cap.requests.num_rows
    assert cap.metadata.extra["config"]["gateway"]["concurrency_limit"] == 2
    inc = summary["incident"]
    assert inc["ttft"]["p95_ms"] >= inc["ttft"]["p50_ms"] > 0
    assert "gateway_queue" in inc["stage_mean_ms"]


def test_errors_are_one_line_with_exit_code_2(tmp_path: Path) -> None:
    res = run("no-such-scenario")
    assert res.returncode == 2
    assert "no-such-scenario" in res.stderr and "Traceback" not in res.stderr
    res = run(str(small_scenario(tmp_path)), "--set", "engine.max_num_seqz=4")
    assert res.returncode == 2 and "max_num_seqz" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("engine: {max_num_seqs: lots}\n")
    res = run(str(bad))
    assert res.returncode == 2 and "bad.yaml" in res.stderr and "engine.max_num_seqs" in res.stderr
