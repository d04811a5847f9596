"""Rules for the request path in front of the engine (TTFT tree): ingress and TLS, gateway
concurrency limits, the API server, and uneven spreading of load over replicas."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.imbalance import imbalance
from tailtriage.diagnosis.rule import combine, finding, gauge_evidence, ms, register, stage_evidence


@dataclass(frozen=True)
class IngressNetwork:
    """Time in the edge proxy itself (TLS handshakes on fresh connections, slow network)."""

    name: str = "ingress_network"
    category: str = "ingress_network"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        stages = tuple(s for s in ("client", "ingress") if ctx.stage_matters(s, share=0.15))
        if not stages:
            return ()
        v = ctx.stage("ingress")
        grew = v is not None and v.delta is not None and v.delta > 0.02
        conf = combine(0.5, 0.3 if grew else 0.0, min(ctx.stage_share(*stages), 0.5))
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
                impact=ctx.stage_excess(*stages),
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
    category: str = "gateway_queue"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not ctx.stage_matters("gateway_queue"):
            return ()
        sig = ctx.signals
        ev = list(stage_evidence(ctx, "gateway_queue"))
        weights = [0.55]
        gq = sig.incident.gauge("gateway_queue")
        if gq is not None:
            ev.append(gauge_evidence(gq, "requests queued at the gateway"))
            weights.append(0.2)
        eq = sig.incident.gauge("queue_waiting")
        if eq is not None and eq.mean < 1.0:
            weights.append(0.25)
            ev.append(gauge_evidence(eq, "engine queues stayed almost empty", threshold=1.0))
        busy = sig.incident.gauge("gpu_busy")
        if busy is not None and busy.mean < 0.7:
            weights.append(0.15)
            ev.append(gauge_evidence(busy, "GPUs had headroom", threshold=0.7))
        conf = combine(*weights)
        if imbalance(ctx).proven:
            conf *= 0.7  # per-replica limits hit by an uneven spread: imbalance explains it
        if sig.events_of("rollout", lead=120.0) or sig.events_of("pod_killing", lead=60.0):
            conf *= 0.6  # capacity was being replaced: the rollout rule explains the queue
        return (
            finding(
                self,
                ctx,
                stage="gateway_queue",
                confidence=conf,
                summary=(
                    f"Requests wait at the gateway's concurrency limit: "
                    f"{ms(ctx.stage_seconds('gateway_queue'))} of the tail, while the engines "
                    f"have room."
                ),
                evidence=ev,
                impact=ctx.stage_excess("gateway_queue"),
            ),
        )


@dataclass(frozen=True)
class ApiServerOverhead:
    """The serving frontend's own time (tokenization, validation, a CPU-starved process)."""

    name: str = "api_server_overhead"
    category: str = "api_server_overhead"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not ctx.stage_matters("api_server"):
            return ()
        sig = ctx.signals
        ev = list(stage_evidence(ctx, "api_server"))
        weights = [0.55]
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
            if cpu / pods >= 0.9:
                weights.append(0.3)
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
                impact=ctx.stage_excess("api_server"),
            ),
        )


@dataclass(frozen=True)
class LoadImbalance:
    """Some replicas queue while others idle: the routing policy spreads load unevenly.

    Claimed only when the spread is beyond the routing's chance spread (a test at
    ``IMBALANCE_ALPHA``, :mod:`diagnosis.imbalance`) and the tail band sits on the hot replicas."""

    name: str = "load_imbalance"
    category: str = "load_imbalance"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        stages = tuple(s for s in ("engine_queue", "gateway_queue") if ctx.stage_matters(s))
        if not stages:
            return ()
        result = imbalance(ctx)
        shown = result.shown
        if not result.proven or shown is None:
            return ()
        lift = result.tail_lift or 0.0
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
                f"{result.request_share:.0%} of the requests ({lift:.1f}x)",
                source="span",
                threshold=T.TAIL_ON_HOT_MIN,
            )
        )
        conf = combine(
            0.4,  # the spread is beyond chance
            min((shown.ratio - 1.0) / 2.0, 0.4),  # how far beyond
            min((lift - 1.0) / 3.0, 0.4),  # how much of the tail it carries
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
                impact=ctx.stage_excess(*stages),
            ),
        )


for _rule in (IngressNetwork(), GatewayQueue(), ApiServerOverhead(), LoadImbalance()):
    register(_rule)
