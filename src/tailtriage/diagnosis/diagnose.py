"""Run every registered rule and rank what they find, most important first.

Importance = confidence x the share of the SLO it explains (seconds of the percentile, relative
to the SLO's threshold), so a sure finding about 5 ms never outranks a likely one about 300 ms.
Where a stage carries real tail time and no rule could decide why, the answer is
``insufficient_telemetry`` naming the exact metric or span to add."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from tailtriage.analyses.results import Decomposition, SloResult, Windows
from tailtriage.diagnosis import ranking
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rule import Rule, ms, registered, stage_evidence
from tailtriage.diagnosis.rules_engine import LOAD_DRIVEN
from tailtriage.diagnosis.signals import gather
from tailtriage.model import Capture
from tailtriage.model.vocabulary import as_stage
from tailtriage.store import Store

#: stage -> what to export so the rules can tell its causes apart
_TELEMETRY_FOR_STAGE: Mapping[str, tuple[str, ...]] = {
    "pending": (
        "kubectl get events -o json (Scheduled, Pulled, SuccessfulRescale)",
        "kube_horizontalpodautoscaler_status_desired_replicas and _current_replicas",
        "kube_horizontalpodautoscaler_spec_target_metric",
    ),
    "engine_queue": (
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc and vllm:num_preemptions_total",
        "DCGM_FI_PROF_SM_ACTIVE",
    ),
    "prefill": (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gen_ai.usage.input_tokens on the engine span",
        "vllm:kv_cache_usage_perc",
    ),
    "decode": (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "vllm:num_requests_running",
    ),
    "unattributed": (
        "engine spans (vllm serve --otlp-traces-endpoint ...) so the engine's time is "
        "attributed to queue / prefill / decode",
    ),
    "gateway_queue": ("inference_pool_average_queue_size or the queue-proxy queue_wait span",),
    "api_server": ("container_cpu_usage_seconds_total of the serving container",),
    "ingress": ("Envoy access-log or span timings per connection (TLS handshake)",),
    "routing": (
        "llm-d EPP metrics (llm_d_epp_kv_cache_index_lookup_hits_total) and its "
        "llm_d.epp.scoring / llm_d.kv_cache.index spans",
    ),
    "kv_transfer": (
        "sglang:kv_transfer_latency_ms and sglang:num_transfer_failed_reqs_total, or the "
        "KV connector's (NIXL) transfer metrics",
    ),
}

#: categories whose finding explains the given stage
_EXPLAINS: Mapping[str, frozenset[str]] = {
    "pending": frozenset({"scaling_lag", "cold_start", "rollout", "gateway_queue"}),
    "engine_queue": frozenset(
        {
            "compute_saturation",
            "kv_cache_pressure",
            "load_imbalance",
            "scaling_lag",
            "rollout",
            "cold_start",
            "admission_control",
        }
    ),
    "prefill": frozenset(
        {"prefill_compute", "kv_cache_pressure", "compute_saturation", "prefix_cache_miss"}
    ),
    "decode": frozenset(
        {
            "decode_memory_bound",
            "tensor_parallel_overhead",
            "prefill_interference",
            "kv_cache_pressure",
        }
    ),
    "gateway_queue": frozenset({"gateway_queue", "load_imbalance", "rollout", "cold_start"}),
    "api_server": frozenset({"api_server_overhead"}),
    "ingress": frozenset({"ingress_network", "gateway_queue"}),
    "client": frozenset({"ingress_network"}),
    "unattributed": frozenset(),
    "routing": frozenset({"prefix_cache_miss", "load_imbalance", "admission_control"}),
    "kv_transfer": frozenset({"kv_transfer"}),
}


def build_context(
    capture: Capture,
    store: Store,
    slos: Iterable[SloResult],
    windows: Windows,
    decomposition: Decomposition | None = None,
    attribution: Mapping[str, Mapping[str, float]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> DiagnosisContext:
    """Read the capture's signals once and bundle them with the analysis results."""
    return DiagnosisContext(
        slos=tuple(slos),
        windows=windows,
        signals=gather(store, windows.incident, windows.baseline),
        decomposition=decomposition,
        attribution=dict(attribution or {}),
        capture=capture,
        store=store,
        extra=dict(extra or {}),
    )


def diagnose(ctx: DiagnosisContext, rules: Iterable[Rule] | None = None) -> tuple[Finding, ...]:
    """Findings of every rule, plus ``insufficient_telemetry`` gaps, ranked."""
    if not ctx.breached() and not _engine_side(ctx):
        return ()
    found: list[Finding] = []
    for rule in rules if rules is not None else registered():
        found.extend(f for f in rule.evaluate(ctx) if f.confidence >= T.MIN_CONFIDENCE)
    found.extend(_gaps(ctx, found))
    return rank(ctx, _credit_capacity(found))


#: causes that leave the fleet short of replicas (late, slow to start, replaced)
_CAPACITY_CAUSES = frozenset({"scaling_lag", "cold_start", "rollout"})


def _credit_capacity(found: list[Finding]) -> list[Finding]:
    """A full KV cache that the rule itself calls load-driven (more requests per replica, none
    heavier: ``rules_engine.LOAD_DRIVEN``) is how a replica shortfall shows inside the engine.
    Beside a capacity cause, that cause explains what the cache's queue explains: its impact
    is raised to the KV finding's, so a symptom with its larger stage share does not rank
    above the shortfall that made it (issue 14: rank by what explains the excess)."""
    kv = [
        f
        for f in found
        if f.category == "kv_cache_pressure" and any(e.signal == LOAD_DRIVEN for e in f.evidence)
    ]
    if not kv:
        return found
    symptom = max(kv, key=lambda f: f.impact)
    out = []
    for f in found:
        if f.category in _CAPACITY_CAUSES and f.impact < symptom.impact:
            note = Evidence(
                "kv_cache_pressure.load_driven",
                True,
                f"the KV cache filled because replicas were short ({ms(symptom.impact)} of the "
                f"tail waits on it, requests no heavier than in the baseline): that wait is "
                f"this shortfall's",
                source="derived",
            )
            f = replace(f, impact=symptom.impact, evidence=(*f.evidence, note))
        out.append(f)
    return out


def _engine_side(ctx: DiagnosisContext) -> bool:
    """Percentiles from engine histograms only: a breach before the engine cannot show in them,
    so the rules still run (Kubernetes signals, the telemetry to add)."""
    return bool(ctx.slos) and all(s.source == "engine_histograms" for s in ctx.slos)


def rank(ctx: DiagnosisContext, findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Best first, by the share of the percentile's excess each explains (``ranking``)."""
    return ranking.rank(ctx, findings)


def _gaps(ctx: DiagnosisContext, found: list[Finding]) -> list[Finding]:
    out: list[Finding] = []
    d = ctx.decomposition
    stage_slos = ctx.breached("ttft", "e2e")
    if stage_slos and d is None:
        out.append(
            Finding(
                category="insufficient_telemetry",
                stage=None,
                confidence=T.GAP_NO_TRACES,
                summary=(
                    f"{stage_slos[0].spec} is breached but no request has stage timings; add "
                    f"traces through the gateway and the engine to locate the time."
                ),
                next_steps=(
                    "export OTLP traces from the ingress gateway (Envoy/Istio tracing)",
                    "enable vLLM tracing (--otlp-traces-endpoint) for queue/prefill/decode",
                ),
                impact=max((stage_slos[0].observed or 0.0) - stage_slos[0].spec.threshold, 0.0),
                metric=stage_slos[0].spec.metric,
                rule="gaps",
            )
        )
    if d is not None:
        for sv in d.stages:
            if not ctx.stage_matters(sv.stage, share=T.GAP_SHARE_MIN):
                continue
            explained = _EXPLAINS.get(sv.stage, frozenset())
            if any(f.category in explained for f in found):
                continue
            out.append(_gap_finding(ctx, sv.stage))
    itl = ctx.breached("itl", "tpot")
    itl_cats = _EXPLAINS["decode"]
    if itl and not any(f.category in itl_cats for f in found):
        slo = itl[0]
        out.append(
            Finding(
                category="insufficient_telemetry",
                stage="decode",
                confidence=T.GAP_NO_GPU_COUNTERS,
                summary=(
                    f"{slo.spec} is breached ({ms(slo.observed)}) but the GPU counters that tell "
                    f"memory-bound decode from tensor-parallel overhead or prefill interference "
                    f"are missing."
                ),
                evidence=(
                    Evidence(
                        f"slo.{slo.spec.metric}",
                        None if slo.observed is None else round(slo.observed * 1000, 2),
                        f"observed {ms(slo.observed)} against {ms(slo.spec.threshold)}",
                        source="derived",
                    ),
                ),
                next_steps=_TELEMETRY_FOR_STAGE["decode"],
                impact=max((slo.observed or 0.0) - slo.spec.threshold, 0.0),
                metric=slo.spec.metric,
                rule="gaps",
            )
        )
    return out


def _gap_finding(ctx: DiagnosisContext, stage: str) -> Finding:
    needed = _TELEMETRY_FOR_STAGE.get(stage, ("spans for this stage",))
    return Finding(
        category="insufficient_telemetry",
        stage=as_stage(stage),
        confidence=round(min(T.GAP_STAGE_BASE + ctx.stage_share(stage), T.GAP_STAGE_MAX), 3),
        summary=(
            f"{ms(ctx.stage_seconds(stage))} of the tail is in {stage}, but the capture lacks the "
            f"signals that tell its causes apart; add {needed[0]}."
        ),
        evidence=stage_evidence(ctx, stage),
        next_steps=needed,
        impact=ctx.stage_explained(stage),
        metric=ctx.decomposition.metric if ctx.decomposition else None,
        rule="gaps",
    )
