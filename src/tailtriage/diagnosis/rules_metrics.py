"""Rules for captures without traces: what the engine histograms and Kubernetes can decide.

Without request spans the percentiles are engine-side (``SloResult.source ==
"engine_histograms"``): the engine's own clock starts when the request reaches it, so time in
the gateway, waiting for pods and on the network is invisible.  Two rules handle that:

* :class:`CapacityBeforeEngine` - the engine is healthy or only part of the story, yet
  Kubernetes shows capacity arriving late (HPA desired above current, a CPU-scaled HPA, slow
  scale-up decisions, pods needing minutes to start): ``scaling_lag`` or ``cold_start`` from
  the metrics and events alone.  Its impact is unknown (no span measures the wait), so it
  ranks by confidence.
* :class:`TracesMissing` - ``insufficient_telemetry`` naming the exact span sources to turn
  on and what each would add.  A cause that needs gateway evidence is never guessed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.envoy import PENDING_METRICS, EnvoyPool, envoy_pool
from tailtriage.diagnosis.facts import desired_gap, replicas_short
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rule import combine, finding, ms, register
from tailtriage.diagnosis.rules_capacity import (
    load_aware,
    never_scaled,
    reaction_delay,
    replica_growth,
    scale_ups,
)
from tailtriage.model.vocabulary import Category

ENGINE_HISTOGRAMS: Final = "engine_histograms"

#: the span sources that would measure what the engine histograms cannot, and what each adds
SPAN_SOURCES: Final[tuple[str, ...]] = (
    "gateway spans: Envoy/Istio tracing to OTLP (Istio Telemetry API `tracing: "
    "[{providers: [{name: otel}]}]`, Envoy `tracing.provider: "
    "envoy.tracers.opentelemetry`) - measures ingress, gateway queue and pending time",
    "engine spans: `vllm serve --otlp-traces-endpoint http://<collector>:4317` "
    "(`--collect-detailed-traces all` for the model phases); SGLang `--enable-trace "
    "--otlp-traces-endpoint <collector>:4317` - per-request queue / prefill / decode",
    "router spans: llm-d EPP / Gateway API Inference Extension tracing (`llm_d.epp.*` spans), "
    "Dynamo frontend OTLP - measures routing and the prefill-to-decode KV transfer",
)


def engine_side_only(ctx: DiagnosisContext) -> bool:
    """The percentiles come from the engine histograms: nothing before the engine is seen."""
    d = ctx.decomposition
    if d is not None and d.source == ENGINE_HISTOGRAMS:
        return True
    return bool(ctx.slos) and all(s.source == ENGINE_HISTOGRAMS for s in ctx.slos)


def engine_flat(ctx: DiagnosisContext) -> str | None:
    """Why the engine-side percentile shows no incident, or None when it shows one: the
    detection found no calmer baseline (the engine's percentile is the same all capture
    long), or the incident's percentile and each of its stages grew by less than
    ``ENGINE_FLAT_GROWTH`` of the baseline's percentile."""
    d = ctx.decomposition
    if d is None or d.source != ENGINE_HISTOGRAMS:
        return None
    if ctx.windows.baseline is None or d.baseline_total is None:
        return "no calmer period in the capture to compare with"
    margin = T.ENGINE_FLAT_GROWTH * d.baseline_total
    grown = [
        s.stage
        for s in d.stages
        if s.baseline_seconds is not None and s.seconds - s.baseline_seconds > margin
    ]
    if d.total <= d.baseline_total + margin and not grown:
        return f"{ms(d.total)} against {ms(d.baseline_total)} before, no stage grew"
    return None


def _startup_longest(ctx: DiagnosisContext) -> tuple[float, float]:
    """(longest pending, longest cold start) of pods around the incident, seconds."""
    sig = ctx.signals
    pend = [
        e.duration for e in sig.events_of("pod_pending", lead=T.METRICS_LOOKBACK_S) if e.duration
    ]
    cold = [
        e.duration for e in sig.events_of("cold_start", lead=T.METRICS_LOOKBACK_S) if e.duration
    ]
    return max(pend, default=0.0), max(cold, default=0.0)


def backlog_excess(ctx: DiagnosisContext) -> float:
    """What a backlog landing on the engines explains of their percentile: the queue's growth,
    and the prefill's too when prompts did not grow (the steps got slower because each one
    packs more of the waiting prompts, not because prompts got longer)."""
    inc, base = ctx.signals.incident, ctx.signals.baseline
    grew = (
        base is not None
        and bool(inc.prompt_tokens_mean)
        and bool(base.prompt_tokens_mean)
        and (inc.prompt_tokens_mean or 0.0) >= T.PROMPT_SHIFT * (base.prompt_tokens_mean or 1.0)
    )
    return ctx.stage_excess("engine_queue") if grew else ctx.stage_excess("engine_queue", "prefill")


def _engine_explains(ctx: DiagnosisContext) -> bool:
    """The engine-side percentile itself breaches the SLO."""
    return bool(ctx.breached("ttft", "e2e"))


@dataclass(frozen=True)
class CapacityBeforeEngine:
    """Capacity arrived late, shown by Kubernetes alone (metrics-only captures)."""

    name: str = "metrics_capacity"
    category: Category = "scaling_lag"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not engine_side_only(ctx):
            return ()
        sig = ctx.signals
        ev: list[Evidence] = []
        lag: list[float] = []
        blind = [m for m in sig.hpa_metrics if not load_aware(m)]
        if sig.hpa_metrics and len(blind) == len(sig.hpa_metrics):
            lag.append(T.WM_HPA_BLIND)
            ev.append(
                Evidence(
                    "hpa.target_metric",
                    ", ".join(sig.hpa_metrics),
                    "the HPA scales on a metric that does not follow the engine's load",
                    source="metric",
                )
            )
        delay = reaction_delay(sig)
        if delay is not None and delay >= T.LATE_SCALE_UP_S:
            lag.append(T.WM_LATE_OR_SHORT)
            ev.append(
                Evidence(
                    "hpa.first_scale_up_delay_s",
                    round(delay, 1),
                    f"first scale-up decision {delay:.0f} s after the breach began",
                    source="event",
                    threshold=T.LATE_SCALE_UP_S,
                )
            )
        gap = desired_gap(sig)
        if gap is not None and replicas_short(sig):
            lag.append(T.WM_LATE_OR_SHORT)
            ev.append(
                Evidence(
                    "hpa.desired_minus_current",
                    round(gap, 2),
                    "desired replicas stayed above current replicas (pods not ready yet)",
                    source="metric",
                    threshold=0.0,
                )
            )
        growth = replica_growth(sig)
        if growth is not None and growth[1] > growth[0]:
            lag.append(T.WM_REPLICAS_GROWING)
            ev.append(
                Evidence(
                    "hpa.current_replicas",
                    f"{growth[0]:g} -> {growth[1]:g}",
                    "replicas were being added during the incident",
                    source="metric",
                )
            )
        still = never_scaled(sig)
        if still is not None and not blind:
            lag.append(T.WM_NEVER_SCALED)
            ev.append(
                Evidence(
                    "hpa.current_replicas",
                    still,
                    f"the HPA stayed at {still:g} replicas (below its maximum) while the "
                    f"engines' request rate rose against the baseline",
                    source="metric",
                )
            )
        pend, cold = _startup_longest(ctx)
        cold_ev = [w for w in (T.WM_SLOW_START if cold >= T.COLD_START_SLOW_S else 0.0,
                               T.WM_SLOW_PENDING if pend >= T.COLD_START_SLOW_S else 0.0) if w]  # fmt: skip
        nodes = sig.events_of("failed_scheduling", "node_scale_up", lead=T.METRICS_LOOKBACK_S)
        if nodes:
            cold_ev.append(T.WM_NODE_WAIT)
            ev.append(
                Evidence(
                    "FailedScheduling",
                    len(nodes),
                    "new pods waited for a GPU node (cluster autoscaler provisioning)",
                    source="event",
                )
            )
        if not lag and not cold_ev:
            return ()
        cold_start = bool(cold_ev) and (
            delay is None or cold + pend > T.STARTUP_OVER_DECISION * max(delay, 1.0)
        )
        if cold > 0 or pend > 0:
            ev.append(
                Evidence(
                    "pod.cold_start_s",
                    round(cold, 1),
                    f"new pods took {cold:.0f} s from scheduled to ready after {pend:.0f} s "
                    f"pending",
                    source="event",
                    threshold=T.COLD_START_SLOW_S,
                )
            )
        conf = combine(*lag, *(cold_ev if cold_start else ()))
        # the engine's own breach is the backlog landing on pods that just became ready, or
        # on the too few pods the autoscaler kept: what it shows is this finding's share
        landed = sig.events_of("pod_ready", lead=T.METRICS_LOOKBACK_S)
        impact = backlog_excess(ctx) if _engine_explains(ctx) and (landed or lag) else 0.0
        seen = ", ".join(f"{s.spec}: {ms(s.observed)} engine-side" for s in ctx.slos[:1])
        what = (
            f"new pods needed {cold:.0f} s to start (image pull, weight load)"
            if cold_start
            else "the autoscaler added replicas late"
        )
        found = finding(
            self,
            ctx,
            stage="pending",
            confidence=conf,
            summary=(
                f"Capacity arrived late ({what}); requests waited before reaching an "
                f"engine, which the engine histograms cannot measure ({seen}). Gateway "
                f"spans would show how long."
            ),
            evidence=ev,
            impact=impact,
            next_steps=SPAN_SOURCES[:1],
        )
        # start-up, not the decision, dominated: the same evidence names cold start
        return (dataclasses.replace(found, category="cold_start") if cold_start else found,)


@dataclass(frozen=True)
class RolloutBeforeEngine:
    """Replicas were replaced (a rollout) while traffic was served, shown by Kubernetes alone
    (metrics-only captures): requests wait for the replacement pods before any engine."""

    name: str = "metrics_rollout"
    category: Category = "rollout"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not engine_side_only(ctx):
            return ()
        sig = ctx.signals
        rolls = sig.events_of("rollout", lead=T.METRICS_LOOKBACK_S)
        kills = sig.events_of("pod_killing", lead=T.METRICS_LOOKBACK_S)
        ups = scale_ups(sig)
        if not rolls and not (kills and not ups):
            return ()  # pods killed while the autoscaler grew the fleet: scale churn, not this
        weights = [
            T.WM_ROLLOUT if rolls else T.WM_KILLS_ONLY,
            T.WM_KILLS if kills else 0.0,
            0.0 if ups else T.WM_NO_SCALE_UP,
        ]
        first = min(e.time for e in (*rolls, *kills))
        ev = [
            Evidence(
                "Deployment rollout",
                len(rolls) + len(kills),
                f"{len(rolls)} rollout step(s) and {len(kills)} pod termination(s) without a "
                f"scale-up, the first {first - sig.incident.start:+.0f} s from the incident start",
                source="event",
            )
        ]
        impact = backlog_excess(ctx) if _engine_explains(ctx) else 0.0
        return (
            finding(
                self,
                ctx,
                stage="pending",
                confidence=combine(*weights),
                summary=(
                    "A rolling update replaced replicas while traffic was served; requests "
                    "waited for the new pods before any engine, which the engine histograms "
                    "cannot measure. Gateway spans would show how long."
                ),
                evidence=ev,
                impact=impact,
                next_steps=SPAN_SOURCES[:1],
            ),
        )


@dataclass(frozen=True)
class TracesMissing:
    """``insufficient_telemetry``: the capture has engine histograms but no traces."""

    name: str = "metrics_traces_missing"
    category: Category = "insufficient_telemetry"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not engine_side_only(ctx):
            return ()
        slo = ctx.slo("ttft", "e2e") or ctx.primary
        if slo is None:
            return ()
        observed = ms(slo.observed)
        if slo.spec.metric in ("itl", "tpot"):
            summary = (
                f"{slo.spec} is read from the engine's histogram ({observed}); without traces "
                f"or token times no request can be followed: engine spans (or `tailtriage "
                f"bench` token times) would show which requests stall and when."
            )
            conf = T.TRACES_MISSING_TOKEN_METRIC
        elif slo.breached and (flat := engine_flat(ctx)) is not None:
            summary = (
                f"{slo.spec} is breached engine-side ({observed}), but the engine's own "
                f"percentile did not rise during the incident ({flat}): what changed is not in "
                f"the engine histograms. The time users see before the engine (gateway, pending "
                f"capacity, network) is not measured; turn on gateway spans to see it."
            )
            conf = T.ENGINE_FLAT_CONFIDENCE
        elif slo.breached:
            summary = (
                f"{slo.spec} is breached engine-side ({observed}), and the capture has no traces: "
                f"the time users see before the engine (gateway, pending capacity, network) is "
                f"not measured; turn on gateway and engine spans to see it."
            )
            conf = T.TRACES_MISSING_BREACHED
        else:
            summary = (
                f"The engine-side {slo.spec.metric} p{slo.spec.percentile:g} is {observed}, "
                f"within {ms(slo.spec.threshold)}: if users see a breach, the time goes before "
                f"the engine (gateway, pending capacity, network), which only traces measure."
            )
            conf = T.TRACES_MISSING_WITHIN
        # the engine did not change: all of the tail is before it (decided before the pool
        # check, which may raise the confidence to the same value)
        unchanged = conf == T.ENGINE_FLAT_CONFIDENCE
        pool = envoy_pool(ctx) if slo.spec.metric in ("ttft", "e2e") else None
        queued = pool is not None and pool.limited
        if pool is not None and queued:
            summary += (
                " Envoy's own gauges show its upstream connection pool queueing requests in "
                "the incident: the wait before the engine is likely there."
            )
            conf = max(conf, T.TRACES_MISSING_POOL_QUEUED)
        return (
            finding(
                self,
                ctx,
                stage=None,
                confidence=conf,
                summary=summary,
                evidence=(
                    Evidence(
                        f"slo.{slo.spec.metric}.engine_side",
                        None if slo.observed is None else round(slo.observed * 1000, 1),
                        slo.definition,
                        source="metric",
                        threshold=round(slo.spec.threshold * 1000, 1),
                    ),
                    *(_pool_evidence(pool) if pool is not None and queued else ()),
                ),
                impact=(d.total if (d := ctx.decomposition) is not None else 0.0)
                if unchanged
                else _pool_wait(pool)
                if pool is not None and queued
                else 0.0,
                metric=slo.spec.metric,
                next_steps=SPAN_SOURCES,
            ),
        )


def _pool_evidence(pool: EnvoyPool) -> tuple[Evidence, ...]:
    """What Envoy's pending-queue gauge shows, for the traces-missing finding (without traces
    there are no gateway spans, so no ``UO`` flags: the gauge is the evidence)."""
    if pool.pending_peak is None:
        return ()
    base = pool.baseline_pending_peak
    return (
        Evidence(
            PENDING_METRICS[0],
            pool.pending_peak,
            f"requests pending in Envoy's upstream pool: at most {pool.pending_peak:g} in the "
            f"incident's scrapes" + ("" if base is None else f", {base:g} in the baseline's"),
            source="metric",
            threshold=T.ENVOY_PENDING_MIN,
        ),
    )


def _pool_wait(pool: EnvoyPool) -> float:
    """The mean pool wait's growth (Little's law on the pending gauge), when it grew."""
    return max(pool.pool_wait_growth or 0.0, 0.0)


register(CapacityBeforeEngine())
register(RolloutBeforeEngine())
register(TracesMissing())
