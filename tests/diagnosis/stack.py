"""Telemetry shaped like a real Kubernetes + Istio + vLLM stack's, for the rule scene tests.

Not the simulator's defaults: pod names carry their ReplicaSet's ``pod-template-hash``,
Prometheus series carry the labels a kube-prometheus scrape gives them (``namespace``, ``pod``,
``container``, ``model_name``), and Kubernetes objects are written as ``kubectl get events|pods
-o json`` and read back through the project's own source, so what the rules see is what a
user's bundle gives them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from builders import capture_from_arrays
from diagnosis.scenes import BASELINE, INCIDENT
from tailtriage.model import Capture
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.kubernetes import KubernetesSource

NAMESPACE = "llm-serving"
#: the pod-template-hash of the running ReplicaSet
FLEET_HASH = "7b9f6c8d4"
DEPLOYMENT = "vllm-llama-3-8b"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
IMAGE = "vllm/vllm-openai:v0.6.4.post1"
Row = tuple[str, Mapping[str, str], float, float]


def pods(template_hash: str, n: int, seed: int = 0) -> list[str]:
    """``n`` pod names of the ReplicaSet ``<deployment>-<hash>`` (``<rs>-<5 chars>``)."""
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("bcdfghjklmnpqrstvwxz2456789"))
    return [f"{DEPLOYMENT}-{template_hash}-{''.join(rng.choice(alphabet, 5))}" for _ in range(n)]


def fleet_requests(
    replicas: Sequence[str],
    *,
    per_window: int,
    weights: Sequence[float] | None = None,
    baseline_stages: Mapping[str, float],
    incident_stages: Mapping[str, float],
    per_replica_incident: Mapping[str, Mapping[str, float]] | None = None,
    routing: str = "random",
    seed: int = 0,
    output_tokens: np.ndarray | None = None,
    prompt_tokens: np.ndarray | None = None,
    incident_per_window: int | None = None,
) -> Capture:
    """Sampled requests of a fleet: ``routing`` "random" draws each request's replica with
    ``weights`` (uniform by default), "least_request" deals them out nearly evenly (the
    power-of-two-choices spread); stages are lognormal around the given medians, and a replica
    in ``per_replica_incident`` has its own medians in the incident; ``incident_per_window``
    requests arrive in the incident (``per_window`` by default)."""
    rng = np.random.default_rng(seed)
    n_inc = per_window if incident_per_window is None else incident_per_window
    n = per_window + n_inc
    arrival = np.concatenate(
        [
            np.sort(rng.uniform(*BASELINE, per_window)),
            np.sort(rng.uniform(*INCIDENT, n_inc)),
        ]
    )
    k = len(replicas)
    if routing == "least_request":
        idx = (np.arange(n) + rng.integers(0, 2, n)) % k
    else:
        p = np.full(k, 1.0 / k) if weights is None else np.asarray(weights) / np.sum(weights)
        idx = rng.choice(k, n, p=p)
    rep = np.asarray(replicas)[idx]
    in_incident = arrival >= INCIDENT[0]
    names = sorted(set(baseline_stages) | set(incident_stages))
    stages: dict[str, np.ndarray] = {}
    for s in names:
        median = np.where(in_incident, incident_stages.get(s, 0.0), baseline_stages.get(s, 0.0))
        for pod, own in (per_replica_incident or {}).items():
            median = np.where(in_incident & (rep == pod), own.get(s, 0.0), median)
        stages[s] = median * rng.lognormal(0.0, 0.3, n)
    return capture_from_arrays(
        arrival,
        stages,
        replica=rep.tolist(),
        model=MODEL,
        output_tokens=np.full(n, 200) if output_tokens is None else output_tokens,
        prompt_tokens=prompt_tokens,
    )


def pod_gauge(
    metric: str,
    replicas: Sequence[str],
    value: Callable[[str, float, np.random.Generator], float],
    *,
    seed: int = 0,
    step: float = 15.0,
    extra_labels: Mapping[str, str] | None = None,
) -> list[Row]:
    """One series per pod over baseline and incident, scraped every ``step`` seconds, with
    kube-prometheus labels; ``value(pod, time, rng)`` gives each sample."""
    rng = np.random.default_rng(seed)
    times = np.arange(BASELINE[0], INCIDENT[1], step)
    rows: list[Row] = []
    for pod in replicas:
        labels = {
            "namespace": NAMESPACE,
            "pod": pod,
            "container": "vllm",
            "job": "vllm",
            "model_name": MODEL,
            **(extra_labels or {}),
        }
        rows.extend((metric, labels, float(t), float(value(pod, float(t), rng))) for t in times)
    return rows


def in_incident(t: float) -> bool:
    return t >= INCIDENT[0]


# -- kubectl -o json ------------------------------------------------------------------------


def ts(t: float) -> str:
    """RFC 3339 at second precision, as the API server writes ``firstTimestamp``."""
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event(
    t: float,
    reason: str,
    message: str,
    *,
    kind: str = "Pod",
    name: str,
    component: str = "kubelet",
    type_: str = "Normal",
    field_path: str | None = "spec.containers{vllm}",
    count: int = 1,
    last: float | None = None,
) -> dict[str, Any]:
    """A core/v1 Event as ``kubectl get events -o json`` lists it."""
    obj: dict[str, Any] = {
        "kind": kind,
        "namespace": NAMESPACE,
        "name": name,
        "uid": f"uid-{abs(hash((name, kind))) % 10**8:08d}",
        "apiVersion": "v1" if kind == "Pod" else "apps/v1",
        "resourceVersion": "48213",
    }
    if kind == "HorizontalPodAutoscaler":
        obj["apiVersion"] = "autoscaling/v2"
    if field_path and kind == "Pod":
        obj["fieldPath"] = field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}.{int(t * 1000):x}",
            "namespace": NAMESPACE,
            "creationTimestamp": ts(t),
        },
        "involvedObject": obj,
        "reason": reason,
        "message": message,
        "source": {"component": component, "host": "gpu-node-3"}
        if component == "kubelet"
        else {"component": component},
        "firstTimestamp": ts(t),
        "lastTimestamp": ts(last if last is not None else t),
        "count": count,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "gpu-node-3" if component == "kubelet" else "",
    }


def pod(
    name: str,
    template_hash: str,
    *,
    created: float,
    scheduled: float,
    started: float,
    ready: float | None,
    node: str = "gpu-node-3",
) -> dict[str, Any]:
    """A Pod of the Deployment as ``kubectl get pods -o json`` lists it."""
    conditions = [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": ts(started)},
        {"type": "Initialized", "status": "True", "lastTransitionTime": ts(scheduled)},
        {
            "type": "Ready",
            "status": "True" if ready is not None else "False",
            "lastTransitionTime": ts(ready if ready is not None else started),
            **({} if ready is not None else {"reason": "ContainersNotReady"}),
        },
        {
            "type": "ContainersReady",
            "status": "True" if ready is not None else "False",
            "lastTransitionTime": ts(ready if ready is not None else started),
        },
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(scheduled)},
    ]
    rs = f"{DEPLOYMENT}-{template_hash}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "creationTimestamp": ts(created),
            "labels": {
                "app": DEPLOYMENT,
                "pod-template-hash": template_hash,
                "security.istio.io/tlsMode": "istio",
                "service.istio.io/canonical-name": DEPLOYMENT,
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "vllm", "image": IMAGE, "args": ["--model", MODEL]},
                {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.23.2"},
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": conditions,
            "startTime": ts(scheduled),
            "containerStatuses": [
                {
                    "name": name_,
                    "ready": ready is not None,
                    "started": True,
                    "restartCount": 0,
                    "image": img,
                    "state": {"running": {"startedAt": ts(started)}},
                }
                for name_, img in (
                    ("vllm", IMAGE),
                    ("istio-proxy", "docker.io/istio/proxyv2:1.23.2"),
                )
            ],
        },
    }


def kubectl_events(tmp: Path, items: Sequence[Mapping[str, Any]], name: str) -> pa.Table:
    """Write ``items`` as a ``kubectl ... -o json`` List and read it back as the events
    table, through the Kubernetes source a user's bundle goes through."""
    path = tmp / f"{name}.json"
    path.write_bytes(
        orjson.dumps(
            {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {}},
            option=orjson.OPT_INDENT_2,
        )
    )
    return KubernetesSource().read(path, ReadOptions()).events


def with_events(capture: Capture, *tables: pa.Table) -> Capture:
    return capture.replace(events=pa.concat_tables(tables) if tables else capture.events)
