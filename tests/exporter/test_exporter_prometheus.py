"""`tailtriage exporter` scraped by a real Prometheus (Debian package ``prometheus``) that
loads the rules `tailtriage dashboards` writes (checked by ``promtool`` first); the recorded
p95 series of queueing and execution, and the trace-id exemplars, are queried back.

Bounded waits everywhere; the exporter and the server are always stopped."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import installed_binary
from tailtriage.exporter.dashboards import P95_KIND, QUEUE_SHARE, dashboard_files
from tailtriage.exporter.metrics import StageMetrics
from tailtriage.exporter.observations import CaptureSource
from tailtriage.exporter.server import replay, serve
from tailtriage.model.capture import Capture

PROMETHEUS = installed_binary("prometheus", "prometheus")
PROMTOOL = installed_binary("promtool", "prometheus")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
]
WAIT_S = 90.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]


@pytest.fixture
def exporter(capture: Capture) -> Iterator[int]:
    """The test capture replayed 20x faster, over and over, so counters keep rising."""
    metrics = StageMetrics()
    served = serve(metrics, 0)
    stop = threading.Event()
    feeder = threading.Thread(
        target=replay, args=(metrics, CaptureSource(capture)),
        kwargs={"speed": 20.0, "loop": True, "stop": stop}, daemon=True,
    )  # fmt: skip
    feeder.start()
    try:
        yield served.port
    finally:
        stop.set()
        feeder.join(5)
        served.shutdown()


def test_prometheus_records_queue_and_execution_p95_from_the_exporter(
    tmp_path: Path, exporter: int
) -> None:
    rules = tmp_path / "tailtriage-rules.yml"
    rules.write_text(dashboard_files(0.5).files["tailtriage-rules.yml"])
    check = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0 and "SUCCESS" in check.stdout, check.stdout + check.stderr

    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: ['{rules}']\n"
        "scrape_configs:\n  - job_name: tailtriage\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter}']\n"
    )
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--enable-feature=exemplar-storage",
             "--log.level=warn"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        kinds: dict[str, float] = {}
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and len(kinds) < 2:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                rows = _get(f"{url}/api/v1/query?query={urllib.parse.quote(P95_KIND)}")["result"]
            except OSError:
                rows = []
            kinds = {r["metric"]["kind"]: float(r["value"][1]) for r in rows
                     if r["value"][1] not in ("NaN", "+Inf")}  # fmt: skip
            time.sleep(0.5)
        assert set(kinds) == {"queue", "execution"}, log.read_text()[-2000:]
        # engine queue 0.2 s and gateway <= 0.05 s: the queue p95 lands in (0.1, 0.25];
        # decode 1 s: execution p95 in (0.75, 1.0]
        assert 0.1 < kinds["queue"] <= 0.25
        assert 0.75 < kinds["execution"] <= 1.0
        share = _get(f"{url}/api/v1/query?query={urllib.parse.quote(QUEUE_SHARE)}")["result"]
        assert share and 0.1 < float(share[0]["value"][1]) < 0.3  # 0.23 of 1.28 s queued
        now = time.time()
        q = urllib.parse.quote('tailtriage_stage_duration_seconds_bucket{stage="decode"}')
        ex = _get(f"{url}/api/v1/query_exemplars?query={q}&start={now - 120}&end={now + 1}")
        traces = {e["labels"]["trace_id"] for s in ex for e in s["exemplars"]}
        assert traces and all(len(t) == 32 for t in traces)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
