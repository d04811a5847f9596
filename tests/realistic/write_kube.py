"""``kubectl get events -o json`` and ``kubectl get pods -o json`` as kubectl prints them
(telemetry-conventions 5.6): a ``List`` of core/v1 objects, second-precision
``firstTimestamp``/``lastTimestamp`` for kubelet and controller events, ``eventTime`` in
microseconds (and null first/last timestamps) for the scheduler's events, deduplicated
repeats with ``count``; the kubelet's own message texts (``Successfully pulled image "..." in
41.2s (41.2s including waiting). Image size: N bytes.``); events older than the API server's
one-hour TTL are gone; pods that were deleted during the window are absent from the pod list."""

from __future__ import annotations

import datetime as dt
import zlib
from pathlib import Path
from typing import Any

import orjson

from realistic.outcome import Event, Outcome, PodRecord
from realistic.spec import GPUS, MODELS

#: the API server keeps events this long (``--event-ttl``)
EVENT_TTL_S = 3600.0
#: kubectl ran this long after the window ended
COLLECT_AFTER_S = 60.0


def _h(text: str) -> int:
    """A stable hash (Python's own is salted per process)."""
    return zlib.crc32(text.encode())


def _rfc(t: float, micro: bool = False) -> str:
    d = dt.datetime.fromtimestamp(t, tz=dt.UTC)
    if micro:
        return d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def _image(o: Outcome) -> str:
    tags = {"0.6": "v0.6.6", "0.10": "v0.10.2", "0.12": "v0.12.0", "main": "nightly-2026-11-20"}
    return f"docker.io/vllm/vllm-openai:{tags[o.spec.engine.version]}"


def _container(o: Outcome) -> str:
    p = o.spec.platform
    return "kserve-container" if p == "kserve" else ("user-container" if p != "istio" else "vllm")


def pod_events(o: Outcome, p: PodRecord) -> list[Event]:
    """The kubelet's and scheduler's events of one pod's start-up."""
    s, c = o.spec, _container(o)
    ev: list[Event] = []
    if p.unschedulable_until > p.created:
        n = 4
        ev.append(
            Event(
                p.created,
                "FailedScheduling",
                "Warning",
                "Pod",
                p.name,
                f"0/{n} nodes are available: {n} Insufficient nvidia.com/gpu. preemption: "
                f"0/{n} nodes are available: {n} No preemption victims found for incoming pod.",
                "default-scheduler",
                max(1, int((p.unschedulable_until - p.created) // 15)),
                p.unschedulable_until - 5,
            )
        )
        ev.append(
            Event(
                p.created + 2,
                "TriggeredScaleUp",
                "Normal",
                "Pod",
                p.name,
                "pod triggered scale-up: [{gpu-pool-h100 3->4 (max: 8)}]",
                "cluster-autoscaler",
            )
        )
    ev.append(
        Event(
            p.scheduled,
            "Scheduled",
            "Normal",
            "Pod",
            p.name,
            f"Successfully assigned {s.namespace}/{p.name} to {p.node}",
            "default-scheduler",
        )
    )
    img = _image(o)
    if p.pulled - p.scheduled > 2.5:
        pull = p.pulled - (p.scheduled + 1.0)
        size = int(MODELS[s.model].image_gb * 1e9 * 0.98)
        ev.append(
            Event(
                p.scheduled + 1.0,
                "Pulling",
                "Normal",
                "Pod",
                p.name,
                f'Pulling image "{img}"',
                "kubelet",
            )
        )
        ev.append(
            Event(
                p.pulled,
                "Pulled",
                "Normal",
                "Pod",
                p.name,
                f'Successfully pulled image "{img}" in {pull:.3g}s ({pull:.3g}s including '
                f"waiting). Image size: {size} bytes.",
                "kubelet",
            )
        )
    else:
        ev.append(
            Event(
                p.pulled,
                "Pulled",
                "Normal",
                "Pod",
                p.name,
                f'Container image "{img}" already present on machine',
                "kubelet",
            )
        )
    ev.append(
        Event(
            p.started - 0.4, "Created", "Normal", "Pod", p.name, f"Created container {c}", "kubelet"
        )
    )
    ev.append(
        Event(p.started, "Started", "Normal", "Pod", p.name, f"Started container {c}", "kubelet")
    )
    period = s.pods.readiness_period_s
    fails = int((p.ready - p.started) // period) - 1
    if fails > 0:
        ev.append(
            Event(
                p.started + period,
                "Unhealthy",
                "Warning",
                "Pod",
                p.name,
                f'Readiness probe failed: Get "http://{p.ip}:8000/health": dial tcp '
                f"{p.ip}:8000: connect: connection refused",
                "kubelet",
                fails,
                p.started + fails * period,
            )
        )
    return ev


def _event_json(o: Outcome, e: Event, i: int) -> dict[str, Any]:
    s = o.spec
    t0 = s.t0
    api = {
        "Pod": "v1",
        "ReplicaSet": "apps/v1",
        "Deployment": "apps/v1",
        "HorizontalPodAutoscaler": "autoscaling/v2",
    }[e.kind]
    involved: dict[str, Any] = {
        "kind": e.kind,
        "namespace": s.namespace,
        "name": e.name,
        "uid": f"{i:08x}-5c1e-4f0a-9d3e-{_h(e.name) % 10**12:012d}",
        "apiVersion": api,
        "resourceVersion": str(480000 + i),
    }
    if e.kind == "Pod" and e.component == "kubelet":
        involved["fieldPath"] = f"spec.containers{{{_container(o)}}}"
    last = e.last if e.last > e.time else e.time
    item: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{e.name}.{int((t0 + e.time) * 1e9):x}",
            "namespace": s.namespace,
            "uid": f"e{i:07x}-2b7d-4c55-8e0f-6a1d2c3b4a59",
            "resourceVersion": str(500000 + i),
            "creationTimestamp": _rfc(t0 + e.time),
        },
        "involvedObject": involved,
        "reason": e.reason,
        "message": e.message,
        "source": {"component": e.component},
        "type": e.type,
        "reportingComponent": e.component if e.component != "kubelet" else "",
        "reportingInstance": "",
    }
    if e.component == "default-scheduler":
        item |= {
            "eventTime": _rfc(t0 + e.time, micro=True),
            "firstTimestamp": None,
            "lastTimestamp": None,
            "action": "Scheduling",
            "reportingComponent": e.component,
            "reportingInstance": "default-scheduler-control-plane-1",
        }
        if e.count > 1:
            item["series"] = {"count": e.count, "lastObservedTime": _rfc(t0 + last, micro=True)}
    else:
        item |= {
            "firstTimestamp": _rfc(t0 + e.time),
            "lastTimestamp": _rfc(t0 + last),
            "count": e.count,
            "eventTime": None,
        }
        if e.component == "kubelet":
            item["source"]["host"] = next((p.node for p in o.pods if p.name == e.name), "")
    return item


def write_events(o: Outcome, folder: Path) -> int:
    end = o.spec.duration_s + COLLECT_AFTER_S
    events = list(o.events)
    for p in o.pods:
        events += pod_events(o, p)
    keep = [e for e in events if end - EVENT_TTL_S <= e.time <= end]
    keep.sort(key=lambda e: (e.time, e.reason))
    doc = {
        "apiVersion": "v1",
        "items": [_event_json(o, e, i) for i, e in enumerate(keep)],
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return len(keep)


def _pod_json(o: Outcome, p: PodRecord, end: float) -> dict[str, Any]:
    s, t0 = o.spec, o.spec.t0
    ready = p.ready <= end
    labels = {"app": s.service, "pod-template-hash": p.rs}
    if s.platform != "istio":
        labels |= {
            "serving.knative.dev/service": s.service,
            "serving.knative.dev/revision": f"{s.service}-00001",
            "serving.knative.dev/configuration": s.service,
        }
    if s.platform == "kserve":
        labels["serving.kserve.io/inferenceservice"] = s.service

    def cond(kind: str, t: float, ok: bool) -> dict[str, Any]:
        return {
            "type": kind,
            "status": "True" if ok else "False",
            "lastProbeTime": None,
            "lastTransitionTime": _rfc(t0 + t),
        }

    main = {
        "name": _container(o),
        "ready": ready,
        "started": p.started <= end,
        "restartCount": 0,
        "image": _image(o),
        "imageID": _image(o).split(":")[0] + "@sha256:" + "3f" * 32,
        "containerID": "containerd://" + "a1" * 32,
        "state": {"running": {"startedAt": _rfc(t0 + p.started)}},
    }
    statuses = [main]
    containers = [
        {
            "name": _container(o),
            "image": _image(o),
            "args": [
                "--model",
                MODELS[s.model].name,
                "--tensor-parallel-size",
                str(s.tp),
                "--max-num-seqs",
                str(s.engine.max_num_seqs),
                "--max-num-batched-tokens",
                str(s.engine.max_num_batched_tokens),
            ],
            "resources": {
                "limits": {"nvidia.com/gpu": str(s.tp), "cpu": str(s.api.cpus)},
                "requests": {"nvidia.com/gpu": str(s.tp), "cpu": str(s.api.cpus)},
            },
        }
    ]
    side = "istio-proxy" if s.platform == "istio" else "queue-proxy"
    statuses.append(
        {
            "name": side,
            "ready": True,
            "started": True,
            "restartCount": 0,
            "image": "docker.io/istio/proxyv2:1.24.2"
            if side == "istio-proxy"
            else "gcr.io/knative-releases/knative.dev/serving/cmd/queue:v1.16.0",
            "state": {"running": {"startedAt": _rfc(t0 + p.pulled + 0.3)}},
        }
    )
    containers.append({"name": side, "image": statuses[-1]["image"]})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": p.name,
            "namespace": s.namespace,
            "labels": labels,
            "uid": f"{p.idx:08x}-7d2c-4b8e-a1f3-{_h(p.name) % 10**12:012d}",
            "creationTimestamp": _rfc(t0 + p.created),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{s.service}-{p.rs}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                    "uid": f"{_h(p.rs) % 10**8:08d}-aaaa-4bbb-8ccc-0123456789ab",
                }
            ],
        },
        "spec": {
            "nodeName": p.node,
            "containers": containers,
            "nodeSelector": {"nvidia.com/gpu.product": GPUS[s.gpu].name.replace(" ", "-")},
        },
        "status": {
            "phase": "Running" if p.started <= end else "Pending",
            "hostIP": "10.128.0." + str(10 + p.idx % 200),
            "podIP": p.ip,
            "podIPs": [{"ip": p.ip}],
            "qosClass": "Guaranteed",
            "startTime": _rfc(t0 + p.scheduled),
            "conditions": [
                cond("PodReadyToStartContainers", p.scheduled + 1.0, True),
                cond("Initialized", p.scheduled + 0.5, True),
                cond("Ready", p.ready if ready else p.started, ready),
                cond("ContainersReady", p.ready if ready else p.started, ready),
                cond("PodScheduled", p.scheduled, True),
            ],
            "containerStatuses": statuses,
        },
    }


def write_pods(o: Outcome, folder: Path) -> int:
    end = o.spec.duration_s + COLLECT_AFTER_S
    live = [p for p in o.pods if p.killed > end and p.created <= end]
    doc = {
        "apiVersion": "v1",
        "items": [_pod_json(o, p, end) for p in live],
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pods.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return len(live)
