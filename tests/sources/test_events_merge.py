"""One Kubernetes fact read from two files (events and pods) is kept once."""

from __future__ import annotations

from pathlib import Path

import orjson

from tailtriage.store.input import load_capture

T = "2026-12-01T10:00:00Z"


def _events() -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "rs.1", "namespace": "llm"},
                "involvedObject": {"kind": "ReplicaSet", "name": "vllm-6f", "namespace": "llm"},
                "reason": "SuccessfulCreate",
                "message": "Created pod: vllm-6f-abc",
                "firstTimestamp": T,
                "lastTimestamp": T,
                "count": 1,
                "type": "Normal",
            },
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "p.1", "namespace": "llm"},
                "involvedObject": {"kind": "Pod", "name": "vllm-6f-abc", "namespace": "llm"},
                "reason": "Scheduled",
                "message": "Successfully assigned llm/vllm-6f-abc to gpu-1",
                "firstTimestamp": "2026-12-01T10:00:05Z",
                "lastTimestamp": "2026-12-01T10:00:05Z",
                "count": 1,
                "type": "Normal",
            },
        ],
    }


def _pods() -> dict[str, object]:
    cond = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-01T10:00:05Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:02:05Z"},
    ]
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "vllm-6f-abc", "namespace": "llm", "creationTimestamp": T},
                "spec": {"nodeName": "gpu-1"},
                "status": {"phase": "Running", "conditions": cond},
            }
        ],
    }


def test_pod_created_from_events_and_pods_is_counted_once(tmp_path: Path) -> None:
    (tmp_path / "events.json").write_bytes(orjson.dumps(_events()))
    (tmp_path / "pods.json").write_bytes(orjson.dumps(_pods()))
    cap = load_capture(tmp_path)
    kinds = cap.events.column("kind").to_pylist()
    assert kinds.count("pod_created") == 1
    assert kinds.count("cold_start") == 1 and kinds.count("pod_pending") == 1
    assert cap.metadata.quality.get("events.duplicate", 0) >= 1
