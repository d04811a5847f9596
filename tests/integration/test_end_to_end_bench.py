"""End to end: `tailtriage serve-sim` scraped by a real Prometheus (1 s), loaded by
`tailtriage bench`, then the bench output folder + serve-sim's OTLP spans + the Prometheus
data are loaded together with ``load_capture``: client and server spans must join on trace
id, and the engine stages must appear.

Then `tailtriage triage` runs on the same bundle and Prometheus: its decomposition of p95 TTFT
must put the engine's queue (forced by a small ``--max-num-seqs``) in the tail.  Bounded waits
everywhere; every process is stopped by its PID."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import installed_binary
from tailtriage.store.input import load_capture

PROMETHEUS = installed_binary("prometheus", "prometheus")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
]
WAIT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _wait(what: str, ok: object, procs: list[subprocess.Popen[bytes]], log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{p.args[0]} exited ({p.returncode}): {log.read_text()[-2000:]}")
        try:
            if ok():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}: {log.read_text()[-2000:]}")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[int, str, Path]]:
    """serve-sim (engine queueing forced by a small max_num_seqs) and a Prometheus scraping it."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    log = tmp_path / "procs.log"
    sim_port = _free_port()
    with log.open("wb") as out:
        sim = subprocess.Popen(
            [sys.executable, "-m", "tailtriage", "serve-sim", "--port", str(sim_port),
             "--model", "sim", "--max-num-seqs", "4", "--otlp-out", str(bundle / "server.otlp.jsonl")],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    prom_port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{sim_port}']\n"
    )
    with log.open("ab") as out:
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    prom_url = f"http://127.0.0.1:{prom_port}"
    try:
        _wait("serve-sim", lambda: urllib.request.urlopen(
            f"http://127.0.0.1:{sim_port}/health", timeout=2).status == 200, [sim, prom], log)  # fmt: skip

        def target_up() -> bool:
            q = f"{prom_url}/api/v1/query?query=up"
            with urllib.request.urlopen(q, timeout=2) as r:
                res = json.load(r)["data"]["result"]
            return bool(res) and res[0]["value"][1] == "1"

        _wait("prometheus to scrape serve-sim", target_up, [sim, prom], log)
        yield sim_port, prom_url, bundle
        _stop(sim)  # flushes the OTLP file
    finally:
        _stop(sim)
        _stop(prom)


def test_bench_serve_sim_prometheus_join(stack: tuple[int, str, Path]) -> None:
    sim_port, prom_url, bundle = stack
    out = bundle / "bench"
    cmd = [
        sys.executable, "-m", "tailtriage", "bench", f"http://127.0.0.1:{sim_port}",
        "--model", "sim", "--concurrency", "8", "--duration", "4s", "--warmup", "1s",
        "--input-len", "300", "--output-len", "24", "--slo", "p95 ttft < 2s, p99 itl < 500ms",
        "--out", str(out), "--quiet",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert "TTFT" in done.stdout.decode() and "goodput" in done.stdout.decode()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] > 10 and summary["errors"] == {}
    time.sleep(2.5)  # two more scrapes after the load

    # the live reader samples every 15 s from `since`: end exactly one step after it, so the
    # last evaluation falls after the load, whatever the scrapes' phase
    until = time.time()
    cap = load_capture(bundle, prometheus=prom_url, since=until - 15.0, until=until)

    spans = cap.spans.to_pylist()
    client = {s["trace_id"] for s in spans if s["name"] == "tailtriage.client"}
    server = {s["trace_id"] for s in spans if s["name"] == "llm_request"}
    assert len(client) == summary["requests"]
    # every measured client request has its server spans (warm-up requests too, server side)
    assert client <= server
    # the server's HTTP span is a child of the client span
    by_id = {(s["trace_id"], s["span_id"]): s for s in spans}
    http = [
        s for s in spans if s["name"] == "POST /v1/chat/completions" and s["trace_id"] in client
    ]
    assert http and all(
        by_id[(s["trace_id"], s["parent_id"])]["name"] == "tailtriage.client" for s in http
    )

    stages = set(cap.stages.column("stage").to_pylist())
    assert {"client", "engine_queue", "prefill", "decode"} <= stages, stages

    metrics = set(cap.series.column("metric").to_pylist())
    assert any("num_requests_running" in m for m in metrics), sorted(metrics)[:20]
    assert any("time_to_first_token" in m for m in metrics), sorted(metrics)[:20]
    # no id collides between client and server spans (no cycles had to be cut)
    assert not any("cycle" in w for w in cap.metadata.warnings), cap.metadata.warnings

    report = bundle.parent / "report.json"
    cmd = [sys.executable, "-m", "tailtriage", "triage", str(bundle), "--prometheus", prom_url,
           "--slo", "p95 ttft < 50ms", "--json", str(report)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    rep = json.loads(report.read_text())
    stages = {s["stage"]: s["ms"] for s in rep["decomposition"]["stages"]}
    assert stages.get("engine_queue", 0) > 0 and stages.get("prefill", 0) > 0, stages
    # 8 users on 4 engine slots: each request waits about one service time in the queue
    assert stages["engine_queue"] > stages["prefill"], stages
    assert rep["slos"][0]["breached"] is True
