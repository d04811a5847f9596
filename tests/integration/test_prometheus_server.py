"""A real Prometheus server (Debian package ``prometheus``) scrapes a loopback target that
serves vLLM-style metrics changing on every scrape; ``read_prometheus`` reads them back.

Bounded waits everywhere, and the server process is always killed."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support import installed_binary
from tailtriage.model.metric_catalog import canonical_metric
from tailtriage.sources.prometheus_live import read_prometheus

PROMETHEUS = installed_binary("prometheus", "prometheus")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
WAIT_S = 60.0


class Target:
    """Serves /metrics; scrape n (1, 2, ...) reports waiting = n, preemptions = 2n and a TTFT
    histogram with n, 2n, 3n observations below 0.1 s, 0.5 s and +Inf."""

    def __init__(self) -> None:
        self.scrapes = 0
        self.lock = threading.Lock()

    def body(self) -> bytes:
        with self.lock:
            self.scrapes += 1
            n = self.scrapes
        m = f'model_name="{MODEL}"'
        return "\n".join(
            [
                "# TYPE vllm:num_requests_waiting gauge",
                f"vllm:num_requests_waiting{{{m}}} {n}",
                "# TYPE vllm:num_preemptions_total counter",
                f"vllm:num_preemptions_total{{{m}}} {2 * n}",
                "# TYPE vllm:gpu_cache_usage_perc gauge",
                f"vllm:gpu_cache_usage_perc{{{m}}} 0.5",
                "# TYPE vllm:time_to_first_token_seconds histogram",
                f'vllm:time_to_first_token_seconds_bucket{{le="0.1",{m}}} {n}',
                f'vllm:time_to_first_token_seconds_bucket{{le="0.5",{m}}} {2 * n}',
                f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",{m}}} {3 * n}',
                f"vllm:time_to_first_token_seconds_sum{{{m}}} {0.75 * n}",
                f"vllm:time_to_first_token_seconds_count{{{m}}} {3 * n}",
                "",
            ]
        ).encode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def target() -> Iterator[tuple[Target, int]]:
    state = Target()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            raw = state.body() if self.path.startswith("/metrics") else b""
            self.send_response(200 if raw else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state, int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _wait(what: str, ok: Any, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}: {log.read_text()[-2000:]}")


@pytest.fixture
def prometheus(tmp_path: Path, target: tuple[Target, int]) -> Iterator[tuple[str, Target]]:
    state, target_port = target
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def target_up() -> bool:
            with urllib.request.urlopen(f"{url}/api/v1/query?query=up", timeout=2) as r:
                result = json.load(r)["data"]["result"]
            return bool(result) and result[0]["value"][1] == "1"

        _wait("the target to be up", target_up, proc, log)
        _wait("four scrapes", lambda: state.scrapes >= 4, proc, log)
        yield url, state
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _by_metric(rows: list[dict[str, Any]]) -> dict[str, dict[float, float]]:
    out: dict[str, dict[float, float]] = {}
    for r in rows:
        key = r["metric"] + r["labels"]
        out.setdefault(key, {})[r["time"]] = r["value"]
    return out


def test_read_prometheus_reads_back_what_was_scraped(prometheus: tuple[str, Target]) -> None:
    url, state = prometheus
    end = time.time()
    cap = read_prometheus(url, end - 120, end, step=1.0, timeout=10)
    served = state.scrapes
    rows = cap.series.to_pylist()
    assert rows and {r["source"] for r in rows} == {url}
    labels = json.loads(rows[0]["labels"])
    assert labels["job"] == "vllm" and labels["model_name"] == MODEL
    assert labels["instance"].startswith("127.0.0.1:")

    series = _by_metric(rows)
    m = json.dumps(
        {"instance": labels["instance"], "job": "vllm", "model_name": MODEL}, separators=(",", ":")
    )

    def bucket(le: str) -> dict[float, float]:
        lab = json.loads(m) | {"le": le}
        return series[
            "vllm:time_to_first_token_seconds_bucket"
            + json.dumps(dict(sorted(lab.items())), separators=(",", ":"))
        ]

    waiting = series["vllm:num_requests_waiting" + m]
    values = [waiting[t] for t in sorted(waiting)]
    assert values == sorted(values), "a gauge that only grows was read out of order"
    assert set(values) <= set(range(1, served + 1)) and len(set(values)) >= 3
    for t, n in waiting.items():  # every sample of one scrape is read at the same instant
        assert series["vllm:num_preemptions_total" + m][t] == 2 * n
        assert bucket("0.1")[t] == n and bucket("0.5")[t] == 2 * n and bucket("+Inf")[t] == 3 * n
        assert series["vllm:time_to_first_token_seconds_sum" + m][t] == pytest.approx(0.75 * n)
        assert series["vllm:time_to_first_token_seconds_count" + m][t] == 3 * n
    assert set(series["vllm:gpu_cache_usage_perc" + m].values()) == {0.5}

    found = set(cap.metadata.extra["prometheus"]["found"])
    assert {"requests_waiting", "preemptions", "ttft", "kv_cache_usage"} <= found
    assert {canonical_metric(r["metric"]) for r in rows} == {
        "requests_waiting",
        "preemptions",
        "ttft",
        "kv_cache_usage",
    }
