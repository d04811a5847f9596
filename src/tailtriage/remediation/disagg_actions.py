"""Remediations for disaggregated and cache-aware serving: KV transfer, prefix-cache misses,
admission control.

The simulator models one engine pool with its own prefix cache and no router index, no KV
connector and no admission queue limit, so none of these changes can be predicted yet: each
candidate says so (``Candidate.not_predicted``) instead of showing a made-up effect.

Three of the actions already exist in the catalog for other causes (``placement``,
``routing_policy``, ``concurrency_limit``): :func:`extend` adds the new cause to them and
sends its findings here, the others to the catalog's own proposal."""

from __future__ import annotations

from typing import Final

from tailtriage.diagnosis import DiagnosisContext, Finding
from tailtriage.remediation import configs as C
from tailtriage.remediation.catalog import (
    Candidate,
    Current,
    FnAction,
    ProposeFn,
    register,
    registered,
)

NO_KV_MODEL: Final = (
    "the simulator has no prefill/decode worker split nor KV connector, so it cannot model "
    "the transfer time"
)
NO_ROUTER_MODEL: Final = (
    "the simulator has no router with a prefix-cache index, so it cannot model where requests land"
)
NO_ADMISSION_MODEL: Final = (
    "the simulator has no engine admission queue limit, so it cannot model deferred requests"
)
#: the queue limit to propose: this many times the current one (or a start value)
QUEUE_LIMIT_FACTOR: Final = 2
DEFAULT_QUEUE_LIMIT: Final = 256


def _colocate_pairs(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    params = {"disagg.kv_connector": "NixlConnector", "placement.prefill_decode": "same_node"}
    config = (
        "# vLLM P/D: a zero-copy connector, and prefill/decode pairs in one NVLink/RDMA domain\n"
        '--kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'\n'
        "# pod affinity: schedule each prefill pod next to its decode pods (topologyKey: "
        "kubernetes.io/hostname or the RDMA rack label)\n"
    )
    return (
        Candidate(
            "placement",
            (f.category,),
            "Move the KV cache over NVLink/RDMA: use a zero-copy connector (NIXL) and place "
            "prefill and decode pods in the same interconnect domain.",
            params,
            config,
            ("Check that the transport really is RDMA: a silent TCP fallback is the usual cause.",),
            not_predicted=NO_KV_MODEL,
        ),
    )


def _aggregate_again(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    params = {"engine.disaggregated": False}
    return (
        Candidate(
            "disaggregate_prefill",
            (f.category,),
            "Serve short prompts aggregated (prefill on the decode worker) when the KV transfer "
            "costs more than the prefill it saves.",
            params,
            "# route prompts under the transfer break-even length to aggregated workers\n",
            ("Long prompts still gain from disaggregation; set the threshold from the data.",),
            not_predicted=NO_KV_MODEL,
        ),
    )


def _prefix_aware_routing(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    params = {"router.policy": "prefix_cache_aware", "router.index": "kv_events"}
    config = (
        "# llm-d / Inference Extension EPP: weight the prefix-cache scorer, and keep the index\n"
        "# fed by the engines' KV events (not the request history) so it does not go stale\n"
        "scorers:\n  - name: prefix-cache-scorer\n    weight: 3\n"
        "  - name: load-aware-scorer\n    weight: 1\n"
    )
    return (
        Candidate(
            "routing_policy",
            (f.category,),
            "Route on the prefix-cache index (fed by KV events) before load, so requests reach "
            "the endpoint that already holds their prefix.",
            params,
            config,
            ("A load-blind prefix router piles hot prefixes on one endpoint: keep a load term.",),
            not_predicted=NO_ROUTER_MODEL,
        ),
    )


def _queue_limit(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = current("engine.max_num_queued_reqs")
    limit = int(now) * QUEUE_LIMIT_FACTOR if isinstance(now, int) and now > 0 else None
    target = limit or DEFAULT_QUEUE_LIMIT
    params = {"engine.max_num_queued_reqs": target}
    return (
        Candidate(
            "concurrency_limit",
            (f.category,),
            f"Raise the engine's admission limit (--max-num-queued-reqs {target}) so requests "
            f"are queued rather than deferred or rejected while capacity exists.",
            params,
            f"--max-num-queued-reqs {target}\n",
            ("A longer queue trades rejections for queueing time: watch the TTFT tail.",),
            not_predicted=NO_ADMISSION_MODEL,
        ),
    )


def extend(name: str, category: str, fn: ProposeFn) -> None:
    """Let the registered action ``name`` also address ``category``, proposing with ``fn``."""
    previous = next((a for a in registered() if a.name == name), None)

    def propose(
        ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
    ) -> tuple[Candidate, ...]:
        if f.category == category or previous is None:
            return fn(ctx, f, current, t)
        return previous.propose(ctx, f, current, t)

    addresses = (*previous.addresses, category) if previous is not None else (category,)
    register(FnAction(name, tuple(dict.fromkeys(addresses)), propose))


extend("placement", "kv_transfer", _colocate_pairs)
extend("disaggregate_prefill", "kv_transfer", _aggregate_again)
extend("routing_policy", "prefix_cache_miss", _prefix_aware_routing)
extend("concurrency_limit", "admission_control", _queue_limit)
