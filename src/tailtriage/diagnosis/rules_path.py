"""Rules for the request path in front of the engine (TTFT tree): ingress and TLS, gateway
concurrency limits, the API server, and uneven spreading of load over replicas."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.analyses.results import StageMove
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.envoy import EnvoyPool, envoy_pool
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.imbalance import Imbalance, imbalance
from tailtriage.diagnosis.rollout import rollout_evidence
from tailtriage.diagnosis.rule import combine, finding, gauge_evidence, ms, register, stage_evidence
from tailtriage.diagnosis.rules_capacity import (
    capacity_requested,
    load_aware,
    never_scaled,
    scaled_from_zero,
)
from tailtriage.model.vocabulary import Category


@dataclass(frozen=True)
class IngressNetwork:
    """Time in the edge proxy itself (TLS handshakes on fresh connections, slow network)."""

    name: str = "ingress_network"
    category: Category = "ingress_network"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        stages = tuple(
            s for s in ("client", "ingress") if ctx.stage_matters(s, share=T.EDGE_SHARE_MIN)
        )
        if not stages:
            return ()
        v = ctx.stage("ingress")
        grew = v is not None and v.delta is not None and v.delta > T.INGRESS_GREW_S
        conf = combine(
            T.W_EDGE,
            T.W_INGRESS_GREW if grew else 0.0,
            min(ctx.stage_share(*stages), T.W_EDGE_SHARE_MAX),
        )
        # the part of the ingress time that is Envoy's pending queue is the gateway's
        queued = envoy_pool(ctx).queue_fraction if "ingress" in stages else 0.0
        conf *= 1.0 - queued
        return (
            finding(
                self,
                ctx,
                stage=stages[-1],
                confidence=conf,
                summary=(
                    f"The edge is slow: {ms(ctx.stage_seconds(*stages))} of the tail is spent in "
                    f"{' + '.join(stages)} before the gateway forwards the request (TLS handshakes "
                    f"on new connections, or network)."
                ),
                evidence=stage_evidence(ctx, *stages),
                impact=ctx.stage_explained(*stages) - queued * ctx.stage_explained("ingress"),
                next_steps=(
                    "compare ingress time of requests on new vs reused connections "
                    "(Envoy downstream_cx / tls.resumed attributes)",
                ),
            ),
        )


@dataclass(frozen=True)
class GatewayQueue:
    """Requests wait for an upstream slot at a gateway/queue-proxy limit while engines idle."""

    name: str = "gateway_queue"
    category: Category = "gateway_queue"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        stages = [s for s in ("gateway_queue",) if ctx.stage_matters(s)]
        blind = bool(sig.hpa_metrics) and not all(load_aware(m) for m in sig.hpa_metrics)
        # no capacity coming - shown by the autoscaler's own desired and current replicas -
        # and no autoscaler that should have sent it (blind to the load, or idle below its
        # maximum while load rose): those are scaling lag
        shown = sig.incident.gauge("hpa_desired") is not None
        fixed = shown and not (
            capacity_requested(sig) or scaled_from_zero(sig) or blind or never_scaled(sig)
        )
        if ctx.stage_matters("pending") and fixed:
            # Knative's activator holds requests (throttler_try) while every pod is at its
            # containerConcurrency and no pod is coming: a queue, not a wait for capacity
            stages.append("pending")
        pool = envoy_pool(ctx) if ctx.stage_matters("ingress", share=T.EDGE_SHARE_MIN) else None
        in_envoy = pool is not None and pool.queue_fraction >= T.POOL_QUEUE_SHARE
        if in_envoy:
            stages.append("ingress")  # Envoy's pending queue for an upstream connection
        if not stages:
            return ()
        ev = list(stage_evidence(ctx, *stages))
        weights_pool = _pool_evidence(pool, ev) if in_envoy and pool is not None else 0.0
        weights = [T.W_GATEWAY_STAGE]
        gq = sig.incident.gauge("gateway_queue")
        if gq is not None:
            ev.append(gauge_evidence(gq, "requests queued at the gateway"))
            weights.append(T.W_GATEWAY_GAUGE)
        if "pending" in stages:
            weights.append(T.W_ACTIVATOR_HELD)
            ev.append(
                Evidence(
                    "autoscaler.capacity_requested",
                    False,
                    "no scale-up decision, no replicas added and desired = current: the "
                    "activator buffered requests for a fixed fleet's concurrency slots",
                    source="event",
                )
            )
        eq = sig.incident.gauge("queue_waiting")
        if eq is not None and eq.mean < T.WAITING_MIN:
            weights.append(T.W_ENGINE_QUEUES_EMPTY)
            ev.append(
                gauge_evidence(eq, "engine queues stayed almost empty", threshold=T.WAITING_MIN)
            )
        busy = sig.incident.gauge("gpu_busy")
        if busy is not None and busy.mean < T.GPU_IDLE:
            weights.append(T.W_GPU_HEADROOM)
            ev.append(gauge_evidence(busy, "GPUs had headroom", threshold=T.GPU_IDLE))
        conf = combine(*weights, weights_pool)
        if imbalance(ctx).proven:
            # per-replica limits hit by an uneven spread: imbalance explains it
            conf *= T.GATEWAY_KEEP_IMBALANCE
        roll = rollout_evidence(ctx)
        if roll.is_rollout or roll.rollout_kills:
            # capacity was being replaced: the rollout rule explains the queue
            conf *= T.GATEWAY_KEEP_ROLLOUT
        moves = _queue_moves(ctx, pool if in_envoy else None, "pending" in stages)
        return (
            finding(
                self,
                ctx,
                stage="gateway_queue" if moves else stages[0],
                confidence=conf,
                moves=moves,
                summary=(
                    f"Requests wait at the gateway's concurrency limit: "
                    f"{ms(ctx.stage_seconds(*stages))} of the tail, while the engines "
                    f"have room."
                ),
                evidence=ev,
                impact=ctx.stage_explained(*(s for s in stages if s != "ingress"))
                + (
                    pool.queue_fraction * ctx.stage_explained("ingress")
                    if in_envoy and pool
                    else 0.0
                ),
            ),
        )


def _queue_moves(
    ctx: DiagnosisContext, pool: EnvoyPool | None, activator: bool
) -> tuple[StageMove, ...]:
    """The band time a gateway queue proves its spans' rules named otherwise: the activator's
    ``throttler_try`` (``pending`` per span) on a fixed fleet, and Envoy's pool wait, the
    pool's share of the ingress stage's growth (``ingress`` per span without verbose
    events)."""
    moves: list[StageMove] = []
    held = ctx.stage("pending")
    if activator and held is not None:
        moves.append(
            StageMove(
                "pending",
                "gateway_queue",
                held.seconds,
                held.baseline or 0.0,
                "the activator held requests for a fixed fleet's concurrency slots",
            )
        )
    if pool is not None:
        moves.append(
            StageMove(
                "ingress",
                "gateway_queue",
                pool.queue_fraction * ctx.stage_excess("ingress"),
                0.0,
                f"{pool.queue_fraction:.0%} of its growth is Envoy's wait for an upstream "
                f"connection",
            )
        )
    return tuple(moves)


def _pool_evidence(pool: EnvoyPool, ev: list[Evidence]) -> float:
    """Evidence lines of an Envoy pool limit; returns its weight."""
    ev.append(
        Evidence(
            "response_flags=UO",
            pool.overflows,
            f"{pool.overflows} of {pool.spans} gateway spans overflowed the upstream pending "
            f"queue (circuit breaker: maxConnections / http1MaxPendingRequests)",
            source="span",
        )
    )
    if pool.appeared and (pool.pending or 0.0) < T.ENVOY_PENDING_MIN:
        ev.append(
            Evidence(
                "envoy.pending_appeared",
                pool.pending_peak,
                f"Envoy held up to {pool.pending_peak:.0f} request(s) pending for an upstream "
                f"connection in the incident's scrapes and none in the baseline's",
                source="metric",
                threshold=T.ENVOY_PENDING_MIN,
            )
        )
    growth_ms = (pool.pool_wait_growth or 0.0) * 1000
    how = (
        "last byte received -> first byte sent upstream"
        if pool.wait_source == "span_events"
        else "the mean pool wait (Little's law: Envoy's pending requests / requests per second)"
    )
    ev.append(
        Evidence(
            "envoy.pool_wait_growth_ms",
            round(growth_ms, 1),
            f"{how} grew by {growth_ms:.0f} ms: {pool.queue_fraction:.0%} of the ingress "
            f"time's growth is waiting for an upstream connection",
            source="span" if pool.wait_source == "span_events" else "metric",
            threshold=T.POOL_QUEUE_SHARE,
        )
    )
    return T.W_ENVOY_POOL


@dataclass(frozen=True)
class ApiServerOverhead:
    """The serving frontend's own time (tokenization, validation, a CPU-starved process)."""

    name: str = "api_server_overhead"
    category: Category = "api_server_overhead"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not ctx.stage_matters("api_server"):
            return ()
        sig = ctx.signals
        ev = list(stage_evidence(ctx, "api_server"))
        weights = [T.W_API_STAGE]
        cpu = sig.incident.rate("container_cpu")
        if cpu is not None:
            pods = max(len(sig.incident.replicas), 1)
            ev.append(
                Evidence(
                    "container_cpu_usage_seconds_total",
                    round(cpu / pods, 2),
                    f"{cpu / pods:.2f} CPU cores busy per serving container",
                    source="metric",
                )
            )
            if cpu / pods >= T.API_CPU_BUSY_CORES:
                weights.append(T.W_API_CPU)
        return (
            finding(
                self,
                ctx,
                stage="api_server",
                confidence=combine(*weights),
                summary=(
                    f"The API server is slow before the engine sees the request: "
                    f"{ms(ctx.stage_seconds('api_server'))} of the tail (tokenization, "
                    f"validation, CPU)."
                ),
                evidence=ev,
                impact=ctx.stage_explained("api_server"),
            ),
        )


@dataclass(frozen=True)
class LoadImbalance:
    """Some replicas queue while others idle: the routing policy spreads load unevenly.

    Claimed only when the spread is beyond the routing's chance spread (a test at
    ``IMBALANCE_ALPHA``, :mod:`diagnosis.imbalance`) and the tail band sits on the hot replicas."""

    name: str = "load_imbalance"
    category: Category = "load_imbalance"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        stages = tuple(s for s in ("engine_queue", "gateway_queue") if ctx.stage_matters(s))
        if not stages:
            return ()
        result = imbalance(ctx)
        shown = result.shown
        if not result.proven or shown is None:
            return ()
        risk = min(result.tail_risk or 0.0, T.TAIL_RISK_CAP)
        ev = list(stage_evidence(ctx, *stages))
        ev.append(
            Evidence(
                f"{shown.signal} per replica",
                round(shown.ratio, 2),
                f"hot replica(s) {', '.join(result.hot)} at {shown.ratio:.1f}x their expected "
                f"share; chi-square {shown.statistic:.1f} on {shown.dof} dof, p = "
                f"{shown.p_value:.2g} (routing's chance spread rejected at {T.IMBALANCE_ALPHA:g})",
                source="metric" if shown.signal != "requests" else "span",
                threshold=T.MIN_IMBALANCE_RATIO,
            )
        )
        ev.append(
            Evidence(
                "tail_band.share_on_hot_replicas",
                round(result.tail_share or 0.0, 3),
                f"the hot replicas serve {result.tail_share:.0%} of the tail band for "
                f"{result.request_share:.0%} of the requests; a request there is {risk:.1f}x "
                f"likelier to be in the tail",
                source="span",
                threshold=T.TAIL_ON_HOT_MIN,
            )
        )
        conf = combine(
            T.W_IMBALANCE,  # the spread is beyond chance
            min((shown.ratio - 1.0) / T.IMBALANCE_RATIO_SCALE, T.W_IMBALANCE_MAX),  # how far
            # how strongly the tail follows the hot replicas
            min((risk - 1.0) / T.TAIL_RISK_SCALE, T.W_IMBALANCE_MAX),
        )
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=conf,
                summary=(
                    f"Load is spread unevenly: {', '.join(result.hot)} carr"
                    f"{'ies' if len(result.hot) == 1 else 'y'} {shown.ratio:.1f}x the expected "
                    f"{'requests' if shown.signal == 'requests' else 'queue'} and "
                    f"{result.tail_share:.0%} of the tail band "
                    f"({ms(ctx.stage_seconds(*stages))} of the tail in {' + '.join(stages)})."
                ),
                evidence=ev,
                impact=ctx.stage_explained(*stages) + _hot_prefill(ctx, result),
            ),
        )


def _hot_prefill(ctx: DiagnosisContext, result: Imbalance) -> float:
    """The prefill growth the hot replicas account for: their larger batches slow each step,
    so the first token comes later after the queue too.  Claimed in the measure the tail band
    sits on them beyond their share of the requests (0: no more than chance, 1: all of it)."""
    if not ctx.stage_matters("prefill") or result.tail_share is None:
        return 0.0
    req = result.request_share or 0.0
    beyond = (result.tail_share - req) / max(1.0 - req, 1e-9)
    return min(max(beyond, 0.0), 1.0) * ctx.stage_explained("prefill")


for _rule in (IngressNetwork(), GatewayQueue(), ApiServerOverhead(), LoadImbalance()):
    register(_rule)
