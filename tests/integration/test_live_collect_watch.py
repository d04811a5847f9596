"""Real parts end to end: `serve-sim` (vLLM /metrics, OTLP spans) under load, a real
Prometheus scraping it, a real Alertmanager sending its webhook to `watch`, and loopback
stand-ins for the Kubernetes API (recorded responses) and Tempo.

* `collect` then `triage` gives the same report as `triage` on the hand-made bundle of the
  same window (the kubectl lists, curl'd query_range responses, the span file);
* `watch` on the SLO burn rate triages one incident over several evaluations;
* `watch` behind Alertmanager triages one incident however often Alertmanager re-notifies.

Each needs its binary; absent, the test skips with the install command, but fails in CI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.collect.fakes import DATA as KUBE_DATA
from tests.collect.fakes import KubeApi, Reply, kubeconfig, serve

from support import installed_binary
from tailtriage.collect.prometheus import step_for
from tailtriage.model.metric_catalog import live_queries

pytestmark = [pytest.mark.integration, pytest.mark.slow]
pytest.importorskip("kubernetes", reason="pip install 'tailtriage[collect]'")

SRC = str(Path(__file__).parents[2] / "src")
WAIT_S = 90.0
REQUESTS = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=SRC, COLUMNS="200")


def _wait(what: str, ok: Any, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: process exited with {proc.returncode}")
        try:
            if ok():
                return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass(frozen=True)
class Stack:
    prometheus: str
    spans: Path  # serve-sim's OTLP/JSON span file
    window: tuple[float, float]  # covers the load and the scrapes after it


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = installed_binary("prometheus", "prometheus")
    tmp = tmp_path_factory.mktemp("stack")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        port_file, spans = tmp / "port", tmp / "spans.jsonl"
        # two sequences at a time: the load queues, and TTFT passes 500 ms
        sim = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tailtriage",
                "serve-sim",
                "--port",
                "0",
                "--port-file",
                str(port_file),
                "--max-num-seqs",
                "2",
                "--otlp-out",
                str(spans),
            ],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(sim)
        _wait("serve-sim", lambda: port_file.exists() and port_file.read_text().strip(), sim)
        sim_port = int(port_file.read_text())
        prom_port = _free_port()
        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
            "  - job_name: vllm\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{sim_port}']\n        labels: {{namespace: llm}}\n"
        )
        prom = subprocess.Popen(
            [
                prometheus,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(prom)
        url = f"http://127.0.0.1:{prom_port}"
        _wait(
            "the scrape target",
            lambda: _get_json(f"{url}/api/v1/query?query=up")["data"]["result"],
            prom,
        )
        start = time.time() - 5
        load = subprocess.run(
            [
                sys.executable,
                "-m",
                "tailtriage",
                "bench",
                f"http://127.0.0.1:{sim_port}",
                "--model",
                "sim",
                "--rate",
                "10",
                "--requests",
                str(REQUESTS),
                "--out",
                str(tmp / "bench"),
            ],
            env=_env(),
            capture_output=True,
            timeout=WAIT_S,
        )
        assert load.returncode == 0, load.stderr[-2000:]
        count = "vllm:time_to_first_token_seconds_count"

        def scraped() -> bool:
            rows = _get_json(f"{url}/api/v1/query?query={urllib.parse.quote(count)}")["data"][
                "result"
            ]
            return bool(rows) and float(rows[0]["value"][1]) >= REQUESTS

        _wait("the load's metrics in Prometheus", scraped, prom)
        time.sleep(2)  # a couple more scrapes, so rates have points after the load
        _stop(sim)  # flushes the span file
        yield Stack(url, spans, (start, time.time()))
    finally:
        for p in procs:
            _stop(p)


# -- Tempo stand-in serving serve-sim's spans -----------------------------------------------


def _tempo(spans: Path) -> Any:
    traces: dict[str, list[dict[str, Any]]] = {}
    extent: dict[str, tuple[int, int]] = {}
    for line in spans.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    tid = sp["traceId"]
                    batch = {"resource": rs.get("resource", {}), "scopeSpans": [{"spans": [sp]}]}
                    traces.setdefault(tid, []).append(batch)
                    lo, hi = int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])
                    old = extent.get(tid, (lo, hi))
                    extent[tid] = (min(lo, old[0]), max(hi, old[1]))

    def route(path: str, query: dict[str, str]) -> Reply:
        if path == "/api/search":
            hits = [
                {"traceID": t, "startTimeUnixNano": str(lo), "durationMs": (hi - lo) // 1_000_000}
                for t, (lo, hi) in extent.items()
                if int(query["start"]) * 1e9 <= lo <= int(query["end"]) * 1e9
            ]
            return 200, {"traces": hits}
        return 200, {"batches": traces[path.rsplit("/", 1)[1]]}

    return route


def _report(bundle: Path, out: Path, incident: tuple[float, float]) -> dict[str, Any]:
    inc = f"{incident[0]:.3f}..{incident[1]:.3f}"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "tailtriage",
            "triage",
            str(bundle),
            "--slo",
            "p95 ttft < 500ms",
            "--incident",
            inc,
            "--no-whatif",
            "--json",
            str(out),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_collect_then_triage_equals_triage_of_the_hand_made_bundle(
    stack: Stack, tmp_path: Path
) -> None:
    start, end = stack.window
    api = KubeApi()
    with serve(api) as kube_url, serve(_tempo(stack.spans)) as tempo_url:
        cfg = kubeconfig(tmp_path / "kubeconfig", kube_url)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "tailtriage",
                "collect",
                "--since",
                f"{start}",
                "--until",
                f"{end}",
                "-n",
                "llm",
                "--kubeconfig",
                str(cfg),
                "--prometheus",
                stack.prometheus,
                "--traces",
                f"tempo+{tempo_url}",
                "--out",
                str(tmp_path / "collected"),
            ],
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = json.loads((tmp_path / "collected/manifest.json").read_text())
    assert [s["errors"] for s in manifest["sources"]] == [[], [], []]

    # by hand: kubectl's lists (no event falls in this window), curl per catalog metric, the
    # Collector's span file
    hand = tmp_path / "hand"
    (hand / "metrics").mkdir(parents=True)
    for name in ("pods", "deployments", "replicasets", "hpas", "leaderworkersets"):
        shutil.copy(KUBE_DATA / f"{name}.json", hand / f"kubectl-{name}.json")
    shutil.copy(stack.spans, hand / "otel-traces.jsonl")
    step = step_for(start, end)
    for name, selector in live_queries():
        query = (
            f'{{{selector[1:-1]},namespace="llm"}} or {{{selector[1:-1]},exported_namespace="llm"}}'
        )
        params = urllib.parse.urlencode({"query": query, "start": start, "end": end, "step": step})
        doc = _get_json(f"{stack.prometheus}/api/v1/query_range?{params}")
        if doc["data"]["result"]:
            (hand / "metrics" / f"{name}.json").write_text(json.dumps(doc))

    incident = (start, end)
    collected = _report(tmp_path / "collected", tmp_path / "collected.json", incident)
    by_hand = _report(hand, tmp_path / "hand.json", incident)
    assert collected["data_quality"]["requests"] == REQUESTS
    assert collected["slos"][0]["breached"] is True
    for part in ("slos", "windows", "decomposition", "findings", "remediations"):
        assert collected[part] == by_hand[part], part
    for key in ("requests", "spans", "series", "events", "unattributed_share"):
        assert collected["data_quality"][key] == by_hand["data_quality"][key], key


# -- watch --------------------------------------------------------------------------------


class Slack:
    """An incoming-webhook stand-in that keeps what was posted."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                state.posts.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0/B0/secret"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slack() -> Iterator[Slack]:
    s = Slack()
    try:
        yield s
    finally:
        s.close()


def _check_message(post: dict[str, Any], out: Path) -> None:
    text = post["text"]
    assert "Top finding:" in text and "p95 ttft" in text and "Report: " in text
    assert post["blocks"][0]["type"] == "header"
    report = Path(text.rsplit("Report: ", 1)[1].strip())
    assert report.is_file() and report.parent.parent == out
    doc = json.loads((report.parent / "report.json").read_text())
    assert doc["slos"][0]["breached"] is True


def _watch(*args: str) -> list[str]:
    return [sys.executable, "-m", "tailtriage", "watch", "--slo", "p95 ttft < 500ms",
            "--no-kubernetes", "--no-whatif", *args]  # fmt: skip


def test_watch_burn_rate_triages_one_incident_over_several_evaluations(
    stack: Stack, slack: Slack, tmp_path: Path
) -> None:
    out = tmp_path / "incidents"
    with serve(_tempo(stack.spans)) as tempo_url:
        run = subprocess.run(
            _watch("--prometheus", stack.prometheus, "--traces", f"tempo+{tempo_url}",
                   "--notify-webhook", slack.url, "--interval", "1", "--evaluations", "3",
                   "--out", str(out), "--json", str(tmp_path / "watch.json")),
            env=_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "incident still open; not triaged again" in run.stderr
    assert len(slack.posts) == 1
    _check_message(slack.posts[0], out)
    handled = json.loads((tmp_path / "watch.json").read_text())["incidents"]
    assert len(handled) == 1 and handled[0]["origin"] == "burn_rate"


def test_watch_behind_alertmanager_triages_once_however_often_it_notifies(
    stack: Stack, slack: Slack, tmp_path: Path
) -> None:
    alertmanager = installed_binary(
        "prometheus-alertmanager", "prometheus-alertmanager", "alertmanager"
    )
    hook_port, am_port = _free_port(), _free_port()
    out = tmp_path / "incidents"
    (tmp_path / "am.yml").write_text(
        "route:\n  receiver: tailtriage\n  group_by: [alertname]\n  group_wait: 0s\n"
        "  group_interval: 1s\n  repeat_interval: 2s\nreceivers:\n  - name: tailtriage\n"
        f"    webhook_configs:\n      - url: http://127.0.0.1:{hook_port}/alertmanager\n"
    )
    tempo = serve(_tempo(stack.spans))
    tempo_url = tempo.__enter__()
    watch = subprocess.Popen(
        _watch("--alertmanager-webhook", f"127.0.0.1:{hook_port}", "--prometheus",
               stack.prometheus, "--traces", f"tempo+{tempo_url}", "--notify-webhook", slack.url,
               "--out", str(out), "--duration", "120"),
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    am = subprocess.Popen(
        [
            alertmanager,
            f"--config.file={tmp_path / 'am.yml'}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    am_url = f"http://127.0.0.1:{am_port}"
    try:
        _wait("alertmanager", lambda: _get_json(f"{am_url}/api/v2/status"), am)
        start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stack.window[0] + 5))
        alert = [
            {
                "labels": {"alertname": "TTFTBudgetBurn", "namespace": "llm", "severity": "page"},
                "annotations": {"summary": "p95 TTFT over 500 ms"},
                "startsAt": start,
            }
        ]
        req = urllib.request.Request(
            f"{am_url}/api/v2/alerts",
            data=json.dumps(alert).encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(req, timeout=10).read()

        def notifications() -> float:
            with urllib.request.urlopen(f"{am_url}/metrics", timeout=10) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith('alertmanager_notifications_total{integration="webhook"'):
                        return float(line.rsplit(" ", 1)[1])
            return 0.0

        _wait("a posted triage", lambda: slack.posts)
        _wait("Alertmanager re-notifying", lambda: notifications() >= 3)
        time.sleep(1)
    finally:
        _stop(am)
        watch.send_signal(signal.SIGTERM)
        watch.wait(30)
        tempo.__exit__(None, None, None)
    assert len(slack.posts) == 1
    _check_message(slack.posts[0], out)
    assert "TTFTBudgetBurn" in slack.posts[0]["text"]
    incidents = json.loads((out / "incidents.json").read_text())["incidents"]
    assert len(incidents) == 1
