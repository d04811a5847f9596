"""`collect` against loopback stand-ins: the Kubernetes API (recorded responses, through the
official client), Prometheus, Tempo and Jaeger query APIs, and their faults."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.collect.fakes import KubeApi, Reply, kubeconfig, serve

from tailtriage.collect import kubernetes as kube
from tailtriage.collect.bundle import CollectRequest, collect_bundle
from tailtriage.collect.traces import collect_traces
from tailtriage.errors import BackendError, ConfigError
from tailtriage.model.timeparse import parse_instant
from tailtriage.store.input import load_capture

pytest.importorskip("kubernetes", reason="pip install 'tailtriage[collect]'")

WINDOW = (parse_instant("2024-05-01T12:00:00Z"), parse_instant("2024-05-01T12:10:00Z"))
SECRET = "hf_live_s3cr3t"
SRC = str(Path(__file__).parents[2] / "src")


def _items(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text())
    assert doc["kind"] == "List" and doc["apiVersion"] == "v1"
    return list(doc["items"])


def _k8s(tmp_path: Path, url: str, timeout: float = 5.0) -> CollectRequest:
    cfg = kubeconfig(tmp_path / "kubeconfig", url)
    return CollectRequest(
        window=WINDOW, namespace="llm", kubernetes=True, kubeconfig=str(cfg), timeout=timeout
    )


def test_kubernetes_objects_of_the_window_as_kubectl_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kube, "PAGE_SIZE", 2)  # the recorded lists then come in pages
    api = KubeApi()
    out = tmp_path / "bundle"
    with serve(api) as url:
        manifest = collect_bundle(_k8s(tmp_path, url), out)

    (k8s,) = manifest.sources
    assert k8s.errors == ()
    assert set(k8s.files) == {
        f"kubernetes/{n}.json"
        for n in ("pods", "events", "deployments", "replicasets", "hpas", "leaderworkersets")
    }
    assert any("serving.knative.dev/v1" in n and "CRD absent" in n for n in k8s.notes)
    assert any(q.get("continue") for p, q in api.seen if p.endswith("/pods"))

    pods = _items(out / "kubernetes/pods.json")
    assert {p["kind"] for p in pods} == {"Pod"}
    # q8w7e was created at 12:30, after the window
    assert {p["metadata"]["name"].rsplit("-", 1)[1] for p in pods} == {"k4m2p", "x2x9q", "zz9tt"}
    events = _items(out / "kubernetes/events.json")
    reasons = [e["reason"] for e in events]
    # the 12:19-12:20 scale-down, pull and kill fall outside the window
    assert "Killing" not in reasons and reasons.count("SuccessfulRescale") == 1
    assert "Unhealthy" in reasons  # first seen 12:02:52, inside
    assert _items(out / "kubernetes/leaderworkersets.json")[0]["kind"] == "LeaderWorkerSet"

    for path in out.rglob("*.json"):
        text = path.read_text()
        assert SECRET not in text and "kube-s3cr3t-token" not in text, path
        assert "managedFields" not in text and 'last-applied-configuration":' not in text
    assert any("HF_TOKEN" in r for r in k8s.redactions)
    assert any("HUGGING_FACE_HUB_TOKEN" in r for r in k8s.redactions)

    cap = load_capture(out)
    assert cap.metadata.skipped_files == ()
    formats = {p.format for p in cap.metadata.provenance}
    assert {"kubectl_pods", "kubectl_events", "kubectl_workloads"} <= formats
    assert "pod_pending" in set(cap.events["kind"].to_pylist())


@pytest.mark.parametrize("fault", ["hang", "500", "drop"])
def test_a_failing_resource_is_one_line_and_the_rest_is_kept(tmp_path: Path, fault: str) -> None:
    api = KubeApi()
    reply: Reply = (500, {"kind": "Status", "code": 500}) if fault == "500" else (200, fault)
    api.faults["/api/v1/namespaces/llm/events"] = reply
    out = tmp_path / "bundle"
    with serve(api) as url:
        manifest = collect_bundle(_k8s(tmp_path, url, timeout=1.0), out)
    (k8s,) = manifest.sources
    assert len(k8s.errors) == 1 and k8s.errors[0].startswith("events: ")
    assert ("HTTP 500" in k8s.errors[0]) == (fault == "500")
    assert "kubernetes/pods.json" in k8s.files and "kubernetes/events.json" not in k8s.files
    assert (out / "kubernetes/pods.json").exists()
    assert json.loads((out / "manifest.json").read_text())["sources"][0]["errors"] == list(
        k8s.errors
    )


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=SRC, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "tailtriage", "collect", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


PROM_QUERIES: list[str] = []


def _prometheus_stub(path: str, query: dict[str, str]) -> Reply:
    if path != "/api/v1/query_range":
        return 404, {}
    PROM_QUERIES.append(query["query"])
    # the queue gauge itself, not vllm:num_requests_waiting_by_reason (also in the catalog)
    if not re.search(r"vllm:num_requests_waiting(?!_)", query["query"]):
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": []}}
    t = float(query["start"])
    series = {
        "metric": {"__name__": "vllm:num_requests_waiting", "namespace": "llm"},
        "values": [[t, "3"], [t + 15, "7"]],
    }
    return 200, {"status": "success", "data": {"resultType": "matrix", "result": [series]}}


def test_cli_exit_4_only_when_nothing_could_be_read(tmp_path: Path) -> None:
    api = KubeApi()
    api.faults["/api/v1/namespaces/llm/pods"] = (200, "hang")
    window = ["--since", "2024-05-01T12:00:00Z", "--until", "2024-05-01T12:10:00Z", "-n", "llm"]
    with serve(api) as kube_url, serve(_prometheus_stub) as prom_url:
        cfg = str(kubeconfig(tmp_path / "kc", kube_url))
        partial = _run_cli(
            *window,
            "--kubeconfig",
            cfg,
            "--prometheus",
            prom_url,
            "--timeout",
            "1",
            "--out",
            str(tmp_path / "partial"),
        )
    assert partial.returncode == 0, partial.stderr
    kept = json.loads((tmp_path / "partial/prometheus/requests_waiting.json").read_text())
    assert kept["data"]["result"][0]["values"][1][1] == "7"
    doc = json.loads((tmp_path / "partial/manifest.json").read_text())
    k8s, prom = doc["sources"]
    assert len(k8s["errors"]) == 1 and "timed out" in k8s["errors"][0].lower()
    assert prom["files"] == ["prometheus/requests_waiting.json"] and prom["errors"] == []
    assert all('namespace="llm"' in q and 'exported_namespace="llm"' in q for q in PROM_QUERIES)

    with serve(lambda p, q: (500, {"status": "error", "error": "boom"})) as broken:
        failed = _run_cli(
            *window,
            "--no-kubernetes",
            "--prometheus",
            broken,
            "--timeout",
            "1",
            "--out",
            str(tmp_path / "failed"),
        )
    assert failed.returncode == 4, failed.stderr
    assert "nothing could be read" in failed.stderr and "HTTP 500" in failed.stderr
    (prom,) = json.loads((tmp_path / "failed/manifest.json").read_text())["sources"]
    assert len(prom["errors"]) == 1  # the first query fails: one line, not one per metric


def _otlp_batch(trace_id: str, start_ns: int, seconds: float) -> list[dict[str, Any]]:
    span = {
        "traceId": trace_id,
        "spanId": trace_id[:16],
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + int(seconds * 1e9)),
    }
    return [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]},
            "scopeSpans": [{"spans": [span]}],
        }
    ]


def test_tempo_keeps_the_slowest_traces_and_survives_a_dropped_fetch(tmp_path: Path) -> None:
    start = int(WINDOW[0] * 1e9)
    durations = {"a" * 32: 0.1, "b" * 32: 0.9, "c" * 32: 0.3, "d" * 32: 0.5}
    asked: list[str] = []

    def tempo(path: str, query: dict[str, str]) -> Reply:
        asked.append(path)
        if path == "/api/search":
            assert (int(query["start"]), int(query["end"])) == (int(WINDOW[0]), int(WINDOW[1]) + 1)
            hits = [{"traceID": t, "durationMs": int(d * 1000)} for t, d in durations.items()]
            return 200, {"traces": hits}
        trace_id = path.rsplit("/", 1)[1]
        if trace_id == "c" * 32:
            return 200, "drop"
        return 200, {"batches": _otlp_batch(trace_id, start, durations[trace_id])}

    with serve(tempo) as url:
        outcome = collect_traces(f"tempo+{url}", tmp_path, WINDOW, timeout=2, max_traces=3)
    # the three slowest are fetched, slowest first; the dropped one is one error line
    assert asked[1:] == [f"/api/traces/{t * 32}" for t in "bdc"]
    assert len(outcome.errors) == 1 and outcome.errors[0].startswith("trace " + "c" * 32)
    assert any("3 slowest of 4" in n for n in outcome.notes)
    cap = load_capture(tmp_path / "traces/tempo.jsonl")
    assert sorted(cap.spans["trace_id"].to_pylist()) == ["b" * 32, "d" * 32]


def test_jaeger_per_service_searches_merge_into_one_query_api_document(tmp_path: Path) -> None:
    t0 = int(WINDOW[0] * 1e6)

    def trace(tid: str, service: str, us: int) -> dict[str, Any]:
        tags = [
            {"key": "http.request.header.authorization", "type": "string", "value": "Bearer sk-1"},
            {"key": "http.url", "type": "string", "value": "https://api/v1?api_key=sk-1"},
        ]
        span = {
            "traceID": tid,
            "spanID": tid[:16],
            "operationName": "llm_request",
            "references": [],
            "startTime": t0,
            "duration": us,
            "tags": tags,
            "logs": [],
            "processID": "p1",
        }
        return {"traceID": tid, "spans": [span], "processes": {"p1": {"serviceName": service}}}

    def jaeger(path: str, query: dict[str, str]) -> Reply:
        if path == "/api/services":
            return 200, {"data": ["gateway", "vllm"]}
        assert (int(query["start"]), int(query["end"])) == (t0, int(WINDOW[1] * 1e6))
        if query["service"] == "gateway":
            return 200, {"data": [trace("1" * 32, "gateway", 500_000)]}
        return 200, {"data": [trace("1" * 32, "vllm", 500_000), trace("2" * 32, "vllm", 900_000)]}

    with serve(jaeger) as url:
        outcome = collect_traces(url, tmp_path, WINDOW, timeout=2)  # probed: Jaeger
    assert outcome.errors == () and outcome.records == 2
    text = (tmp_path / "traces/jaeger.json").read_text()
    doc = json.loads(text)
    assert [t["traceID"] for t in doc["data"]] == ["2" * 32, "1" * 32]  # slowest first
    assert "sk-1" not in text and "https://api/v1?api_key=[REDACTED]" in text
    assert outcome.redactions == (
        "attribute http.request.header.authorization redacted (x2)",
        "attribute http.url redacted (x2)",
    )
    assert load_capture(tmp_path / "traces/jaeger.json").spans.num_rows == 2


def test_a_used_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("{}")
    with pytest.raises(ConfigError, match="not an empty folder"):
        collect_bundle(CollectRequest(window=WINDOW, traces="http://127.0.0.1:9"), tmp_path)


def test_an_unreachable_store_is_one_line(tmp_path: Path) -> None:
    with serve(lambda p, q: (200, {})) as url:
        pass  # closed: nothing listens there any more
    with pytest.raises(BackendError, match="nothing could be read: cannot read Jaeger"):
        collect_bundle(CollectRequest(window=WINDOW, traces=url, timeout=1), tmp_path)
