"""kubectl events and pods JSON into the ``events`` table (hand-written fixtures in the
exact kubectl shapes under tests/data/kubernetes)."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.errors import ParseError
from tailtriage.model.vocabulary import EVENT_KINDS
from tailtriage.sources import base
from tailtriage.sources.kubernetes import SOURCE

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "kubernetes"
OPTS = base.ReadOptions()


def ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _read(name: str) -> list[dict[str, Any]]:
    path = FIXTURES / name
    assert base.detect(path) is SOURCE
    rows = SOURCE.read(path, OPTS).events.to_pylist()
    for r in rows:
        assert r["kind"] in EVENT_KINDS
        r["attributes"] = json.loads(r["attributes"]) if r["attributes"] else {}
    return rows


def _one(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    hits = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, (match, hits)
    return hits[0]


def test_core_v1_events_map_onto_the_vocabulary() -> None:
    rows = _read("events_core_v1.json")
    items = json.loads((FIXTURES / "events_core_v1.json").read_text())["items"]
    assert len(rows) == len(items)
    assert [r["reason"] for r in rows] == [i["reason"] for i in items]
    new = "vllm-llama-7d9f8b6c5d-x2x9q"

    up = _one(rows, kind="hpa_rescale", time=ts("2024-05-01T12:00:05Z"))
    assert up["object_kind"] == "HorizontalPodAutoscaler" and up["namespace"] == "llm"
    assert up["attributes"]["replicas"] == 3
    assert "cpu resource utilization" in up["attributes"]["reason"]
    down = _one(rows, kind="replicaset_scaled", time=ts("2024-05-01T12:19:59Z"))
    assert down["attributes"].items() >= {"replicas": 2, "direction": "down"}.items()

    # scheduler events carry eventTime (µs) and no first/lastTimestamp
    failed = _one(rows, kind="failed_scheduling")
    assert failed["time"] == ts("2024-05-01T12:00:05.412339Z")
    assert failed["attributes"]["count"] == 3
    assert failed["attributes"]["last_time"] == ts("2024-05-01T12:01:05.918204Z")
    assert _one(rows, kind="pod_scheduled")["time"] == ts("2024-05-01T12:01:32.207761Z")
    assert _one(rows, kind="node_scale_up")["attributes"]["pod"] == new
    assert _one(rows, kind="pod_created")["attributes"]["pod"] == new

    pulled = _one(rows, kind="image_pulled", object_name=new)
    assert pulled["duration"] == pytest.approx(66.512)
    assert pulled["attributes"]["container"] == "vllm"
    cached = _one(rows, kind="image_pulled", object_name="vllm-llama-7d9f8b6c5d-k4m2p")
    assert cached["attributes"]["cached"] is True and cached["duration"] == 0.0

    unhealthy = _one(rows, kind="pod_unhealthy")
    assert unhealthy["time"] == ts("2024-05-01T12:02:52Z")
    want = {"probe": "readiness", "count": 9, "type": "Warning"}
    assert unhealthy["attributes"].items() >= want.items()
    assert unhealthy["attributes"]["last_time"] == ts("2024-05-01T12:04:12Z")
    assert _one(rows, kind="pod_killing")["attributes"]["pod"] == "vllm-llama-7d9f8b6c5d-k4m2p"
    assert _one(rows, reason="Created")["kind"] == "other"
    for r in rows:
        if r["object_kind"] == "Pod":
            assert r["attributes"]["pod"] == r["object_name"]


def test_events_k8s_io_v1_shape() -> None:
    rows = _read("events_k8s_io_v1.json")
    assert len(rows) == 5
    scaled = _one(rows, kind="hpa_rescale")
    assert scaled["attributes"]["replicas"] == 4
    assert scaled["attributes"]["reason"].startswith("external metric vllm:num_requests_waiting")
    assert _one(rows, kind="pod_scheduled")["time"] == ts("2024-05-01T12:30:10.004512Z")
    pulled = _one(rows, kind="image_pulled")
    assert pulled["duration"] == pytest.approx(0.85) and "Successfully pulled" in pulled["message"]
    startup = _one(rows, kind="pod_unhealthy")
    assert startup["attributes"]["probe"] == "startup" and startup["attributes"]["count"] == 5
    assert _one(rows, reason="BackOff")["kind"] == "other"


def test_pods_give_lifecycle_and_derived_pending_and_cold_start() -> None:
    rows = _read("pods.json")
    new = "vllm-llama-7d9f8b6c5d-x2x9q"
    pending = _one(rows, kind="pod_pending", object_name=new)
    assert pending["time"] == ts("2024-05-01T12:00:05Z")
    assert pending["duration"] == ts("2024-05-01T12:01:32Z") - ts("2024-05-01T12:00:05Z") == 87
    cold = _one(rows, kind="cold_start", object_name=new)
    assert cold["time"] == ts("2024-05-01T12:01:32Z")
    assert cold["duration"] == ts("2024-05-01T12:04:20Z") - ts("2024-05-01T12:01:32Z")
    assert cold["attributes"]["init_seconds"] == 1  # 12:01:32 -> Initialized 12:01:33
    assert cold["attributes"]["start_seconds"] == 70  # 12:01:32 -> 12:02:42
    assert cold["attributes"]["load_seconds"] == 98  # 12:02:42 -> 12:04:20
    assert cold["attributes"]["node"] == "gpu-node-3"
    assert _one(rows, kind="pod_ready", object_name=new)["time"] == ts("2024-05-01T12:04:20Z")
    started = _one(rows, kind="container_started", object_name=new)
    assert started["attributes"]["container"] == "vllm"

    # unschedulable: pending with no end yet, no scheduled/ready rows
    stuck = [r for r in rows if r["object_name"] == "vllm-llama-7d9f8b6c5d-zz9tt"]
    assert sorted(r["kind"] for r in stuck) == ["pod_created", "pod_pending"]
    assert _one(stuck, kind="pod_pending")["duration"] is None
    assert _one(stuck, kind="pod_pending")["attributes"]["scheduled"] is False

    # still loading weights: scheduled and started, no ready and so no cold start yet
    loading = {r["kind"] for r in rows if r["object_name"] == "vllm-llama-7d9f8b6c5d-q8w7e"}
    assert loading == {"pod_created", "pod_scheduled", "pod_pending", "container_started"}
    assert len([r for r in rows if r["kind"] == "cold_start"]) == 2


def test_single_object_and_mixed_list(tmp_path: Path) -> None:
    pods = json.loads((FIXTURES / "pods.json").read_text())["items"]
    one = tmp_path / "pod.json"
    one.write_text(json.dumps(pods[1]))
    assert base.detect(one) is SOURCE
    kinds = {r["kind"] for r in SOURCE.read(one, OPTS).events.to_pylist()}
    assert {"pod_pending", "cold_start"} <= kinds
    mixed = tmp_path / "mixed.json"
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vllm"}}
    mixed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, pods[0]]}))
    cap = SOURCE.read(mixed, OPTS)
    assert cap.metadata.quality == {"kubernetes.other_objects": 1}
    assert {r["object_name"] for r in cap.events.to_pylist()} == {pods[0]["metadata"]["name"]}


def test_an_empty_kubectl_list_is_zero_events_not_an_unknown_file(tmp_path: Path) -> None:
    # what `kubectl get events -o json` writes when the namespace has no events
    empty = tmp_path / "events.json"
    empty.write_text(
        json.dumps({"apiVersion": "v1", "items": [], "kind": "List", "metadata": {}}, indent=2)
    )
    assert base.detect(empty) is SOURCE
    cap = SOURCE.read(empty, OPTS)
    assert cap.events.num_rows == 0 and not cap.metadata.warnings


def test_bad_input_is_skipped_and_counted_or_a_clear_error(tmp_path: Path) -> None:
    items = json.loads((FIXTURES / "events_core_v1.json").read_text())["items"]
    broken = dict(items[0], firstTimestamp=None, lastTimestamp="yesterday", eventTime=None)
    broken["metadata"] = {"name": "x"}
    path = tmp_path / "ev.json"
    path.write_text(json.dumps({"kind": "List", "items": [broken, items[1]]}))
    cap = SOURCE.read(path, OPTS)
    assert cap.events.num_rows == 1 and cap.metadata.quality == {"events.no_time": 1}
    assert cap.metadata.provenance[0].skipped == 1

    cut = tmp_path / "cut.json"
    cut.write_text((FIXTURES / "pods.json").read_text()[:500])
    with pytest.raises(ParseError, match=r"cut\.json:line \d+, column \d+: invalid JSON"):
        SOURCE.read(cut, OPTS)
    other = tmp_path / "svc.json"
    other.write_text(json.dumps({"kind": "List", "items": [{"kind": "Service"}]}))
    with pytest.raises(ParseError, match=r"svc\.json:\$\.items: no Event or Pod"):
        SOURCE.read(other, OPTS)


def test_other_formats_are_not_sniffed(shared_data: Path) -> None:
    for name in ("otlp/trace.json", "jaeger/ui_01.json", "zipkin/yelp.json"):
        p = shared_data / name
        assert not SOURCE.sniff(p.read_bytes()[: base.SNIFF_BYTES], p)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3600), st.integers(0, 600), st.integers(0, 1800))
def test_derived_durations_match_the_conditions(created: int, pend: int, cold: int) -> None:
    base_t = 1714564800
    iso = lambda s: datetime.fromtimestamp(base_t + s).astimezone().isoformat()  # noqa: E731
    pod = json.loads((FIXTURES / "pods.json").read_text())["items"][1]
    pod["metadata"]["creationTimestamp"] = iso(created)
    for c in pod["status"]["conditions"]:
        c["lastTransitionTime"] = {
            "PodScheduled": iso(created + pend),
            "Ready": iso(created + pend + cold),
        }.get(c["type"], c["lastTransitionTime"])
    pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] = iso(created + pend)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "p.json"
        p.write_text(json.dumps(pod))
        rows = SOURCE.read(p, OPTS).events.to_pylist()
    got = {r["kind"]: r for r in rows}
    assert got["pod_pending"]["duration"] == pend
    assert got["cold_start"]["duration"] == cold
    assert got["cold_start"]["time"] == got["pod_pending"]["time"] + pend


def test_api_server_typed_lists_whose_items_carry_no_kind(tmp_path: Path) -> None:
    """``GET /api/v1/namespaces/llm/pods`` answers a PodList whose items have no ``kind``."""
    pods = json.loads((FIXTURES / "pods.json").read_text())["items"]
    for p in pods:
        del p["kind"], p["apiVersion"]
    path = tmp_path / "podlist.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": pods}))
    assert base.detect(path) is SOURCE
    rows = SOURCE.read(path, OPTS).events.to_pylist()
    assert len([r for r in rows if r["kind"] == "cold_start"]) == 2
    events = json.loads((FIXTURES / "events_k8s_io_v1.json").read_text())["items"]
    for e in events:
        del e["kind"]
    path.write_text(
        json.dumps({"kind": "EventList", "apiVersion": "events.k8s.io/v1", "items": events})
    )
    assert SOURCE.read(path, OPTS).events.num_rows == len(events)


def test_pod_events_from_kube_state_metrics_series() -> None:
    from tailtriage.model import make_table
    from tailtriage.model import schema as S
    from tailtriage.sources.kubernetes import pod_events_from_kube_metrics

    def lab(**kv: str) -> str:
        return json.dumps(dict(sorted(kv.items())), separators=(",", ":"))

    ksm = lab(exported_namespace="llm", exported_pod="vllm-a", namespace="monitoring", pod="ksm-0")
    rows = [  # (metric, labels, time, value): constant gauges sampled twice, plus noise
        ("kube_pod_created", ksm, 100.0, 1000.0),
        ("kube_pod_created", ksm, 115.0, 1000.0),
        ("kube_pod_status_scheduled_time", ksm, 115.0, 1087.0),
        ("kube_pod_status_ready_time", ksm, 115.0, 1255.0),
        ("kube_pod_created", lab(namespace="llm", pod="vllm-b"), 115.0, 1100.0),  # pending
        ("kube_pod_status_ready_time", lab(namespace="llm", pod="vllm-c"), 115.0, 0.0),  # unset
        ("vllm:num_requests_waiting", lab(pod="vllm-a"), 115.0, 7.0),
    ]
    series = make_table(
        S.SERIES,
        {k: [r[i] for r in rows] for i, k in enumerate(("metric", "labels", "time", "value"))},
    )
    events = pod_events_from_kube_metrics(series).to_pylist()
    a = {r["kind"]: r for r in events if r["object_name"] == "vllm-a"}
    assert a["pod_pending"]["time"] == 1000.0 and a["pod_pending"]["duration"] == 87.0
    assert a["cold_start"]["time"] == 1087.0 and a["cold_start"]["duration"] == 168.0
    assert a["pod_ready"]["time"] == 1255.0 and a["pod_ready"]["namespace"] == "llm"
    assert json.loads(a["cold_start"]["attributes"])["derived_from"] == "kube-state-metrics"
    b = {r["kind"] for r in events if r["object_name"] == "vllm-b"}
    assert b == {"pod_created"}
    assert not [r for r in events if r["object_name"] in ("vllm-c", "ksm-0")]
