"""End to end: the recording rules `tailtriage instrument` writes, loaded into a real Prometheus
(Debian package prometheus) that scrapes `tailtriage serve-sim` every second while
`tailtriage bench` loads it; the rules' queue/execution split, queried back, must match the
server's own histogram sums read from its /metrics at the end.  Then `doctor` reads the same
live Prometheus and names what it lacks (traces, GPU metrics) and nothing it has.

Bounded waits everywhere; every process is stopped by its PID."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import installed_binary
from tailtriage.instrument import files
from tailtriage.instrument.render import InstrumentOptions, render_all, with_defaults, write_all
from tailtriage.pipeline.doctor import doctor
from tailtriage.store.input import load_capture

pytestmark = [pytest.mark.integration, pytest.mark.slow]
WAIT_S = 60.0
#: sums over the whole run: the rules' rate() ratios equal the counters' ratios up to float
#: rounding in Prometheus' extrapolation (every series starts at 0 in the same scrapes)
TOLERANCE = 1e-3


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


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as r:
        body: bytes = r.read()
    return body


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
def stack(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """serve-sim (queueing forced by a small max_num_seqs) scraped by Prometheus every second,
    with the generated recording and alert rules evaluated every second."""
    prometheus = installed_binary("prometheus", "prometheus")
    write_all(render_all(with_defaults(InstrumentOptions(engine="vllm"))), tmp_path)
    log = tmp_path / "procs.log"
    sim_port, prom_port = _free_port(), _free_port()
    with log.open("wb") as out:
        sim = subprocess.Popen(
            [sys.executable, "-m", "tailtriage", "serve-sim", "--port", str(sim_port),
             "--model", "sim", "--max-num-seqs", "4"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    config = tmp_path / "test-prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: [{files.RECORDING_RULES}, {files.ALERT_RULES}]\n"
        "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{sim_port}']\n"
    )
    with log.open("ab") as out:
        prom = subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{prom_port}"
    try:

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{sim_port}/health", timeout=2) as r:
                return int(r.status) == 200

        _wait("serve-sim", healthy, [sim, prom], log)

        def scraped() -> bool:
            res = json.loads(_get(f"{url}/api/v1/query?query=up"))["data"]["result"]
            return bool(res) and res[0]["value"][1] == "1"

        _wait("prometheus to scrape serve-sim", scraped, [sim, prom], log)
        yield sim_port, url
    finally:
        _stop(sim)
        _stop(prom)


def _query(url: str, expr: str) -> float:
    q = urllib.parse.quote(expr)
    res = json.loads(_get(f"{url}/api/v1/query?query={q}"))["data"]["result"]
    assert len(res) == 1, (expr, res)
    return float(res[0]["value"][1])


def _server_sums(sim_port: int) -> dict[str, float]:
    text = _get(f"http://127.0.0.1:{sim_port}/metrics").decode()
    found = re.findall(r"^(vllm:request_\w+_time_seconds_(?:sum|count))\{[^}]*\} (\S+)$", text,
                       re.MULTILINE)  # fmt: skip
    return {name: float(v) for name, v in found}


def test_recording_rules_split_queue_from_execution_as_the_server_does(
    stack: tuple[int, str], tmp_path: Path
) -> None:
    sim_port, url = stack
    cmd = [
        sys.executable, "-m", "tailtriage", "bench", f"http://127.0.0.1:{sim_port}",
        "--model", "sim", "--concurrency", "8", "--duration", "4s", "--input-len", "300",
        "--output-len", "24", "--quiet", "--out", str(tmp_path / "bench"),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    truth = _server_sums(sim_port)
    queue, prefill, decode = (truth[f"vllm:request_{s}_time_seconds_sum"]
                              for s in ("queue", "prefill", "decode"))  # fmt: skip
    assert queue > 0 and prefill > 0 and decode > 0, truth

    # the load is over: wait until a rule evaluation has seen the last scrape's counters
    count = truth["vllm:request_queue_time_seconds_count"]

    def scraped_all() -> bool:
        return _query(url, "sum(vllm:request_queue_time_seconds_count)") == count

    _wait("Prometheus to scrape the whole run", scraped_all, [], Path(os.devnull))
    time.sleep(2.5)  # two rule evaluations after that scrape

    share = _query(url, "tailtriage:engine_queue:share_rate5m")
    assert share == pytest.approx(queue / (queue + prefill + decode), rel=TOLERANCE)
    mean = _query(url, "tailtriage:engine_queue_seconds:mean_rate5m")
    assert mean == pytest.approx(queue / count, rel=TOLERANCE)
    prefill_mean = _query(url, "tailtriage:prefill_seconds:mean_rate5m")
    count_p = truth["vllm:request_prefill_time_seconds_count"]
    assert prefill_mean == pytest.approx(prefill / count_p, rel=TOLERANCE)

    # every generated rule evaluates without error (alert rules included)
    groups = json.loads(_get(f"{url}/api/v1/rules"))["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(groups) >= 3 and rules
    assert {r["health"] for r in rules} == {"ok"}, [r for r in rules if r["health"] != "ok"]

    # doctor over the live Prometheus: engine metrics are there, traces and GPU metrics not
    until = time.time()
    capture = load_capture(None, prometheus=url, since=until - 120.0, until=until)
    found = {g.check: g for g in doctor(capture, "p95 ttft < 500ms").gaps}
    assert {"traces", "dcgm"} <= set(found), list(found)
    assert "engine_metrics" not in found and "engine_metric_version" not in found
    assert "otel-collector.yaml" in found["traces"].fix
