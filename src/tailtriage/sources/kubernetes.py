"""``kubectl get events -o json`` and ``kubectl get pods -o json`` -> the ``events`` table.

Events (core/v1 and events.k8s.io/v1 shapes) map by ``reason`` onto the EVENT_KINDS
vocabulary (table ``REASONS``); their time is the first occurrence: ``eventTime`` when set,
else ``firstTimestamp`` (``deprecatedFirstTimestamp``), else ``lastTimestamp``.  Repeats
folded by the API server keep ``count`` and ``last_time`` in ``attributes``.

Pods give their lifecycle from ``status.conditions`` and ``containerStatuses`` (created,
scheduled, container started, ready) and two derived rows per pod whose ``time`` is the
start of the interval and ``duration`` its length:

* ``pod_pending``  = creationTimestamp -> PodScheduled (null duration while unschedulable)
* ``cold_start``   = PodScheduled -> Ready (image pull + container start + model load),
  with ``start_seconds`` (scheduled -> container started) and ``load_seconds``
  (started -> ready) in ``attributes``.

Deployments, ReplicaSets, HPAs and LeaderWorkerSets (``tailtriage collect`` writes them
beside pods and events) are recognised and counted, not turned into rows.

Kubernetes timestamps have second precision except ``eventTime`` (microseconds)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.errors import ParseError
from tailtriage.model import Capture, FileProvenance, Metadata, make_table
from tailtriage.model import schema as S
from tailtriage.model.timeparse import parse_duration, parse_instant
from tailtriage.sources._safety import dumps_json, load_json, with_quality
from tailtriage.sources._series import strip_bom
from tailtriage.sources.base import ReadOptions, register

FORMAT_EVENTS = "kubectl_events"
FORMAT_PODS = "kubectl_pods"
FORMAT_WORKLOADS = "kubectl_workloads"
#: workload kinds read without events of their own (``tailtriage collect`` writes them; pod
#: and event rows already carry their scaling and rollout history)
WORKLOAD_KINDS = frozenset(
    {"Deployment", "ReplicaSet", "HorizontalPodAutoscaler", "LeaderWorkerSet"}
)
#: a ``Service`` of this API group is a Knative workload, not a core Service
KNATIVE_SERVING = "serving.knative.dev/"

#: Kubernetes event reason -> events.kind (anything else is "other")
REASONS: Mapping[str, str] = {
    "SuccessfulCreate": "pod_created",
    "Scheduled": "pod_scheduled",
    "FailedScheduling": "failed_scheduling",
    "TriggeredScaleUp": "node_scale_up",
    "Pulling": "image_pulling",
    "Pulled": "image_pulled",
    "Started": "container_started",
    "Unhealthy": "pod_unhealthy",
    "Killing": "pod_killing",
    "SuccessfulRescale": "hpa_rescale",
    "ScalingReplicaSet": "replicaset_scaled",
}

#: ``"kind": "List"`` too: ``kubectl get events -o json`` with nothing to list writes an empty
#: List, which is zero events, not an unknown file
_SNIFF_KIND = re.compile(
    rb'"kind"\s*:\s*"((Event|Pod|Deployment|ReplicaSet|HorizontalPodAutoscaler|LeaderWorkerSet)'
    rb'(List)?|List)"|"apiVersion"\s*:\s*"serving\.knative\.dev/'
)
_SNIFF_FIELD = re.compile(rb'"(involvedObject|regarding)"\s*:')
_NEW_SIZE = re.compile(r"New size:\s*(\d+)(?:;\s*reason:\s*(.*))?")
_SCALED = re.compile(r"Scaled (up|down) replica set (\S+) (?:to|from \d+ to) (\d+)(?: from (\d+))?")
_CREATED_POD = re.compile(r"Created pod:\s*(\S+)")
_PULLED_IN = re.compile(r" in ((?:\d+(?:\.\d+)?(?:h|ms|m|s|us|µs|ns))+)")
_CONTAINER = re.compile(r"spec\.(?:initC|c)ontainers\{([^}]*)\}")


def _map(value: Any) -> Mapping[str, Any]:
    """A JSON object, or an empty one when the field holds something else (counted upstream)."""
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class _Rows:
    """Column lists of the events table, plus counts of what was skipped."""

    cols: dict[str, list[Any]] = field(default_factory=lambda: {f: [] for f in S.EVENTS.names})
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, time: float, kind: str, obj: Mapping[str, Any], **extra: Any) -> None:
        attributes = extra.pop("attributes", None)
        row = {
            "time": time,
            "kind": kind,
            "object_kind": _str(obj.get("kind")),
            "object_name": _str(obj.get("name")),
            "namespace": _str(obj.get("namespace")),
            "attributes": dumps_json(attributes, sort_keys=True).decode() if attributes else None,
            **extra,
        }
        for name, values in self.cols.items():
            values.append(row.get(name))

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def table(self, source: str) -> pa.Table:
        n = len(self.cols["time"])
        return make_table(S.EVENTS, {**self.cols, "source": [source] * n})


def _time(*candidates: Any) -> float | None:
    for value in candidates:
        if isinstance(value, str) and value:
            try:
                return parse_instant(value)
            except (ValueError, OverflowError):
                continue
    return None


# -- events ------------------------------------------------------------------------------


def _event_attributes(reason: str, message: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if obj.get("kind") == "Pod" and _str(obj.get("name")):
        attrs["pod"] = obj["name"]
    container = _CONTAINER.search(_str(obj.get("fieldPath")) or "")
    if container:
        attrs["container"] = container.group(1)
    if reason == "SuccessfulRescale" and (m := _NEW_SIZE.search(message)):
        attrs["replicas"] = int(m.group(1))
        if m.group(2):
            attrs["reason"] = m.group(2).strip()
    elif reason == "ScalingReplicaSet" and (m := _SCALED.search(message)):
        attrs.update(direction=m.group(1), replicaset=m.group(2), replicas=int(m.group(3)))
    elif reason == "SuccessfulCreate" and (m := _CREATED_POD.search(message)):
        attrs["pod"] = m.group(1)
    elif reason == "Pulled":
        if "already present" in message:
            attrs["cached"] = True
        elif m := _PULLED_IN.search(message):
            attrs["pull_seconds"] = parse_duration(m.group(1))
    elif reason == "Unhealthy":
        probe = message.split(" probe", 1)[0].strip().lower()
        if probe in ("readiness", "liveness", "startup"):
            attrs["probe"] = probe
    return attrs


def _add_event(rows: _Rows, item: Mapping[str, Any]) -> None:
    new_api = "regarding" in item or str(item.get("apiVersion", "")).startswith("events.k8s.io")
    obj = item.get("regarding" if new_api else "involvedObject")
    meta = _map(item.get("metadata"))
    series = _map(item.get("series"))
    first = _time(
        item.get("eventTime"),
        item.get("deprecatedFirstTimestamp" if new_api else "firstTimestamp"),
        item.get("deprecatedLastTimestamp" if new_api else "lastTimestamp"),
        meta.get("creationTimestamp"),
    )
    if first is None or not isinstance(obj, Mapping):
        rows.skip("events.no_time" if first is None else "events.malformed")
        return
    last = _time(
        series.get("lastObservedTime"),
        item.get("deprecatedLastTimestamp" if new_api else "lastTimestamp"),
    )
    count = series.get("count") or item.get("deprecatedCount" if new_api else "count")
    reason = _str(item.get("reason")) or ""
    message = _str(item.get("note" if new_api else "message")) or ""
    attrs = _event_attributes(reason, message, obj)
    if isinstance(count, int) and 1 < count < 2**53:
        attrs["count"] = count
    if last is not None and last > first:
        attrs["last_time"] = last
    if _str(item.get("type")):
        attrs["type"] = item["type"]
    kind = REASONS.get(reason, "other")
    duration = attrs.get("pull_seconds", 0.0 if attrs.get("cached") else None)
    rows.add(first, kind, obj, reason=reason, message=message, attributes=attrs, duration=duration)


# -- pods --------------------------------------------------------------------------------


def _condition(status: Mapping[str, Any], kind: str) -> tuple[str | None, float | None]:
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return _str(cond.get("status")), _time(cond.get("lastTransitionTime"))
    return None, None


def _add_pod(rows: _Rows, item: Mapping[str, Any]) -> None:
    meta = _map(item.get("metadata"))
    spec = _map(item.get("spec"))
    status = _map(item.get("status"))
    name = _str(meta.get("name"))
    obj = {"kind": "Pod", "name": name, "namespace": _str(meta.get("namespace"))}
    created = _time(meta.get("creationTimestamp"))
    if created is None or not name:
        rows.skip("pods.no_creation_time")
        return
    node = _str(spec.get("nodeName"))
    base = {"pod": name} | ({"node": node} if node else {})
    refs = meta.get("ownerReferences")
    owners = (
        [_str(o.get("name")) for o in refs if isinstance(o, Mapping)]
        if isinstance(refs, list)
        else []
    )
    if owners and owners[0]:
        base["owner"] = owners[0]
    rows.add(created, "pod_created", obj, reason="PodCreated", attributes=base)
    sched_status, scheduled = _condition(status, "PodScheduled")
    ready_status, ready = _condition(status, "Ready")
    if sched_status == "True" and scheduled is not None:
        rows.add(scheduled, "pod_scheduled", obj, reason="PodScheduled", attributes=base)
        rows.add(
            created,
            "pod_pending",
            obj,
            duration=max(0.0, scheduled - created),
            reason="PodScheduled",
            attributes=base,
        )
    else:
        rows.add(
            created,
            "pod_pending",
            obj,
            reason="Unschedulable",
            attributes=base | {"scheduled": False},
        )
    started = _container_starts(rows, obj, base, status)
    if ready_status == "True" and ready is not None:
        rows.add(ready, "pod_ready", obj, reason="Ready", attributes=base)
        if sched_status == "True" and scheduled is not None:
            attrs: dict[str, Any] = dict(base)
            init_status, initialized = _condition(status, "Initialized")
            if init_status == "True" and initialized is not None:
                # init containers (a model download, say) run between scheduling and this
                attrs["init_seconds"] = max(0.0, initialized - scheduled)
            if started is not None:
                attrs["start_seconds"] = max(0.0, started - scheduled)
                attrs["load_seconds"] = max(0.0, ready - started)
            rows.add(
                scheduled,
                "cold_start",
                obj,
                duration=max(0.0, ready - scheduled),
                reason="Ready",
                attributes=attrs,
            )


def _container_starts(
    rows: _Rows, obj: Mapping[str, Any], base: Mapping[str, Any], status: Mapping[str, Any]
) -> float | None:
    """Rows for running containers; returns the latest start (the pod runs when all do)."""
    latest = None
    statuses = status.get("containerStatuses")
    for cs in statuses if isinstance(statuses, list) else ():
        if not isinstance(cs, Mapping):
            continue
        started = _time(_map(_map(cs.get("state")).get("running")).get("startedAt"))
        if started is None:
            continue
        restarts = cs.get("restartCount")
        attrs = dict(base) | {"container": _str(cs.get("name"))}
        if isinstance(restarts, int) and 0 <= restarts < 2**53:
            attrs["restarts"] = restarts
        rows.add(started, "container_started", obj, reason="Started", attributes=attrs)
        latest = started if latest is None else max(latest, started)
    return latest


# -- kube-state-metrics ------------------------------------------------------------------

#: kube-state-metrics pod gauges whose value is a unix time
KSM_POD_TIMES: Mapping[str, str] = {
    "kube_pod_created": "created",
    "kube_pod_status_scheduled_time": "scheduled",
    "kube_pod_status_ready_time": "ready",
}


def pod_events_from_kube_metrics(series: pa.Table, source: str | None = None) -> pa.Table:
    """Pod lifecycle rows (created, scheduled, ready, ``pod_pending``, ``cold_start``) from the
    kube-state-metrics gauges in a ``series`` table, for captures with no kubectl output (a
    live Prometheus).  The latest sample of each pod wins; ``exported_namespace``/
    ``exported_pod`` are preferred (scrapes without ``honor_labels`` rename them)."""
    wanted = pc.is_in(series["metric"], value_set=pa.array(list(KSM_POD_TIMES)))
    sub = series.filter(wanted).sort_by("time")
    pods: dict[tuple[str | None, str], dict[str, float]] = {}
    for metric, labels, value in zip(
        sub["metric"].to_pylist(),
        sub["labels"].to_pylist(),
        sub["value"].to_pylist(),
        strict=True,
    ):
        lab = orjson.loads(labels)
        pod = _str(lab.get("exported_pod")) or _str(lab.get("pod"))
        if pod is None or not value > 0 or value == float("inf"):
            continue
        ns = _str(lab.get("exported_namespace")) or _str(lab.get("namespace"))
        pods.setdefault((ns, pod), {})[KSM_POD_TIMES[metric]] = value
    rows = _Rows()
    for (ns, pod), t in sorted(pods.items(), key=lambda kv: min(kv[1].values())):
        obj = {"kind": "Pod", "name": pod, "namespace": ns}
        base = {"pod": pod, "derived_from": "kube-state-metrics"}
        created, scheduled, ready = t.get("created"), t.get("scheduled"), t.get("ready")
        for kind, when in (
            ("pod_created", created),
            ("pod_scheduled", scheduled),
            ("pod_ready", ready),
        ):
            if when is not None:
                rows.add(when, kind, obj, attributes=base)
        if created is not None and scheduled is not None:
            rows.add(
                created, "pod_pending", obj, duration=max(0.0, scheduled - created), attributes=base
            )
        if scheduled is not None and ready is not None:
            rows.add(
                scheduled, "cold_start", obj, duration=max(0.0, ready - scheduled), attributes=base
            )
    return rows.table(source or "kube-state-metrics")


# -- the source --------------------------------------------------------------------------


#: items of the API server's own typed lists carry no ``kind`` (kubectl's List items do)
_LIST_KINDS = {"PodList": "Pod", "EventList": "Event"} | {
    f"{kind}List": kind for kind in WORKLOAD_KINDS
}


def _items(doc: Any) -> Iterable[tuple[str | None, Any]]:
    """(kind, object) for each object of a List, or the single object."""
    if isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
        implied = _LIST_KINDS.get(str(doc.get("kind")))
        for item in doc["items"]:
            kind = item.get("kind") if isinstance(item, Mapping) else None
            yield (kind if isinstance(kind, str) else implied), item
        return
    kind = doc.get("kind") if isinstance(doc, Mapping) else None
    yield (kind if isinstance(kind, str) else None), doc


class KubernetesSource:
    """``kubectl get events|pods -o json`` (a List, or a single object)."""

    name = "kubernetes"

    def sniff(self, head: bytes, path: Path) -> bool:
        head = strip_bom(head)
        if head.lstrip()[:1] != b"{":
            return False
        return bool(_SNIFF_KIND.search(head) or _SNIFF_FIELD.search(head))

    def read(self, path: Path, options: ReadOptions) -> Capture:
        where = str(path)
        decoded = load_json(path.read_bytes(), path)
        doc = decoded.doc
        rows = _Rows()
        kinds: set[str] = set()
        workloads = 0
        for kind, item in _items(doc):
            try:
                if not isinstance(item, Mapping):
                    rows.skip("kubernetes.other_objects")
                elif kind == "Event" or "involvedObject" in item or "regarding" in item:
                    kinds.add(FORMAT_EVENTS)
                    _add_event(rows, item)
                elif kind == "Pod":
                    kinds.add(FORMAT_PODS)
                    _add_pod(rows, item)
                elif kind in WORKLOAD_KINDS or (
                    kind == "Service"
                    and str(item.get("apiVersion", "")).startswith(KNATIVE_SERVING)
                ):
                    kinds.add(FORMAT_WORKLOADS)
                    workloads += 1
                else:
                    rows.skip("kubernetes.other_objects")
            except (TypeError, ValueError, OverflowError, AttributeError):  # one object only
                rows.skip("kubernetes.invalid_objects")
        if not kinds and rows.skipped:
            raise ParseError("no Event or Pod objects in this kubectl output", where, "$.items")
        table = rows.table(where)
        meta = Metadata(
            provenance=(
                FileProvenance(
                    where,
                    "+".join(sorted(kinds)) or FORMAT_EVENTS,
                    table.num_rows + workloads,
                    sum(rows.skipped.values()),
                ),
            ),
            quality=dict(rows.skipped),
            warnings=tuple(f"{where}: skipped {n} ({why})" for why, n in rows.skipped.items()),
        )
        return with_quality(Capture(events=table, metadata=meta), decoded.quality, decoded.warnings)


SOURCE = register(KubernetesSource())
