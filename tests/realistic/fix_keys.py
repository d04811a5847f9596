"""tailtriage's fix overrides in the generator's own vocabulary (issue 15's after-fix truth).

A remediation in a tailtriage report carries the simulator's dotted override keys
(``docs/scenarios.md``: ``engine.max_num_batched_tokens``, ``gpu.tp``, ``hpa.metric`` ...).
The generator's :class:`~realistic.spec.Spec` names its knobs its own way, so a fix is
translated key by key before ``with_overrides`` re-runs the case.  Only names and units are
mapped here - no code or model is shared with ``tailtriage.simulator``.  A key the generator
has no mechanism for is *not* approximated: it is returned in ``unsupported`` and the fix's
after-fix truth is not computed (the runner says so, per action)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from realistic.spec import Spec

#: tailtriage's HPA metric names -> the generator's HPA signals (``spec.HpaMetric``)
HPA_METRICS: Mapping[str, str] = {
    "vllm:num_requests_waiting": "queue",
    "vllm_num_requests_waiting": "queue",
    "DCGM_FI_DEV_GPU_UTIL": "gpu_util",
    "cpu": "cpu",
    "concurrency": "concurrency",
}
#: tailtriage's routing policies -> the generator's (Envoy ``LEAST_REQUEST`` is the
#: least-outstanding policy the simulator calls ``least_outstanding``)
ROUTING: Mapping[str, str] = {
    "least_request": "least_request",
    "least_outstanding": "least_request",
    "round_robin": "round_robin",
    "random": "random",
}


@dataclass(frozen=True)
class Translation:
    """``overrides`` for ``with_overrides``; ``unsupported``: keys with no mechanism there."""

    overrides: Mapping[str, object]
    unsupported: tuple[str, ...]


Rule = Callable[[Spec, object], Mapping[str, object] | None]


def _same(key: str) -> Rule:
    return lambda spec, v: {key: v}


def _hpa_metric(spec: Spec, v: object) -> Mapping[str, object] | None:
    metric = HPA_METRICS.get(str(v))
    return None if metric is None else {"hpa.metric": metric}


def _hpa_enabled(spec: Spec, v: object) -> Mapping[str, object] | None:
    if v is False:
        return {"hpa.metric": "none"}
    # enabling: the metric key of the same fix names the signal; alone, keep the spec's
    return {} if spec.hpa.metric != "none" or v is not True else {"hpa.metric": "queue"}


def _concurrency(spec: Spec, v: object) -> Mapping[str, object] | None:
    """Per-replica in-flight limit: Knative's ``containerConcurrency`` is per pod already;
    Envoy's pool limit counts every replica's connections (the spec's replica count)."""
    limit = int(v) if isinstance(v, (int, float)) else 0
    if spec.gateway.container_concurrency > 0 or spec.platform.startswith("knative"):
        return {"gateway.container_concurrency": limit}
    return {"gateway.max_connections": limit * spec.replicas}


def _keepalive(spec: Spec, v: object) -> Mapping[str, object] | None:
    # the incident's gateway settings are the ones in force while the SLO breached
    key = "incident_gateway" if spec.incident_gateway is not None else "gateway"
    return {f"{key}.keepalive_reuse": v}


def _routing(spec: Spec, v: object) -> Mapping[str, object] | None:
    policy = ROUTING.get(str(v))
    return None if policy is None else {"routing": policy}


def _api_workers(spec: Spec, v: object) -> Mapping[str, object] | None:
    # one API-server process per CPU: the generator's frontend capacity is its CPU limit
    return {"api.cpus": float(v)} if isinstance(v, (int, float)) else None


RULES: Mapping[str, Rule] = {
    "engine.max_num_batched_tokens": _same("engine.max_num_batched_tokens"),
    "engine.max_num_seqs": _same("engine.max_num_seqs"),
    "engine.chunked_prefill": _same("engine.chunked_prefill"),
    "hpa.metric": _hpa_metric,
    "hpa.target": _same("hpa.target"),
    "hpa.enabled": _hpa_enabled,
    "hpa.min_replicas": _same("hpa.min_replicas"),
    "hpa.max_replicas": _same("hpa.max_replicas"),
    "hpa.scale_up.pods": _same("hpa.up_pods"),
    "hpa.scale_up.period_s": _same("hpa.up_period_s"),
    "hpa.scrape_lag_s": _same("hpa.scrape_lag_s"),
    "pods.initial_replicas": _same("replicas"),
    "pods.image_cached": _same("pods.image_cached"),
    # the generator's cached image is on every node, joining ones included
    "pods.node_image_cached": _same("pods.image_cached"),
    "pods.load_gb_s": _same("pods.load_gb_s"),
    "gpu.tp": _same("tp"),
    "gpu.interconnect": _same("interconnect"),
    "gateway.concurrency_limit": _concurrency,
    "gateway.routing": _routing,
    "ingress.keepalive_reuse": _keepalive,
    "api_server.workers": _api_workers,
}


def translate(spec: Spec, overrides: Mapping[str, object]) -> Translation:
    """``overrides`` (tailtriage keys) as generator overrides for ``spec``.  A value the
    generator cannot express (a KV-usage HPA metric, prefix-aware routing) is unsupported
    like an unknown key."""
    out: dict[str, object] = {}
    missing: list[str] = []
    # an HPA switched on first, so that the fix's own metric key wins over the default signal
    for key, value in sorted(overrides.items(), key=lambda kv: kv[0] != "hpa.enabled"):
        rule = RULES.get(key)
        mapped = rule(spec, value) if rule is not None else None
        if mapped is None:
            missing.append(f"{key}={value}")
        else:
            out.update(mapped)
    return Translation(out, tuple(missing))
