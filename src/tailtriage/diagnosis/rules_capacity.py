"""Capacity rules (TTFT tree): scaling lag, cold start, rollout, compute saturation.

They separate *when* capacity arrived (the autoscaler's decision, the pods' start-up, a rolling
update) from *whether* the capacity that exists is used up (compute saturation).  Replicas are
only ever the answer to the latter, and only when :func:`saturation_proof` holds."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.imbalance import imbalance
from tailtriage.diagnosis.rule import (
    combine,
    finding,
    gauge_evidence,
    ms,
    register,
    stage_evidence,
)
from tailtriage.diagnosis.signals import EventRecord, Signals

#: substrings of HPA metric names that follow the load of an LLM engine
_LOAD_AWARE = (
    "waiting",
    "queue",
    "kv_cache",
    "cache_usage",
    "running",
    "pending",
    "concurrency",
    "requests",
    "token",
)


def load_aware(metric: str) -> bool:
    m = metric.lower()
    return any(k in m for k in _LOAD_AWARE) and "cpu" not in m and "memory" not in m


def _scale_ups(sig: Signals) -> tuple[EventRecord, ...]:
    """Rescale events that grew the deployment (size above the previous size)."""
    out = []
    last: int | None = None
    for e in sig.events:
        if e.kind != "hpa_rescale" or e.replicas is None:
            continue
        if last is None or e.replicas > last:
            out.append(e)
        last = e.replicas
    lo, hi = sig.incident.start - 120.0, sig.incident.end
    return tuple(e for e in out if lo <= e.time <= hi)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _startup_seconds(sig: Signals) -> tuple[float, float]:
    """(mean pod pending, mean cold start) of pods starting around the incident.

    Pod conditions give both when the pod still exists at export; pods already gone still
    show creation-to-first-token, which is the whole start-up (pending included)."""
    pend = [e.duration for e in sig.events_of("pod_pending") if e.duration is not None]
    cold = [e.duration for e in sig.events_of("cold_start") if e.duration is not None]
    whole = [s for _, _, s in sig.startups]
    if whole and _mean(whole) > _mean(pend) + _mean(cold):
        return _mean(pend), _mean(whole) - _mean(pend)
    return _mean(pend), _mean(cold)


def _reaction_delay(sig: Signals) -> float | None:
    """Seconds from the start of the incident to the first scale-up decision."""
    ups = [e for e in _scale_ups(sig) if e.time >= sig.incident.start - 5.0]
    if not ups:
        return None
    return max(ups[0].time - sig.incident.start, 0.0)


def _replica_growth(sig: Signals) -> tuple[float, float] | None:
    g = sig.incident.gauge("hpa_current")
    return None if g is None else (g.first, g.last)


def _capacity_stages(ctx: DiagnosisContext) -> tuple[str, ...]:
    return tuple(s for s in ("pending", "engine_queue") if ctx.stage_matters(s))


@dataclass(frozen=True)
class ScalingLag:
    """The autoscaler added capacity late: it scales on a metric blind to the engine's load
    (CPU of a GPU server), or its decision arrived long after the queue started to grow."""

    name: str = "scaling_lag"
    category: str = "scaling_lag"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        stages = _capacity_stages(ctx)
        if not stages:
            return ()
        ev: list[Evidence] = list(stage_evidence(ctx, *stages))
        weights: list[float] = []
        blind = [m for m in sig.hpa_metrics if not load_aware(m)]
        if sig.hpa_metrics and blind and len(blind) == len(sig.hpa_metrics):
            weights.append(0.6)
            ev.append(
                Evidence(
                    "hpa.target_metric",
                    ", ".join(sig.hpa_metrics),
                    "the HPA scales on a metric that does not follow the engine's load "
                    "(a GPU server's CPU stays low while requests queue)",
                    source="metric",
                )
            )
        delay = _reaction_delay(sig)
        growth = _replica_growth(sig)
        if delay is not None and delay >= 30.0:
            weights.append(0.35 if delay < 60 else 0.5)
            ev.append(
                Evidence(
                    "hpa.first_scale_up_delay_s",
                    round(delay, 1),
                    f"first scale-up decision {delay:.0f} s after the incident began",
                    source="event",
                    threshold=30.0,
                )
            )
        if growth is not None and growth[1] > growth[0]:
            weights.append(0.25)
            ev.append(
                Evidence(
                    "hpa.current_replicas",
                    f"{growth[0]:g} -> {growth[1]:g}",
                    "replicas were still being added during the incident",
                    source="metric",
                )
            )
        gap = _desired_gap(sig)
        if gap is not None and gap >= 0.5:
            weights.append(0.3)
            ev.append(
                Evidence(
                    "hpa.desired_minus_current",
                    round(gap, 2),
                    "desired replicas stayed above current replicas (pods not ready yet)",
                    source="metric",
                    threshold=0.0,
                )
            )
        q = sig.incident.gauge("queue_waiting")
        if q is not None and (q.slope > 0 or q.mean >= 2):
            weights.append(0.15)
            ev.append(gauge_evidence(q, "engine queue grew while capacity lagged"))
        still = _never_scaled(sig)
        if still is not None and not blind:
            weights.append(0.5)
            ev.append(
                Evidence(
                    "hpa.current_replicas",
                    still,
                    f"the HPA stayed at {still:g} replicas (below its maximum) while requests "
                    f"waited for capacity and load rose: its metric does not see the load",
                    source="metric",
                )
            )
        if not weights:
            return ()
        _pend, cold = _startup_seconds(sig)
        conf = combine(*weights)
        if cold > 0 and delay is not None and cold > 3 * max(delay, 1.0) and not blind:
            conf *= 0.5  # start-up, not the decision, dominated: the cold-start rule says so
        impact = ctx.stage_excess("pending") + 0.5 * ctx.stage_excess("engine_queue")
        if sig.hpa_metrics:
            how = f"the HPA scales on {', '.join(sig.hpa_metrics)}"
        elif still is not None:
            how = f"the HPA stayed at {still:g} replicas while load rose"
        else:
            how = "the autoscaler added replicas late"
        when = f"; first scale-up {delay:.0f} s after the breach began" if delay else ""
        summary = (
            f"Capacity arrived late: {ms(ctx.stage_seconds(*stages))} of the tail waits for "
            f"replicas ({' + '.join(stages)}); {how}{when}."
        )
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=conf,
                summary=summary,
                evidence=ev,
                impact=impact,
            ),
        )


def _never_scaled(sig: Signals) -> float | None:
    """Replicas when the HPA never moved during the incident although below its maximum and
    the load grew against the baseline; else None."""
    cur, top = sig.incident.gauge("hpa_current"), sig.incident.gauge("hpa_max")
    if cur is None or _scale_ups(sig) or cur.max != cur.first:
        return None
    if top is not None and cur.max >= top.max:
        return None  # pinned at its ceiling: saturation, not lag
    base = sig.baseline
    if base is not None and sig.incident.arrival_rps < 1.2 * base.arrival_rps:
        return None
    return cur.first


def _desired_gap(sig: Signals) -> float | None:
    d, c = sig.incident.gauge("hpa_desired"), sig.incident.gauge("hpa_current")
    if d is None or c is None:
        return None
    return d.mean - c.mean


@dataclass(frozen=True)
class ColdStart:
    """New replicas take long to become ready: image pull, weight loading, warm-up."""

    name: str = "cold_start"
    category: str = "cold_start"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        if not ctx.stage_matters("pending"):
            return ()
        pend, cold = _startup_seconds(sig)
        if cold <= 0 and pend <= 0:
            return ()
        delay = _reaction_delay(sig)
        ev = list(stage_evidence(ctx, "pending"))
        ev.append(
            Evidence(
                "pod.cold_start_s",
                round(cold, 1),
                f"pods took {cold:.0f} s from scheduled to ready (image pull, weight load, "
                f"warm-up); {pend:.0f} s pending before that",
                source="event",
                threshold=60.0,
            )
        )
        weights = [0.3 if cold >= 60 else 0.1]
        if delay is not None:
            ev.append(
                Evidence(
                    "hpa.first_scale_up_delay_s",
                    round(delay, 1),
                    f"the autoscaler decided within {delay:.0f} s; start-up took "
                    f"{cold + pend:.0f} s",
                    source="event",
                )
            )
            if cold + pend > 2 * max(delay, 1.0):
                weights.append(0.45)
        replicas = _replica_growth(sig)
        if replicas is not None and replicas[0] == 0:
            weights.append(0.4)
            ev.append(
                Evidence(
                    "hpa.current_replicas",
                    replicas[0],
                    "scaled from zero: every request waited for a cold replica",
                    source="metric",
                )
            )
        if sig.hpa_metrics and all(load_aware(m) for m in sig.hpa_metrics):
            weights.append(0.2)
        nodes = sig.events_of("failed_scheduling", "node_scale_up")
        if nodes:
            weights.append(0.25)
            ev.append(
                Evidence(
                    "FailedScheduling",
                    len(nodes),
                    "new pods waited for a GPU node (cluster autoscaler provisioning)",
                    source="event",
                )
            )
        return (
            finding(
                self,
                ctx,
                stage="pending",
                confidence=combine(*weights),
                summary=(
                    f"Cold starts: {ms(ctx.stage_seconds('pending'))} of the tail waits for new "
                    f"pods, which need {cold:.0f} s to load the model and warm up."
                ),
                evidence=ev,
                impact=ctx.stage_excess("pending"),
            ),
        )


@dataclass(frozen=True)
class Rollout:
    """A rolling update or model swap took serving capacity away during the breach."""

    name: str = "rollout"
    category: str = "rollout"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        stages = tuple(
            s for s in ("pending", "engine_queue", "gateway_queue") if ctx.stage_matters(s)
        )
        if not stages:
            return ()
        rolls = sig.events_of("rollout", lead=120.0)
        kills = sig.events_of("pod_killing", lead=60.0)
        ups = _scale_ups(sig)
        if not rolls and not kills:
            return ()
        weights = [0.5 if rolls else 0.25]
        if kills:
            weights.append(0.3)
        if not ups:
            weights.append(0.2)  # capacity changed without the autoscaler asking for it
        ev = list(stage_evidence(ctx, *stages))
        first = min(e.time for e in (*rolls, *kills))
        ev.append(
            Evidence(
                "Deployment rollout",
                len(rolls) + len(kills),
                f"{len(rolls)} rollout step(s) and {len(kills)} pod termination(s), the first "
                f"{first - sig.incident.start:+.0f} s from the start of the incident",
                source="event",
            )
        )
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=combine(*weights),
                summary=(
                    f"A rolling update aligned with the breach: replicas were replaced while "
                    f"traffic was served ({ms(ctx.stage_seconds(*stages))} of the tail in "
                    f"{' + '.join(stages)})."
                ),
                evidence=ev,
                impact=ctx.stage_excess(*stages),
            ),
        )


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
    elif busy.mean >= 0.8:
        reasons.append(f"GPU busy {busy.mean:.0%} on average")
    else:
        ok = False
        reasons.append(f"GPU only {busy.mean:.0%} busy")
    q = inc.gauge("queue_waiting")
    if q is None:
        ok = False
        missing.append("vllm:num_requests_waiting (engine queue)")
    elif q.slope > 0 or q.mean >= 4:
        reasons.append(f"engine queue {q.first:.0f} -> {q.last:.0f}")
    else:
        ok = False
        reasons.append("engine queue did not grow")
    # a growing queue is arrivals outpacing completions (Little): the backlog's growth rate
    backlog = q.slope if q is not None else 0.0
    if (inc.completion_rps < 0.97 * inc.arrival_rps or backlog >= 0.03 * inc.arrival_rps) or (
        sig.baseline is not None
        and inc.completion_rps <= 1.05 * sig.baseline.completion_rps
        and inc.arrival_rps > 1.1 * sig.baseline.arrival_rps
    ):
        reasons.append(
            f"throughput flat: {inc.completion_rps:.2f} req/s done for "
            f"{inc.arrival_rps:.2f} req/s arriving"
        )
    else:
        ok = False
        reasons.append("throughput kept up with arrivals")
    if _reaction_delay(sig) is not None or (_desired_gap(sig) or 0.0) >= 0.5:
        ok = False
        reasons.append("the autoscaler was still adding replicas (scaling lag, not saturation)")
    if sig.hpa_metrics and not all(load_aware(m) for m in sig.hpa_metrics):
        ok = False
        reasons.append("the HPA scales on a load-blind metric")
    if _never_scaled(sig) is not None:
        ok = False
        reasons.append("the HPA never scaled although below its maximum (scaling lag)")
    if imbalance(ctx).proven:
        ok = False
        reasons.append("load is unevenly spread over replicas")
    kv = inc.gauge("kv_usage")
    if kv is not None and kv.max >= 0.95 and (inc.counters.get("preemptions") or 0.0) > 0:
        ok = False
        reasons.append("the KV cache is full and preempting (memory, not compute, is the limit)")
    return SaturationProof(ok, tuple(reasons), tuple(missing))


@dataclass(frozen=True)
class ComputeSaturation:
    """The replicas that exist are used up: GPUs busy, completions flat, the queue grows."""

    name: str = "compute_saturation"
    category: str = "compute_saturation"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not ctx.stage_matters("engine_queue") and not ctx.stage_matters("prefill"):
            return ()
        sig = ctx.signals
        proof = saturation_proof(ctx)
        busy = sig.incident.gauge("gpu_busy")
        q = sig.incident.gauge("queue_waiting")
        weights = []
        ev = list(stage_evidence(ctx, "engine_queue", "prefill"))
        if busy is not None and busy.mean >= 0.75:
            weights.append(0.35 if busy.mean >= 0.8 else 0.2)
            ev.append(gauge_evidence(busy, "GPUs busy", threshold=0.8))
        if q is not None and (q.slope > 0 or q.mean >= 4):
            weights.append(0.25)
            ev.append(gauge_evidence(q, "engine queue grows"))
        running = sig.incident.gauge("running")
        base_running = sig.baseline.gauge("running") if sig.baseline else None
        growth = (
            running.mean / max(base_running.mean, 1e-9)
            if running is not None and base_running is not None
            else 1.0
        )
        if running is not None and growth >= 1.5:
            # more sequences share every step, so every step (and every wait) is longer
            weights.append(0.2)
            ev.append(gauge_evidence(running, f"running batch {growth:.1f}x the baseline's"))
        if sig.incident.completion_rps < 0.97 * sig.incident.arrival_rps:
            weights.append(0.2)
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
            return ()
        conf = combine(*weights) * (1.0 if proof.proven else 0.6)
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
                impact=ctx.stage_excess("engine_queue"),
                next_steps=tuple(f"export {m}" for m in proof.missing),
            ),
        )


for _rule in (ScalingLag(), ColdStart(), Rollout(), ComputeSaturation()):
    register(_rule)
