"""Kubernetes objects of an incident window, through the official ``kubernetes`` client.

Pods, events, Deployments, ReplicaSets and HorizontalPodAutoscalers, plus LeaderWorkerSets
and Knative Services where their CRDs exist (a missing CRD is a note, not an error), of one
namespace or all of them, each written as ``kubectl get KIND -o json`` writes it: a ``List``
whose items carry ``apiVersion`` and ``kind`` (what ``sources.kubernetes`` reads).

Only objects that existed in the window are kept: events seen in it, pods created before its
end and not deleted before its start, workloads created before its end.  ``managedFields``
and the ``last-applied-configuration`` annotation are dropped and secret-looking
environment values redacted; the manifest lists what was redacted, never the value.

The client is imported lazily: it is the optional ``collect`` extra."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tailtriage.collect.manifest import SourceOutcome
from tailtriage.errors import BackendError
from tailtriage.model.timeparse import parse_instant
from tailtriage.sources.redact import REDACTED, is_secret_key

#: objects per list call; the API server pages the rest with ``continue``
PAGE_SIZE = 500
#: parts of an environment variable name that mark its value as a credential
ENV_SECRET_PARTS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL")
#: annotation kubectl apply leaves behind: a full copy of the spec, env values included
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
INSTALL_HINT = "pip install 'tailtriage[collect]' (the official kubernetes client)"


@dataclass(frozen=True)
class Kind:
    """One resource to list: the client API class and its method names, or a CRD."""

    file: str  # bundle file stem
    kind: str  # item kind, as kubectl writes it
    api_version: str
    api: str = ""  # client class, e.g. CoreV1Api
    method: str = ""  # list_namespaced_<x>; the all-namespaces one is derived
    crd: tuple[str, str, str] | None = None  # (group, version, plural)
    windowed_by: str = "created"  # created | event | pod


KINDS: tuple[Kind, ...] = (
    Kind("pods", "Pod", "v1", "CoreV1Api", "pod", windowed_by="pod"),
    Kind("events", "Event", "v1", "CoreV1Api", "event", windowed_by="event"),
    Kind("deployments", "Deployment", "apps/v1", "AppsV1Api", "deployment"),
    Kind("replicasets", "ReplicaSet", "apps/v1", "AppsV1Api", "replica_set"),
    Kind(
        "hpas",
        "HorizontalPodAutoscaler",
        "autoscaling/v2",
        "AutoscalingV2Api",
        "horizontal_pod_autoscaler",
    ),
    Kind(
        "leaderworkersets",
        "LeaderWorkerSet",
        "leaderworkerset.x-k8s.io/v1",
        crd=("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
    ),
    Kind(
        "knative-services",
        "Service",
        "serving.knative.dev/v1",
        crd=("serving.knative.dev", "v1", "services"),
    ),
)


def kubernetes_configured(kubeconfig: str | None, context: str | None) -> bool:
    """Whether Kubernetes access is configured here (asked for, a kubeconfig, or a pod)."""
    default = Path("~/.kube/config").expanduser()
    return bool(
        kubeconfig
        or context
        or os.environ.get("KUBECONFIG")
        or default.exists()
        or os.environ.get("KUBERNETES_SERVICE_HOST")
    )


def api_client(kubeconfig: str | None, context: str | None, timeout: float) -> Any:
    """An ApiClient from a kubeconfig (``--kubeconfig``, ``$KUBECONFIG``, ``~/.kube/config``)
    or, inside a pod, from its service account.  Retries off: the caller reports failures."""
    try:
        import kubernetes
    except ModuleNotFoundError:
        raise BackendError(f"Kubernetes: the client is not installed; {INSTALL_HINT}") from None
    client: Any = kubernetes.client
    config: Any = kubernetes.config
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    try:
        if kubeconfig or Path(path.split(os.pathsep)[0]).exists():
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            raise BackendError("Kubernetes: no kubeconfig found and not running in a cluster")
    except config.ConfigException as exc:
        raise BackendError(f"Kubernetes: {' '.join(str(exc).split())[:300]}") from None
    cfg.retries = False
    return client.ApiClient(cfg)


def collect_kubernetes(
    api: Any, out: Path, namespace: str | None, window: tuple[float, float], timeout: float
) -> SourceOutcome:
    """Every KIND listed and written under ``out/kubernetes/``; errors become outcome lines.

    A connection failure stops the source (one line); a refused or missing resource only
    skips that resource."""
    from kubernetes.client import ApiException

    target = f"{api.configuration.host}" + (f" namespace {namespace}" if namespace else "")
    folder = out / "kubernetes"
    files: list[str] = []
    errors: list[str] = []
    notes: list[str] = []
    redactions: list[str] = []
    records = 0
    for kind in KINDS:
        try:
            items = list(_list(api, kind, namespace, timeout))
        except ApiException as exc:
            if kind.crd is not None and exc.status == 404:
                notes.append(f"{kind.kind} ({kind.api_version}): no such resource (CRD absent)")
            else:
                errors.append(f"{kind.file}: Kubernetes API answered HTTP {exc.status}")
            continue
        except BackendError as exc:
            errors.append(f"{kind.file}: {exc}")
            if not files:  # unreachable from the start: one line, not one per resource
                break
            continue
        kept = [_clean(kind, o, redactions) for o in items if _in_window(kind, o, window)]
        folder.mkdir(parents=True, exist_ok=True)
        doc = {"apiVersion": "v1", "items": kept, "kind": "List", "metadata": {}}
        (folder / f"{kind.file}.json").write_bytes(orjson.dumps(doc) + b"\n")
        files.append(f"kubernetes/{kind.file}.json")
        records += len(kept)
    asked = tuple(f"{k.kind} ({k.api_version})" for k in KINDS)
    summary = _redaction_summary(redactions)
    return SourceOutcome(
        "kubernetes", target, asked, tuple(files), records, tuple(errors), tuple(notes), summary
    )


def _list(api: Any, kind: Kind, namespace: str | None, timeout: float) -> Iterator[Any]:
    """Every object of ``kind``, following ``continue`` tokens; raw JSON, not models."""
    import kubernetes
    import urllib3

    client: Any = kubernetes.client
    call: Callable[..., Any]
    args: tuple[Any, ...]
    if kind.crd is not None:
        custom = client.CustomObjectsApi(api)
        group, version, plural = kind.crd
        if namespace:
            call, args = custom.list_namespaced_custom_object, (group, version, namespace, plural)
        else:
            call, args = custom.list_cluster_custom_object, (group, version, plural)
    else:
        typed = getattr(client, kind.api)(api)
        if namespace:
            call, args = getattr(typed, f"list_namespaced_{kind.method}"), (namespace,)
        else:
            call, args = getattr(typed, f"list_{kind.method}_for_all_namespaces"), ()
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": PAGE_SIZE, "_request_timeout": timeout}
        if token:
            kwargs["_continue"] = token
        try:
            resp = call(*args, _preload_content=False, **kwargs)
            doc = orjson.loads(resp.data)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise BackendError(
                f"cannot read the Kubernetes API at {api.configuration.host}: {_reason(exc)}"
            ) from None
        except orjson.JSONDecodeError:
            raise BackendError("the Kubernetes API did not answer JSON") from None
        items = doc.get("items") if isinstance(doc, dict) else None
        yield from items if isinstance(items, list) else ()
        token = (doc.get("metadata") or {}).get("continue") if isinstance(doc, dict) else None
        if not token:
            return


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    text = str(reason or exc) or exc.__class__.__name__
    return " ".join(text.split())[:200]


def _time(value: Any) -> float | None:
    if isinstance(value, str) and value:
        try:
            return parse_instant(value)
        except (ValueError, OverflowError):
            return None
    return None


def _in_window(kind: Kind, obj: Any, window: tuple[float, float]) -> bool:
    if not isinstance(obj, Mapping):
        return False
    start, end = window
    meta = _mapping(obj.get("metadata"))
    created = _time(meta.get("creationTimestamp"))
    if kind.windowed_by == "event":
        series = _mapping(obj.get("series"))
        times = [
            t
            for t in (
                _time(obj.get("eventTime")),
                _time(obj.get("firstTimestamp")),
                _time(obj.get("lastTimestamp")),
                _time(series.get("lastObservedTime")),
                created,
            )
            if t is not None
        ]
        return bool(times) and min(times) <= end and max(times) >= start
    if created is not None and created > end:
        return False
    if kind.windowed_by == "pod":
        deleted = _time(meta.get("deletionTimestamp"))
        return deleted is None or deleted >= start
    return True


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _clean(kind: Kind, obj: Mapping[str, Any], redactions: list[str]) -> dict[str, Any]:
    """kubectl's item shape (apiVersion and kind first), minus bulk and secrets."""
    item: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind}
    item.update({k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
    meta: dict[str, Any] = dict(_mapping(item.get("metadata")))
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
        meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        redactions.append(f"{kind.kind}: annotation {LAST_APPLIED} dropped")
    item["metadata"] = meta
    _redact_env(item, kind.kind, redactions)
    return item


def _redact_env(node: Any, kind: str, redactions: list[str]) -> None:
    """Replace ``env[].value`` of secret-looking names anywhere in a pod template/spec."""
    if isinstance(node, dict):
        env = node.get("env")
        if isinstance(env, list):
            for var in env:
                name = var.get("name") if isinstance(var, dict) else None
                if isinstance(name, str) and "value" in var and _secret_env(name):
                    var["value"] = REDACTED
                    redactions.append(f"{kind}: env {name} value redacted")
        for value in node.values():
            _redact_env(value, kind, redactions)
    elif isinstance(node, list):
        for value in node:
            _redact_env(value, kind, redactions)


def _secret_env(name: str) -> bool:
    return is_secret_key(name) or any(part in name.upper() for part in ENV_SECRET_PARTS)


def _redaction_summary(lines: list[str]) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    return tuple(f"{line} (x{n})" if n > 1 else line for line, n in counts.items())
