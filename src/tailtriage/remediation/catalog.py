"""The catalog of remediation actions: which findings each addresses, its preconditions, the
simulator overrides it proposes (dotted keys of ``simulator.apply_overrides``) and the config a
person applies.  Actions are a small Protocol plus a name registry, like rules and sources.

Guardrails live here, next to the actions they constrain:

* ``replicas`` is proposed only when :func:`~tailtriage.diagnosis.saturation_proof` holds;
* any change that makes batches larger carries its TTFT cost as a caveat (and the planner
  attaches the predicted TTFT);
* quantization always carries the accuracy caveat."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from tailtriage.analyses.rollout import analyze_rollout
from tailtriage.diagnosis import DiagnosisContext, Finding, load_aware, saturation_proof
from tailtriage.diagnosis import thresholds as T
from tailtriage.model.vocabulary import ACTIONS, ActionName, Category
from tailtriage.remediation import configs as C

#: current value of a simulator key in the calibrated model, None when unknown
Current = Callable[[str], Any]

BIGGER_BATCH_CAVEAT = (
    "Larger batches raise throughput but lengthen every engine step, so TTFT (and ITL) grow; "
    "check the predicted TTFT before applying."
)
QUANTIZATION_CAVEAT = (
    "Quantization changes the model's outputs: validate accuracy on your own evaluation set "
    "(fp8 is usually within noise; int4/AWQ/GPTQ can hurt reasoning and code tasks): run "
    "`tailtriage quantgate --baseline URL --candidate URL --eval FILE.jsonl --budget 1pt` "
    "and do not apply where accuracy requirements forbid it."
)


@dataclass(frozen=True)
class Candidate:
    """A proposed change, before the simulator predicts its effect."""

    action: ActionName
    addresses: tuple[Category, ...]
    summary: str
    parameters: Mapping[str, Any]
    config: str = ""
    caveats: tuple[str, ...] = ()
    larger_batch: bool = False  # guardrail: must carry the TTFT cost
    #: what the change risks beyond latency and throughput (accuracy, GPU cost), 0..1; the
    #: planner prefers a config change that keeps the model and the fleet as they are
    risk: float = 0.0
    #: guardrail: it adds GPUs (replicas, warm replicas, a wider tensor-parallel group, a bigger
    #: GPU, a smaller model): never first unless compute saturation is proven
    adds_capacity: bool = False
    #: why the simulator cannot predict this change (empty: it can); such a candidate is
    #: listed with that reason instead of a predicted effect
    not_predicted: str = ""


class Action(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def addresses(self) -> tuple[str, ...]: ...

    def propose(
        self, ctx: DiagnosisContext, finding: Finding, current: Current, target: C.Target
    ) -> tuple[Candidate, ...]: ...


ProposeFn = Callable[[DiagnosisContext, Finding, Current, C.Target], tuple[Candidate, ...]]


@dataclass(frozen=True)
class FnAction:
    """An action whose proposals come from a function (most of the catalog)."""

    name: str
    addresses: tuple[str, ...]
    fn: ProposeFn = field(repr=False)

    def propose(
        self, ctx: DiagnosisContext, finding: Finding, current: Current, target: C.Target
    ) -> tuple[Candidate, ...]:
        return self.fn(ctx, finding, current, target)


_REGISTRY: dict[str, Action] = {}


def register(action: Action) -> Action:
    if action.name not in ACTIONS:
        raise ValueError(f"unknown action {action.name!r}; known: {', '.join(ACTIONS)}")
    _REGISTRY[action.name] = action
    return action


def registered() -> Iterator[Action]:
    return iter(list(_REGISTRY.values()))


def for_category(category: str) -> tuple[Action, ...]:
    return tuple(a for a in _REGISTRY.values() if category in a.addresses)


def action(name: str, *addresses: str) -> Callable[[ProposeFn], ProposeFn]:
    def deco(fn: ProposeFn) -> ProposeFn:
        register(FnAction(name, tuple(addresses), fn))
        return fn

    return deco


def _int(v: Any, default: int) -> int:
    try:
        return int(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def _float(v: Any, default: float) -> float:
    try:
        return float(v) if v is not None else default
    except (TypeError, ValueError):
        return default


# -- autoscaling and capacity -----------------------------------------------------------------


@action("hpa_metric", "scaling_lag", "compute_saturation", "kv_cache_pressure")
def _hpa_metric(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    enabled = current("hpa.enabled") is not False  # unknown: assume the usual HPA
    now = str(current("hpa.metric") or ",".join(ctx.signals.hpa_metrics) or "") if enabled else ""
    if now and load_aware(now):
        return ()  # already on an engine metric: hpa_policy handles a slow reaction
    if f.category == "compute_saturation" and saturation_proof(ctx).proven:
        return ()
    out = []
    # the snippet keeps today's replica bounds (an HPA's defaults, 1 to 10, would silently
    # shrink or grow a deployment that runs 6 to 8)
    lo = max(_int(current("hpa.min_replicas"), t.min_replicas), 1)
    t = replace(
        t, min_replicas=lo, max_replicas=max(_int(current("hpa.max_replicas"), t.max_replicas), lo)
    )
    # queue depth is the documented vLLM signal; KV usage when the KV cache is the limit
    kv = f.category == "kv_cache_pressure"
    for metric, target in (
        ("vllm:num_requests_waiting", _queue_target(ctx)),
        ("vllm:kv_cache_usage_perc", 0.8),
    ):
        if kv != (metric == "vllm:kv_cache_usage_perc"):
            continue
        params: dict[str, Any] = {"hpa.metric": metric, "hpa.target": target}
        summary = (
            f"Scale the HPA on the engine's {metric} (target {target} per pod) instead of "
            f"{now or 'its current metric'}, so replicas follow the GPU queue."
        )
        if not enabled:  # the telemetry shows no autoscaler: the fix is to add one
            # ... that never goes below today's replicas (an HPA's default minimum is 1)
            n = max(_int(current("pods.initial_replicas"), 1), 1)
            params.update({
                "hpa.enabled": True, "hpa.min_replicas": n, "hpa.max_replicas": max(2 * n, n + 2)
            })  # fmt: skip
            t = replace(t, min_replicas=n, max_replicas=max(2 * n, n + 2))
            summary = (
                f"Add an HPA on the engine's {metric} (target {target} per pod, {n} to "
                f"{max(2 * n, n + 2)} replicas): the replica count is fixed now, so nothing "
                "adds capacity when the load grows."
            )
        out.append(
            Candidate(
                "hpa_metric",
                (f.category,),
                summary,
                params,
                C.hpa_v2(t, metric, target) + C.keda_scaled_object(t, metric, target),
            )
        )
    return tuple(out)


def _queue_target(ctx: DiagnosisContext) -> float:
    """Per-pod queue depth to hold: a few times the healthy window's, so the HPA adds pods as
    soon as the queue leaves its healthy level (0.5 .. 5; 5 without a healthy window)."""
    base = ctx.signals.baseline
    q = base.gauge("queue_waiting") if base is not None else None
    if q is None or not q.per_replica_mean:
        return 5.0
    healthy = sum(q.per_replica_mean.values()) / len(q.per_replica_mean)
    return round(min(max(4.0 * healthy, 0.5), 5.0), 1)


@action("hpa_policy", "scaling_lag")
def _hpa_policy(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    if current("hpa.enabled") is False:
        return ()  # no autoscaler to tune
    params = {"hpa.scale_up.pods": 4, "hpa.scale_up.period_s": 15.0, "hpa.scrape_lag_s": 5.0}
    return (
        Candidate(
            "hpa_policy",
            ("scaling_lag",),
            "React faster: scrape the scaling metric every 5 s and allow +4 pods (or +100 %) "
            "per 15 s with no scale-up stabilization.",
            params,
            C.hpa_behavior(t, 15.0, 4),
        ),
    )


@action("min_replicas", "scaling_lag", "cold_start", "rollout")
def _min_replicas(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = _int(current("hpa.min_replicas"), t.min_replicas)
    g = ctx.signals.incident.gauge("hpa_current")
    peak = int(g.max) if g is not None else now + 1
    n = max(now + 1, peak)
    if f.category == "rollout":
        # a spare replica through the rollout: one more than runs now, never fewer (without
        # an HPA, minReplicas is below the Deployment's replica count)
        n = max(n, _int(current("pods.initial_replicas"), 0) + 1)
    overrides: dict[str, object] = {"hpa.min_replicas": n, "pods.initial_replicas": n}
    ceiling = _int(current("hpa.max_replicas"), n)
    if ceiling < n:  # minReplicas above maxReplicas is refused by the API server
        overrides["hpa.max_replicas"] = n
    return (
        Candidate(
            "min_replicas",
            (f.category,),
            f"Keep {n} replicas warm (minReplicas {now} -> {n}"
            + (f", maxReplicas {ceiling} -> {n}" if ceiling < n else "")
            + ") so bursts find ready pods.",
            overrides,
            C.min_replicas(t, n),
            ("Idle replicas cost GPU hours outside the burst.",),
            risk=0.1,
            adds_capacity=True,
        ),
    )


@action("prewarm", "cold_start", "scaling_lag")
def _prewarm(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    if current("pods.image_cached") is True and f.category != "cold_start":
        return ()
    params = {"pods.image_cached": True, "pods.node_image_cached": True}
    return (
        Candidate(
            "prewarm",
            (f.category,),
            "Pre-pull the serving image on every node, and bake it into the node image so "
            "nodes that join have it too; keep the weights on local disk: a new pod skips the "
            "image pull.",
            params,
            C.prewarm(t, params),
        ),
    )


@action("weight_loading", "cold_start")
def _weight_loading(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = float(current("pods.load_gb_s") or 2.0)
    if now >= 20.0:
        return ()  # loading is already fast: the cold start is elsewhere (pull, warm-up)
    fast = max(now * 4.0, 8.0)
    params = {"pods.load_gb_s": fast}
    return (
        Candidate(
            "weight_loading",
            ("cold_start",),
            f"Load weights faster ({now:g} -> {fast:g} GB/s: local NVMe cache or a streaming "
            f"loader) to shorten the cold start.",
            params,
            C.prewarm(t, params),
        ),
    )


@action("replicas", "compute_saturation")
def _replicas(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    proof = saturation_proof(ctx)
    if not proof.proven:
        return ()  # guardrail: never "add GPUs" without proof of saturation
    inc = ctx.signals.incident
    now = _int(current("pods.initial_replicas"), max(len(inc.replicas), 1))
    need = inc.arrival_rps / max(inc.completion_rps, 1e-9)
    n = max(now + 1, math.ceil(now * need * 1.2))
    return (
        Candidate(
            "replicas",
            ("compute_saturation",),
            f"Add capacity: {now} -> {n} replicas (saturation proven: {'; '.join(proof.reasons)}).",
            {"hpa.min_replicas": n, "pods.initial_replicas": n},
            C.deployment_replicas(t, n),
            ("More GPUs: check batching and quantization options first.",),
            risk=0.15,
            adds_capacity=True,
        ),
    )


# -- engine -----------------------------------------------------------------------------------


@action(
    "max_num_batched_tokens",
    "prefill_compute",
    "compute_saturation",
    "prefill_interference",
    "kv_cache_pressure",
)
def _batched_tokens(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = _int(current("engine.max_num_batched_tokens"), 2048)
    out = []
    # both directions: which one helps depends on the workload (short prompts sharing a step
    # vs long prompts chunked over several); the calibrated simulator decides
    for value in sorted({max(now // 2, 16), now * 2}):
        bigger = value > now
        out.append(
            Candidate(
                "max_num_batched_tokens",
                (f.category,),
                f"{'Raise' if bigger else 'Lower'} the engine's token budget per step "
                f"(--max-num-batched-tokens {now} -> {value}).",
                {"engine.max_num_batched_tokens": value},
                C.engine_flags({"engine.max_num_batched_tokens": value}),
                (BIGGER_BATCH_CAVEAT,)
                if bigger
                else ("Smaller steps cost some throughput (less work per weight read).",),
                larger_batch=bigger,
            )
        )
    return tuple(out)


@action("max_num_seqs", "decode_memory_bound", "kv_cache_pressure")
def _max_num_seqs(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = _int(current("engine.max_num_seqs"), 256)
    g = ctx.signals.incident.gauge("running")
    ref = min(now, int(g.max)) if g is not None and g.max >= 2 else now
    value = max(ref // 2, 1)
    return (
        Candidate(
            "max_num_seqs",
            (f.category,),
            f"Cap the running batch (--max-num-seqs {now} -> {value}) so each decode step reads "
            f"less KV cache.",
            {"engine.max_num_seqs": value},
            C.engine_flags({"engine.max_num_seqs": value}),
            ("Fewer sequences per step lowers throughput; waiting requests queue longer.",),
        ),
    )


#: the chunk size a fix for interference proposes at most: vLLM's tuning guide names smaller
#: budgets ("e.g. 2048") for better inter-token latency (docs/configuration/optimization.md,
#: chunked prefill); a quarter of a large fitted budget (32768 -> 8192) still stalls decodes
ITL_CHUNK_TOKENS: Final = 2048
#: ... and at least: below it each step re-reads the weights for too little prefill work
MIN_CHUNK_TOKENS: Final = 256


@action("chunked_prefill", "prefill_interference")
def _chunked_prefill(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = _int(current("engine.max_num_batched_tokens"), 2048)
    params: dict[str, Any] = {"engine.chunked_prefill": True}
    if current("engine.chunked_prefill") is True:
        params["engine.max_num_batched_tokens"] = max(
            min(now // 4, ITL_CHUNK_TOKENS), MIN_CHUNK_TOKENS
        )
    return (
        Candidate(
            "chunked_prefill",
            ("prefill_interference",),
            "Chunk long prompts so decode steps are never stalled behind a whole prefill"
            + (
                f" (budget {now} -> {params['engine.max_num_batched_tokens']})"
                if "engine.max_num_batched_tokens" in params
                else ""
            )
            + ".",
            params,
            C.engine_flags(params),
            ("Smaller chunks raise the TTFT of long prompts.",),
        ),
    )


@action("prefix_caching", "prefill_compute", "kv_cache_pressure")
def _prefix_caching(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    if current("engine.prefix_caching") is not False:
        return ()
    params = {"engine.prefix_caching": True}
    return (
        Candidate(
            "prefix_caching",
            (f.category,),
            "Enable prefix caching so shared system prompts are prefilled once.",
            params,
            C.engine_flags(params),
        ),
    )


@action("quantization", "decode_memory_bound", "compute_saturation", "prefill_compute")
def _quantization(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    if str(current("model.dtype") or "bf16") not in ("bf16", "fp16"):
        return ()
    params = {"model.dtype": "fp8"}
    return (
        Candidate(
            "quantization",
            (f.category,),
            "Serve FP8 weights: half the bytes read per decode step, faster prefill GEMMs.",
            params,
            C.engine_flags(params),
            (QUANTIZATION_CAVEAT,),
            # a model change: only where accuracy allows, so any config fix that works first
            risk=0.5,
        ),
    )


@action("kv_cache_dtype", "kv_cache_pressure")
def _kv_dtype(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    if str(current("model.kv_dtype") or "bf16") not in ("bf16", "fp16", "auto"):
        return ()
    params = {"model.kv_dtype": "fp8"}
    return (
        Candidate(
            "kv_cache_dtype",
            ("kv_cache_pressure",),
            "Store the KV cache in FP8: twice the tokens fit, fewer preemptions.",
            params,
            C.engine_flags(params),
            ("FP8 KV cache can cost a little accuracy on long contexts; validate.",),
            risk=0.2,
        ),
    )


def _advised_layout(current: Current, now: int, value: int) -> tuple[bool, str]:
    """Whether TP ``value`` fits, and what `advise parallelism` predicts for it against TP
    ``now`` on the same GPUs (the freed or added GPUs as replicas), where the deployment's
    model and GPU are known to the roofline; (True, "") where they are not."""
    from tailtriage.advise.catalog import CatalogModel
    from tailtriage.advise.layouts import Cluster, Layout
    from tailtriage.advise.parallelism import predict_layout
    from tailtriage.advise.workload import default_workload
    from tailtriage.simulator.steptime import GPUS, LINKS, MODELS, link

    name, gpu, fabric = current("model.name"), current("gpu.type"), current("gpu.interconnect")
    if name not in MODELS or gpu not in GPUS:
        return True, ""
    pp = _int(current("gpu.pp"), 1)
    kind = link(fabric if fabric in LINKS else "nvlink").name
    gpus = max(now, value) * pp
    cluster = Cluster(gpus, 1, kind, kind)
    model = CatalogModel(MODELS[name], "simulator")
    dtype = str(current("model.dtype") or "bf16")
    before, after = (
        predict_layout(model, GPUS[gpu], cluster, Layout(tp, pp, gpus // (tp * pp)),
                       default_workload(), dtype=dtype)
        for tp in (now, value)
    )  # fmt: skip
    if not after.memory.fits:
        return False, ""
    if before.tpot_s is None or after.tpot_s is None:
        return True, ""
    return True, (
        f" `advise parallelism` on these {gpus} GPUs: {before.layout.label} -> "
        f"{after.layout.label}, TPOT at batch 1 {before.tpot_s * 1e3:.1f} -> "
        f"{after.tpot_s * 1e3:.1f} ms"
    )


@action("tensor_parallel", "tensor_parallel_overhead", "decode_memory_bound")
def _tensor_parallel(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = _int(current("gpu.tp"), 1)
    seen = ctx.signals.gpus_per_replica or 1
    if now <= 1 < seen:
        now = seen  # the config is unknown; the GPUs per pod show the parallel degree
    if f.category == "tensor_parallel_overhead":
        if now <= 1:
            return ()
        value = now // 2
        why = "fewer all-reduces per step; run more replicas with the freed GPUs"
    else:
        value = now * 2
        why = "split the weight reads of each decode step over more GPUs' HBM"
    fits, advised = _advised_layout(current, now, value)
    if not fits:
        return ()  # the weights and one sequence's KV cache would not fit at that degree
    params = {"gpu.tp": value}
    return (
        Candidate(
            "tensor_parallel",
            (f.category,),
            f"Tensor-parallel degree {now} -> {value}: {why}.{advised}",
            params,
            C.engine_flags(params),
            ("Changing TP changes GPUs per replica; re-check memory for the KV cache.",),
            risk=0.15 if value > now else 0.0,  # a wider group is more GPUs per replica
            adds_capacity=value > now,
        ),
    )


@action("placement", "tensor_parallel_overhead")
def _placement(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    from tailtriage.simulator.steptime import GPUS

    if str(current("gpu.interconnect") or "") == "nvlink":
        return ()
    gpu = GPUS.get(str(current("gpu.type") or ""))
    if gpu is not None and not gpu.has_nvlink:
        # an L40S or L4 has no NVLink to place a group on: its all-reduces cross PCIe
        # wherever it runs (fewer TP ranks, or other GPUs, are the fixes there)
        return ()
    params = {"gpu.interconnect": "nvlink"}
    return (
        Candidate(
            "placement",
            ("tensor_parallel_overhead",),
            "Place each replica's tensor-parallel group on NVLink-connected GPUs of one node "
            "(topology-aware scheduling) instead of across PCIe or nodes.",
            params,
            "# node affinity to NVLink nodes, one replica per node\n"
            "nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}\n"
            "# with the NVIDIA GPU operator / DRA, request GPUs from one NVLink domain\n",
        ),
    )


# -- path -------------------------------------------------------------------------------------


@action("concurrency_limit", "gateway_queue")
def _concurrency(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = _int(current("gateway.concurrency_limit"), 0)
    if now <= 0:
        # no config given: the limit shows as the most requests one engine ever ran at once
        g = ctx.signals.incident.gauge("running")
        now = int(max(g.per_replica_max.values(), default=0)) if g is not None else 0
    value = now * 4 if now > 0 else 0
    params = {"gateway.concurrency_limit": value}
    return (
        Candidate(
            "concurrency_limit",
            ("gateway_queue",),
            f"Raise the gateway's per-replica concurrency limit ({now or 'unknown'} -> "
            f"{value or 'unlimited'}); the engines batch continuously and have room.",
            params,
            C.destination_rule(t, {"gateway.concurrency_limit": max(value, 1024)}),
        ),
    )


@action("routing_policy", "load_imbalance", "prefill_compute")
def _routing(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = str(current("gateway.routing") or "round_robin")
    if f.category == "prefill_compute":
        if now == "prefix_aware":
            return ()
        value = "prefix_aware"
    else:
        # LEAST_REQUEST is what a DestinationRule can set: simulated as Envoy runs it
        load_aware = now in ("least_outstanding", "least_request")
        value = "prefix_aware" if load_aware else "least_request"
    params = {"gateway.routing": value}
    was = now
    weights = current("gateway.weights")
    if now == "weighted" and weights:
        # the calibration read a skew: say what it is, not the simulator's policy name
        was = f"a load-blind hash sending one pod {max(weights):.1f} fair shares"
    return (
        Candidate(
            "routing_policy",
            (f.category,),
            f"Route by engine load ({was} -> {value}) so no replica queues while others idle.",
            params,
            C.destination_rule(t, params),
        ),
    )


@action("rollout_policy", "rollout")
def _rollout(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    """Surge-first (no capacity lost), a full surge (the new version comes up at once, then
    traffic moves: what a blue-green or canary shift costs in GPUs), and, where the new pods
    served slower right after Ready, a readiness gate on a warm-up request."""
    surge = _int(current("rollouts.0.max_surge"), 0)
    unavailable = _int(current("rollouts.0.max_unavailable"), 1)
    desired = _int(current("pods.initial_replicas"), 1)
    out = []
    if unavailable > 0 or surge < 1:
        params = {"rollouts.0.max_surge": 1, "rollouts.0.max_unavailable": 0}
        out.append(
            Candidate(
                "rollout_policy",
                ("rollout",),
                f"Roll out surge-first (maxSurge {surge} -> 1, maxUnavailable {unavailable} -> "
                "0) and gate traffic on a startup probe, so capacity never drops while new "
                "pods load the model.",
                params,
                C.rollout_strategy(t, 1, 0),
                ("Needs one spare GPU slot for the new pod while the rollout runs.",),
            )
        )
    if desired > 1 and surge < desired:
        params = {"rollouts.0.max_surge": desired, "rollouts.0.max_unavailable": 0}
        out.append(
            Candidate(
                "rollout_policy",
                ("rollout",),
                f"Bring the whole new version up before retiring the old one (maxSurge "
                f"{desired} = 100%, maxUnavailable 0): traffic shifts once every new pod is "
                "Ready, and the rollout takes one model load instead of one per pod.",
                params,
                C.rollout_strategy(t, desired, 0),
                (
                    f"Needs {desired} spare GPU slots for the length of one model load; on a "
                    "full cluster the new pods wait for nodes.",
                ),
                risk=0.1,
            )
        )
    slow = _warmup_penalty(ctx)
    if slow:
        # the calibration put the measured warm-up into the replay (calibrate/rollout.py);
        # the gate moves Ready past it, so the new pods warm up without traffic
        warm_s = _float(current("pods.ready_warmup_s"), 0.0)
        out.append(
            Candidate(
                "rollout_policy",
                ("rollout",),
                f"Gate readiness on a warm-up completion: {slow}",
                {"pods.ready_warmup_gated": True},
                C.warmup_readiness(t, str(current("model.name") or "MODEL")),
                (
                    f"Each new pod turns Ready ~{warm_s:.0f} s later"
                    + (
                        f": with maxUnavailable {unavailable} the rollout runs that much "
                        "longer below capacity."
                        if unavailable > 0
                        else ", so the rollout takes that much longer."
                    ),
                ),
                not_predicted=""
                if warm_s > 0
                else (
                    "the warm-up penalty is measured over the whole minute after Ready, but no "
                    "slice of it was slow enough to fit its length into the simulator"
                ),
            )
        )
    return tuple(out)


def _warmup_penalty(ctx: DiagnosisContext) -> str:
    """A sentence naming the warm-up penalty the rollout analysis measured ('' for none)."""
    if ctx.store is None:
        return ""
    found = analyze_rollout(ctx.store)
    slow = [w for w in found.warmups if (w.slowdown or 0.0) >= T.WARMUP_SLOWDOWN] if found else []
    if not slow:
        return ""
    worst = max(w.slowdown or 0.0 for w in slow)
    return (
        f"{len(slow)} new pod(s) served up to {worst:.1f}x slower in the engine in the minute "
        "after Ready."
    )


@action("connection_reuse", "ingress_network")
def _connection_reuse(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    params = {"ingress.keepalive_reuse": 0.99}
    return (
        Candidate(
            "connection_reuse",
            ("ingress_network",),
            "Reuse TLS connections (keep-alive, long idle timeouts, HTTP/2) so requests skip "
            "the handshake.",
            params,
            C.destination_rule(t, params),
        ),
    )


@action("api_server_workers", "api_server_overhead")
def _api_workers(
    ctx: DiagnosisContext, f: Finding, current: Current, t: C.Target
) -> tuple[Candidate, ...]:
    now = _int(current("api_server.workers"), 8)
    params = {"api_server.workers": now * 2}
    return (
        Candidate(
            "api_server_workers",
            ("api_server_overhead",),
            f"Run more API-server processes ({now} -> {now * 2}) so tokenization and request "
            f"handling do not queue on one CPU.",
            params,
            C.engine_flags(params),
            ("Give the container the CPU to match (resources.requests.cpu).",),
        ),
    )


def candidates_for(
    ctx: DiagnosisContext,
    findings: Sequence[Finding],
    current: Current,
    target: C.Target,
) -> tuple[Candidate, ...]:
    """Every candidate the catalog proposes for ``findings`` (deduplicated by parameters)."""
    seen: set[tuple[tuple[str, str], ...]] = set()
    out = []
    for f in findings:
        for act in for_category(f.category):
            for c in act.propose(ctx, f, current, target):
                key = tuple(sorted((k, repr(v)) for k, v in c.parameters.items()))
                if key in seen:
                    continue
                seen.add(key)
                out.append(c)
    return tuple(out)
