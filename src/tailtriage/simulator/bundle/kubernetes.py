"""``kubectl get events -o json`` and ``kubectl get pods -o json`` documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tailtriage.model import Capture
from tailtriage.simulator.bundle._common import (
    DEPLOYMENT,
    IMAGE,
    NAMESPACE,
    hex_id,
    octet,
    rfc3339,
    uuid,
)

#: event kind -> (reason, type, reporting component, message template)
_EVENT_FORMS: Mapping[str, tuple[str, str, str, str]] = {
    "pod_created": ("SuccessfulCreate", "Normal", "replicaset-controller", "Created pod: {pod}"),
    "pod_scheduled": (
        "Scheduled",
        "Normal",
        "default-scheduler",
        "Successfully assigned {ns}/{pod} to {node}",
    ),
    "failed_scheduling": (
        "FailedScheduling",
        "Warning",
        "default-scheduler",
        "0/{nodes} nodes are available: {nodes} Insufficient nvidia.com/gpu. preemption: "
        "0/{nodes} nodes are available: {nodes} No preemption victims found for incoming pod.",
    ),
    "node_scale_up": (
        "TriggeredScaleUp",
        "Normal",
        "cluster-autoscaler",
        "pod triggered scale-up: [{{gpu-pool {nodes}->{nodes_next} (max: 16)}}]",
    ),
    "image_pulling": ("Pulling", "Normal", "kubelet", 'Pulling image "{image}"'),
    "image_pulled": (
        "Pulled",
        "Normal",
        "kubelet",
        'Successfully pulled image "{image}" in {pull} ({pull} including waiting). '
        "Image size: 9814305931 bytes.",
    ),
    "container_started": ("Started", "Normal", "kubelet", "Started container vllm"),
    "pod_unhealthy": (
        "Unhealthy",
        "Warning",
        "kubelet",
        'Readiness probe failed: Get "http://{ip}:8000/health": dial tcp {ip}:8000: '
        "connect: connection refused",
    ),
    "pod_killing": ("Killing", "Normal", "kubelet", "Stopping container vllm"),
    "hpa_rescale": (
        "SuccessfulRescale",
        "Normal",
        "horizontal-pod-autoscaler",
        "New size: {replicas}; reason: All metrics below target",
    ),
    "replicaset_scaled": (
        "ScalingReplicaSet",
        "Normal",
        "deployment-controller",
        "Scaled up replica set {rs} to {replicas}",
    ),
    "rollout": (
        "ScalingReplicaSet",
        "Normal",
        "deployment-controller",
        "Scaled up replica set {rs} to {replicas}",
    ),
}

#: derived kinds: real clusters do not emit them; readers derive them from pod conditions
_DERIVED_KINDS = frozenset({"pod_pending", "cold_start", "pod_ready"})


@dataclass
class _Pod:
    name: str
    node: str | None = None
    created: float | None = None
    scheduled: float | None = None
    started: float | None = None
    ready: float | None = None
    killed: float | None = None


def replicaset_of(pod: str) -> str:
    """The pod's ReplicaSet: the simulator names pods ``<deployment>-<hash>-<5 chars>`` as the
    ReplicaSet controller does, one hash per pod-template version (a rollout makes a new one)."""
    return pod.rsplit("-", 1)[0] if pod.count("-") >= 2 else f"{DEPLOYMENT}-{pod}"


def template_hash(pod: str) -> str:
    """The ``pod-template-hash`` label of the pod's ReplicaSet."""
    return replicaset_of(pod).rsplit("-", 1)[-1]


def _go_duration(seconds: float) -> str:
    if seconds >= 60:
        m, s = divmod(seconds, 60)
        return f"{int(m)}m{s:.3f}s"
    return f"{seconds:.3f}s"


def _event_rows(capture: Capture) -> list[dict[str, Any]]:
    ev = capture.events.to_pydict()
    keys = list(ev)
    return [dict(zip(keys, vals, strict=True)) for vals in zip(*ev.values(), strict=True)]


def _pods(capture: Capture, rows: Sequence[Mapping[str, Any]]) -> dict[str, _Pod]:
    pods: dict[str, _Pod] = {}
    rq = capture.requests.to_pydict()
    for replica, node in zip(rq["replica"], rq["node"], strict=True):
        if replica is not None:
            pods.setdefault(replica, _Pod(replica)).node = node
    for row in rows:
        attrs = orjson.loads(row["attributes"] or "{}")
        name = attrs.get("pod") or (row["object_name"] if row["object_kind"] == "Pod" else None)
        if not name:
            continue
        pod = pods.setdefault(name, _Pod(name))
        pod.node = pod.node or attrs.get("node")
        t, kind = row["time"], row["kind"]
        field = {
            "pod_created": "created",
            "pod_scheduled": "scheduled",
            "container_started": "started",
            "pod_ready": "ready",
            "pod_killing": "killed",
        }.get(kind)
        if field is not None and getattr(pod, field) is None:
            setattr(pod, field, t)
        if kind == "cold_start" and row["duration"] is not None and pod.ready is None:
            pod.ready = t + row["duration"] if pod.scheduled == t else t
    return pods


def _k8s_event(row: Mapping[str, Any], pods: Mapping[str, _Pod], seq: int) -> dict[str, Any]:
    attrs = orjson.loads(row["attributes"] or "{}")
    kind = row["kind"]
    reason, etype, component, template = _EVENT_FORMS.get(
        kind, (row["reason"] or "Other", "Normal", "kubelet", row["message"] or "")
    )
    pod_name = attrs.get("pod") or row["object_name"] or ""
    pod = pods.get(pod_name)
    replicas = attrs.get("replicas", "")
    values = {
        "pod": pod_name,
        "ns": row["namespace"] or NAMESPACE,
        "node": (pod.node if pod else None) or attrs.get("node") or "gpu-node-1",
        "nodes": attrs.get("nodes", 4),
        "nodes_next": int(attrs.get("nodes", 4)) + 1,
        "image": IMAGE,
        "pull": _go_duration(row["duration"] or 0.0),
        "ip": f"10.0.2.{octet(pod_name)}",
        "replicas": replicas,
        "rs": replicaset_of(pod_name),
    }
    # the producer's own wording wins when it gave one (it is what kubectl would show)
    message = row["message"] if row["message"] else template.format(**values)
    reason = row["reason"] or reason
    if kind in ("hpa_rescale",):
        involved = {"kind": "HorizontalPodAutoscaler", "name": row["object_name"] or DEPLOYMENT}
    elif kind in ("replicaset_scaled", "rollout"):
        involved = {"kind": "Deployment", "name": row["object_name"] or DEPLOYMENT}
    elif kind == "pod_created":
        involved = {"kind": "ReplicaSet", "name": values["rs"]}
    else:
        involved = {"kind": row["object_kind"] or "Pod", "name": pod_name}
        if component == "kubelet":
            involved["fieldPath"] = "spec.containers{vllm}"
    involved["namespace"] = values["ns"]
    t = row["time"]
    name = f"{involved['name']}.{hex_id(f'{seq}/{t}', 8)[:16]}"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": name,
            "namespace": values["ns"],
            "uid": uuid(name),
            "creationTimestamp": rfc3339(t),
        },
        "involvedObject": {"apiVersion": "v1", **involved},
        "reason": reason,
        "message": message,
        "type": etype,
        "source": {"component": component, "host": values["node"]}
        if component == "kubelet"
        else {"component": component},
        "firstTimestamp": rfc3339(t),
        "lastTimestamp": rfc3339(t),
        "eventTime": None,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": values["node"] if component == "kubelet" else "",
    }


def write_events(capture: Capture, path: Path) -> Path | None:
    """The events a cluster would list; None (no file) when there are none, as an SRE
    exports no empty list."""
    rows = _event_rows(capture)
    pods = _pods(capture, rows)
    items = [
        _k8s_event(row, pods, i)
        for i, row in enumerate(sorted(rows, key=lambda r: r["time"]))
        if row["kind"] not in _DERIVED_KINDS
    ]
    if not items:
        return None
    doc = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path


def _condition(ctype: str, t: float | None) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": "True" if t is not None else "False",
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(t) if t is not None else None,
    }


def _k8s_pod(pod: _Pod, before: float) -> dict[str, Any]:
    # pods that served from the start existed before the capture: started an hour earlier,
    # with an ordinary start-up (their timings are outside the capture, so they prove nothing)
    old = pod.created is None
    created = before - 3600.0 if old else pod.created
    assert created is not None
    scheduled = pod.scheduled if pod.scheduled is not None else created + (2.0 if old else 0.0)
    started = pod.started if pod.started is not None else scheduled + (5.0 if old else 0.0)
    ready = pod.ready if pod.ready is not None else (started + 60.0 if old else None)
    running = pod.started is not None or pod.created is None
    status: dict[str, Any] = {
        "phase": "Running" if running else "Pending",
        "conditions": [
            _condition("PodReadyToStartContainers", started if running else None),
            _condition("Initialized", scheduled),
            _condition("Ready", ready),
            _condition("ContainersReady", ready),
            _condition("PodScheduled", scheduled if pod.scheduled or not pod.created else None),
        ],
        "hostIP": "10.0.1.40",
        "podIP": f"10.0.2.{octet(pod.name)}",
        "startTime": rfc3339(scheduled),
        "containerStatuses": [
            {
                "name": "vllm",
                "image": IMAGE,
                "imageID": f"docker.io/{IMAGE}@sha256:{hex_id(IMAGE, 32)}",
                "ready": ready is not None,
                "started": running,
                "restartCount": 0,
                "state": {"running": {"startedAt": rfc3339(started)}}
                if running
                else {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": NAMESPACE,
            "uid": uuid(pod.name),
            "creationTimestamp": rfc3339(created),
            "labels": {"app": DEPLOYMENT, "pod-template-hash": template_hash(pod.name)},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replicaset_of(pod.name)}
            ],
        },
        "spec": {
            "nodeName": pod.node,
            "containers": [
                {
                    "name": "vllm",
                    "image": IMAGE,
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
        "status": status,
    }


def write_pods(capture: Capture, path: Path) -> Path:
    rows = _event_rows(capture)
    pods = _pods(capture, rows)
    span = capture.time_range or (0.0, 0.0)
    # `kubectl get pods` at export time no longer lists pods that were stopped
    items = [_k8s_pod(p, span[0]) for _, p in sorted(pods.items()) if p.killed is None]
    doc = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path
