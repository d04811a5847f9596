"""Compute saturation (TTFT tree): the replicas that exist are used up.  Replicas are only ever
the answer to it, and only when :func:`saturation_proof` holds; the engine discriminators
(``diagnosis.engine_limits``) tell it from a full KV cache next to it."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.diagnosis import engine_limits as E
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.facts import completions_lag, queue_grew
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.imbalance import imbalance
from tailtriage.diagnosis.rule import combine, finding, gauge_evidence, ms, register, stage_evidence
from tailtriage.diagnosis.rules_capacity import capacity_coming, load_aware, never_scaled
from tailtriage.model.vocabulary import Category


@dataclass(frozen=True)
class SaturationProof:
    """Why compute saturation is (or is not) proven; replicas are recommended only if so."""

    proven: bool
    reasons: tuple[str, ...]
    missing: tuple[str, ...]


def saturation_proof(ctx: DiagnosisContext) -> SaturationProof:
    """GPU busy, throughput flat while the queue grows, no scaling lag and no imbalance."""
    sig = ctx.signals
    inc = sig.incident
    reasons: list[str] = []
    missing: list[str] = []
    ok = True
    busy = inc.gauge("gpu_busy")
    if busy is None:
        ok = False
        missing.append("DCGM_FI_PROF_SM_ACTIVE (GPU busy)")
    elif busy.mean >= T.GPU_BUSY:
        reasons.append(f"GPU busy {busy.mean:.0%} on average")
    else:
        ok = False
        reasons.append(f"GPU only {busy.mean:.0%} busy")
    q = inc.gauge("queue_waiting")
    if q is None:
        ok = False
        missing.append("vllm:num_requests_waiting (engine queue)")
    elif queue_grew(q, T.SATURATION_QUEUE_MEAN):
        reasons.append(f"engine queue {q.first:.0f} -> {q.last:.0f}")
    else:
        ok = False
        reasons.append("engine queue did not grow")
    # a growing queue is arrivals outpacing completions (Little): the backlog's growth rate
    backlog = q.slope if q is not None else 0.0
    if (completions_lag(inc) or backlog >= T.BACKLOG_GROWTH_SHARE * inc.arrival_rps) or (
        sig.baseline is not None
        and inc.completion_rps <= T.FLAT_COMPLETIONS * sig.baseline.completion_rps
        and inc.arrival_rps > T.ARRIVALS_GREW * sig.baseline.arrival_rps
    ):
        reasons.append(
            f"throughput flat: {inc.completion_rps:.2f} req/s done for "
            f"{inc.arrival_rps:.2f} req/s arriving"
        )
    else:
        ok = False
        reasons.append("throughput kept up with arrivals")
    if capacity_coming(sig):
        ok = False
        reasons.append("the autoscaler was still adding replicas (scaling lag, not saturation)")
    if sig.hpa_metrics and not all(load_aware(m) for m in sig.hpa_metrics):
        ok = False
        reasons.append("the HPA scales on a load-blind metric")
    if never_scaled(sig) is not None:
        ok = False
        reasons.append("the HPA never scaled although below its maximum (scaling lag)")
    if imbalance(ctx).proven:
        ok = False
        reasons.append("load is unevenly spread over replicas")
    limit = E.kv_limit(sig)
    if limit is not None:
        ok = False
        reasons.append(limit.reason)
    return SaturationProof(ok, tuple(reasons), tuple(missing))


@dataclass(frozen=True)
class ComputeSaturation:
    """The replicas that exist are used up: GPUs busy, completions flat, the queue grows."""

    name: str = "compute_saturation"
    category: Category = "compute_saturation"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not ctx.stage_matters("engine_queue") and not ctx.stage_matters("prefill"):
            return ()
        sig = ctx.signals
        proof = saturation_proof(ctx)
        busy = sig.incident.gauge("gpu_busy")
        q = sig.incident.gauge("queue_waiting")
        weights = []
        ev = list(stage_evidence(ctx, "engine_queue", "prefill"))
        if busy is not None and busy.mean >= T.GPU_NEARLY_BUSY:
            weights.append(T.W_GPU_BUSY if busy.mean >= T.GPU_BUSY else T.W_GPU_NEARLY_BUSY)
            ev.append(gauge_evidence(busy, "GPUs busy", threshold=T.GPU_BUSY))
        if q is not None and queue_grew(q, T.SATURATION_QUEUE_MEAN):
            weights.append(T.W_SATURATION_QUEUE)
            ev.append(gauge_evidence(q, "engine queue grows"))
        running = sig.incident.gauge("running")
        base_running = sig.baseline.gauge("running") if sig.baseline else None
        growth = (
            running.mean / max(base_running.mean, 1e-9)
            if running is not None and base_running is not None
            else 1.0
        )
        if running is not None and growth >= T.RUNNING_GROWTH:
            # more sequences share every step, so every step (and every wait) is longer
            weights.append(T.W_RUNNING_GREW)
            ev.append(gauge_evidence(running, f"running batch {growth:.1f}x the baseline's"))
        if completions_lag(sig.incident):
            weights.append(T.W_COMPLETIONS_LAG)
        if E.compute_bound(sig):
            weights.append(T.W_BATCH_AT_CAP)
            ev.append(
                Evidence(
                    "engine.running_batch_at_cap",
                    True,
                    "the running batch stayed pinned at its maximum with the GPUs busy: the "
                    "engine admits no more work per step",
                    source="metric",
                )
            )
        ev.append(
            Evidence(
                "throughput.completions_per_s",
                round(sig.incident.completion_rps, 3),
                f"{sig.incident.completion_rps:.2f} req/s completed while "
                f"{sig.incident.arrival_rps:.2f} req/s arrived",
                source="span",
                threshold=round(sig.incident.arrival_rps, 3),
            )
        )
        if not weights:
            return ()  # no sign capacity was on its way, nor an autoscaler blind to the load
        q = sig.incident.gauge("queue_waiting")
        if q is not None and queue_grew(q, T.CAPACITY_QUEUE_MEAN):
            weights.append(T.W_QUEUE_GREW)
            ev.append(gauge_evidence(q, "engine queue grew while capacity lagged"))
        conf = combine(*weights) * (1.0 if proof.proven else T.UNPROVEN_SATURATION)
        # capacity on its way (a late decision, replicas short, pods still loading): the capacity
        # rules claim QUEUE_CAPACITY_SHARE of the queue (capacity_wait); saturation the rest
        queue_share = 1.0 - T.QUEUE_CAPACITY_SHARE if capacity_coming(sig) else 1.0
        if E.kv_bound(sig):
            conf *= T.KV_BOUND_SATURATION  # a full, preempting cache with idle compute
        verdict = "saturation proven" if proof.proven else "saturation not proven"
        ev.append(Evidence("guardrail.saturation_proven", proof.proven, "; ".join(proof.reasons)))
        return (
            finding(
                self,
                ctx,
                stage="engine_queue",
                confidence=conf,
                summary=(
                    f"Engine compute is the limit ({verdict}): "
                    f"{ms(ctx.stage_seconds('engine_queue'))} of the tail queues in the engine."
                ),
                evidence=ev,
                impact=queue_share * ctx.stage_explained("engine_queue"),
                next_steps=tuple(f"export {m}" for m in proof.missing),
            ),
        )


register(ComputeSaturation())
