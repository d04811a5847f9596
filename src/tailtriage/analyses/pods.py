"""The pods' timeline from ``kubectl`` output as the capture holds it: for every pod the
events name, its ReplicaSet (``ownerReferences`` from ``kubectl get pods``, else the pod name
``<replicaset>-<5 chars>``, where the ReplicaSet is ``<deployment>-<pod-template-hash>``) and
when it was created, started its container, turned Ready and was stopped."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from tailtriage.store.base import Store
from tailtriage.store.dialect import literal

#: a pod name is ``<replicaset>-<5 random chars>`` (the ReplicaSet controller's suffix)
_POD_OF_RS = re.compile(r"^(?P<rs>.+)-[a-z0-9]{5}$")


@dataclass(frozen=True)
class PodLife:
    """One pod's lifecycle as the capture shows it (unix seconds, None when not seen)."""

    pod: str
    version: str  # its ReplicaSet
    created: float | None = None
    started: float | None = None
    ready: float | None = None
    killed: float | None = None

    @property
    def load_s(self) -> float | None:
        """Container started -> Ready: weight loading and engine warm-up before serving."""
        if self.started is None or self.ready is None:
            return None
        return max(0.0, self.ready - self.started)


def owner_shown(pod: str, owners: Mapping[str, str]) -> bool:
    """Whether the telemetry shows ``pod``'s ReplicaSet: an owner event, or the controller's
    ``<replicaset>-<5 chars>`` name (else :func:`replicaset_of` stands the pod in for it)."""
    return pod in owners or _POD_OF_RS.match(pod) is not None


def replicaset_of(pod: str, owners: Mapping[str, str]) -> str:
    """The ReplicaSet of ``pod``: its owner when known, else its name without the suffix."""
    if pod in owners:
        return owners[pod]
    m = _POD_OF_RS.match(pod)
    return m.group("rs") if m else pod


def _attrs(text: object) -> dict[str, Any]:
    try:
        d = orjson.loads(str(text)) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return d if isinstance(d, dict) else {}


#: event kind -> the PodLife field it sets (the first occurrence; Killing: the last)
_LIFE: Mapping[str, str] = {
    "pod_created": "created",
    "container_started": "started",
    "pod_ready": "ready",
    "pod_killing": "killed",
}


def pod_lives(store: Store) -> tuple[PodLife, ...]:
    """Every pod the events name, with the times they show (sorted by creation)."""
    rows = store.query(
        "SELECT time, kind, object_kind, object_name, attributes FROM events "
        f"WHERE kind IN ({', '.join(literal(k) for k in _LIFE)}) ORDER BY time"
    ).to_pylist()
    owners: dict[str, str] = {}
    times: dict[str, dict[str, float]] = {}
    for r in rows:
        attrs = _attrs(r["attributes"])
        pod = str(attrs.get("pod") or (r["object_name"] if r["object_kind"] == "Pod" else ""))
        if not pod:
            continue
        if attrs.get("owner"):
            owners[pod] = str(attrs["owner"])
        elif r["object_kind"] == "ReplicaSet" and r["object_name"]:
            # the ReplicaSet controller's "Created pod: <name>" is an event on the ReplicaSet:
            # the owner of a pod whose name does not carry it (a Knative revision's pods)
            owners.setdefault(pod, str(r["object_name"]))
        slot = _LIFE[str(r["kind"])]
        seen = times.setdefault(pod, {})
        if slot not in seen or slot == "killed":
            seen[slot] = float(r["time"])
    lives = [
        PodLife(pod, replicaset_of(pod, owners), **{k: t.get(k) for k in _LIFE.values()})
        for pod, t in times.items()
    ]
    return tuple(sorted(lives, key=lambda p: (p.created or -math.inf, p.pod)))
