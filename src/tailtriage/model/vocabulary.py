"""The fixed vocabulary every part of tailtriage shares: stage names, root-cause categories,
remediation actions and latency metrics (design section 3).  These strings are a public
contract: tests, JSON reports and users depend on them."""

from __future__ import annotations

from typing import Final, Literal, get_args

#: Canonical stages in path order (design 3.1).
Stage = Literal[
    "client",
    "ingress",
    "gateway_queue",
    "pending",
    "routing",  # a router / endpoint picker deciding where the request goes (EPP, Dynamo)
    "api_server",
    "engine_queue",
    "prefill",
    "kv_transfer",  # disaggregated serving: prefill worker -> decode worker KV handoff
    "decode",
    "unattributed",
]
#: the same, as a tuple in path order
STAGES: Final[tuple[Stage, ...]] = get_args(Stage)

#: Stages that happen before the first token; their sum is TTFT (the decode worker of a
#: disaggregated pair sends the first token after the KV transfer).
PRE_FIRST_TOKEN_STAGES: Final[tuple[Stage, ...]] = (
    *STAGES[: STAGES.index("decode")],
    "unattributed",
)

#: Root-cause categories (design 3.2).
Category = Literal[
    "ingress_network",
    "gateway_queue",
    "scaling_lag",
    "cold_start",
    "compute_saturation",
    "prefill_compute",
    "kv_cache_pressure",
    "decode_memory_bound",
    "tensor_parallel_overhead",
    "prefill_interference",
    "load_imbalance",
    "api_server_overhead",
    "rollout",
    # disaggregated and cache-aware serving (design 3.2)
    "kv_transfer",
    "prefix_cache_miss",
    "admission_control",
    "insufficient_telemetry",
]
#: the same, as a tuple
CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)

#: Remediation actions (design 3.5).
ActionName = Literal[
    "hpa_metric",
    "hpa_policy",
    "min_replicas",
    "prewarm",
    "weight_loading",
    "replicas",
    "max_num_batched_tokens",
    "max_num_seqs",
    "chunked_prefill",
    "prefix_caching",
    "concurrency_limit",
    "routing_policy",
    "quantization",
    "kv_cache_dtype",
    "speculative_decoding",
    "tensor_parallel",
    "placement",
    "disaggregate_prefill",
    "rollout_policy",
    "connection_reuse",
    "gateway_capacity",
    "api_server_workers",
    "combined",
]
#: the same, as a tuple
ACTIONS: Final[tuple[ActionName, ...]] = get_args(ActionName)


def as_stage(name: str) -> Stage:
    """``name`` as a Stage; ValueError names the known ones (for strings read from outside)."""
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; known: {', '.join(STAGES)}")
    return name


def as_category(name: str) -> Category:
    """``name`` as a root-cause Category; ValueError names the known ones."""
    if name not in CATEGORIES:
        raise ValueError(f"unknown category {name!r}; known: {', '.join(CATEGORIES)}")
    return name


def as_action(name: str) -> ActionName:
    """``name`` as a remediation ActionName; ValueError names the known ones."""
    if name not in ACTIONS:
        raise ValueError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}")
    return name


#: Latency metrics an SLO can name.
METRICS: Final[tuple[str, ...]] = ("ttft", "itl", "tpot", "e2e")

#: Kinds of the ``events`` table.  Kubernetes events and pod conditions map onto these
#: (``sources/kubernetes``); the simulator emits the same.  ``pod_pending`` and ``cold_start``
#: are derived, with ``duration`` set: pending = created -> scheduled, cold start =
#: scheduled -> ready (image pull + model load + warm-up).  ``hpa_rescale`` and
#: ``replicaset_scaled`` carry ``{"replicas": new_size}`` in ``attributes``; every pod event
#: carries ``{"pod": name}``.
EVENT_KINDS: Final[tuple[str, ...]] = (
    "pod_created",
    "pod_scheduled",
    "failed_scheduling",
    "node_scale_up",
    "image_pulling",
    "image_pulled",
    "container_started",
    "pod_ready",
    "pod_unhealthy",
    "pod_killing",
    "pod_pending",
    "cold_start",
    "hpa_rescale",
    "replicaset_scaled",
    "rollout",
    "other",
)
