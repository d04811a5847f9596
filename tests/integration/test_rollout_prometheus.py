"""The capacity dip of a rolling update read from a real Prometheus server (Debian package
``prometheus``) scraping a loopback kube-state-metrics stand-in, beside ``kubectl`` output
built from the real pod and event objects of tests/data/kubernetes.

The target serves ``kube_deployment_spec_replicas`` and ``..._status_replicas_available`` (the
gauge ``tailtriage collect`` asks Prometheus for) from the same schedule as the pods: each step
stops one old pod and creates one new one that turns Ready ``LOAD_S`` later (maxSurge 0,
maxUnavailable 1).  Bounded waits everywhere; the server process is always stopped."""

from __future__ import annotations

import copy
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from integration.test_prometheus_server import PROMETHEUS, _free_port, _wait
from support import ROOT
from tailtriage.analyses.rollout import analyze_rollout
from tailtriage.model.capture import concat
from tailtriage.sources.prometheus_live import read_prometheus
from tailtriage.store import DuckDBStore
from tailtriage.store.input import load_capture

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REAL = ROOT / "tests" / "data" / "kubernetes"
OLD, NEW = "vllm-llama-7d9f8b6c5d", "vllm-llama-5c4b9f8d7e"
REPLICAS = 3
STEP_S = 4  # one rollout step every STEP_S seconds
LOAD_S = 3  # a new pod turns Ready this long after it is created
LABELS = 'deployment="vllm-llama",namespace="llm"'


class Schedule:
    """The rollout's timeline in whole seconds (kubectl timestamps have second precision)."""

    def __init__(self) -> None:
        self.t0 = float(int(time.time()) + 2)

    def step(self, i: int) -> float:
        return self.t0 + STEP_S * i

    @property
    def end(self) -> float:
        return self.step(REPLICAS - 1) + LOAD_S

    def available(self, t: float) -> int:
        stopped = sum(1 for i in range(REPLICAS) if t >= self.step(i))
        ready = sum(1 for i in range(REPLICAS) if t >= self.step(i) + LOAD_S)
        return REPLICAS - stopped + ready


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kubectl(folder: Path, s: Schedule) -> None:
    """``kubectl get pods/events -o json`` of the rollout, from real objects' shapes."""
    real_pod = json.loads((REAL / "pods.json").read_text())["items"][0]
    events = json.loads((REAL / "events_core_v1.json").read_text())["items"]
    killing = next(e for e in events if e["reason"] == "Killing")
    pods, items = [], []
    for i in range(REPLICAS):
        old_name, new_name = f"{OLD}-old{i}a", f"{NEW}-new{i}b"
        for name, rs, created, ready in (
            (old_name, OLD, s.t0 - 3600, s.t0 - 3500),
            (new_name, NEW, s.step(i), s.step(i) + LOAD_S),
        ):
            pod = copy.deepcopy(real_pod)
            meta = pod["metadata"]
            meta["name"], meta["creationTimestamp"] = name, _rfc3339(created)
            meta["labels"]["pod-template-hash"] = rs.rsplit("-", 1)[1]
            meta["ownerReferences"][0]["name"] = rs
            for cond in pod["status"]["conditions"]:
                cond["lastTransitionTime"] = _rfc3339(ready if cond["type"] == "Ready" else created)
            for cs in pod["status"].get("containerStatuses", []):
                cs["state"] = {"running": {"startedAt": _rfc3339(created)}}
            if rs == NEW:  # the old pods are gone from `kubectl get pods` after the rollout
                pods.append(pod)
        ev = copy.deepcopy(killing)
        ev["involvedObject"]["name"] = old_name
        ev["metadata"]["name"] = f"{old_name}.{i:016x}"
        ev["firstTimestamp"] = ev["lastTimestamp"] = _rfc3339(s.step(i))
        items.append(ev)
    (folder / "pods.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    )
    (folder / "events.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Schedule]]:
    sched = Schedule()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            now = time.time()
            raw = (
                "# TYPE kube_deployment_spec_replicas gauge\n"
                f"kube_deployment_spec_replicas{{{LABELS}}} {REPLICAS}\n"
                "# TYPE kube_deployment_status_replicas_available gauge\n"
                f"kube_deployment_status_replicas_available{{{LABELS}}} {sched.available(now)}\n"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    target = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=target.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: kube-state-metrics\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target.server_address[1]}']\n"
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
    try:
        _wait("the rollout to end", lambda: time.time() > sched.end + 3, proc, log)
        yield f"http://127.0.0.1:{port}", sched
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        target.shutdown()
        target.server_close()
        thread.join(5)


def test_the_capacity_dip_is_read_from_a_live_prometheus(
    prometheus: tuple[str, Schedule], tmp_path: Path
) -> None:
    url, sched = prometheus
    folder = tmp_path / "kubectl"
    folder.mkdir()
    _kubectl(folder, sched)
    metrics = read_prometheus(url, sched.t0 - 10, sched.end + 3, step=1.0, timeout=10)
    cap = concat([load_capture(folder), metrics])
    with DuckDBStore(cap) as store:
        found = analyze_rollout(store)
    assert found is not None
    assert (found.new, found.old) == (NEW, (OLD,))
    assert (found.max_surge, found.max_unavailable) == (0, 1)
    dip = found.dip
    assert dip is not None and dip.source == "kube_deployment_status_replicas_available"
    assert (dip.desired, dip.min_ready) == (REPLICAS, REPLICAS - 1)
    # LOAD_S below desired per step, give or take a 1 s scrape at each edge
    assert abs(dip.seconds_below - REPLICAS * LOAD_S) <= 2 * REPLICAS
    assert found.weight_load_s == LOAD_S
