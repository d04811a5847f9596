"""Rules for the request path in front of the engine (TTFT tree): ingress and TLS, gateway
concurrency limits, the API server, and uneven spreading of load over replicas."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rule import combine, finding, gauge_evidence, ms, register, stage_evidence
from tailtriage.diagnosis.rules_capacity import imbalance_ratio


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
        if imbalance_ratio(sig) >= 1.5:
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
    """Some replicas queue while others idle: the routing policy spreads load unevenly."""

    name: str = "load_imbalance"
    category: str = "load_imbalance"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        stages = tuple(s for s in ("engine_queue", "gateway_queue") if ctx.stage_matters(s))
        if not stages:
            return ()
        sig = ctx.signals
        ratio = imbalance_ratio(sig)
        if ratio < 1.4:
            return ()
        ev = list(stage_evidence(ctx, *stages))
        q = sig.incident.gauge("queue_waiting")
        if q is not None and q.per_replica_mean:
            worst = max(q.per_replica_mean, key=lambda k: q.per_replica_mean[k])
            ev.append(
                Evidence(
                    q.metric,
                    round(ratio, 2),
                    f"busiest replica {worst} queues {ratio:.1f}x the fleet mean",
                    source="metric",
                    threshold=1.5,
                )
            )
        ttfts = {k: r.ttft_mean for k, r in sig.incident.replicas.items() if r.ttft_mean}
        spread = 1.0
        if len(ttfts) >= 2:
            lo, hi = min(ttfts.values()), max(ttfts.values())
            spread = hi / max(lo, 1e-9)
            ev.append(
                Evidence(
                    "replica.ttft_mean_spread",
                    round(spread, 2),
                    f"slowest replica's mean TTFT is {spread:.1f}x the fastest's",
                    source="span",
                )
            )
        conf = combine(
            0.35 if ratio >= 1.5 else 0.15,
            min((ratio - 1.0) / 2.0, 0.5),
            0.25 if spread >= 2.0 else 0.0,
        )
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=conf,
                summary=(
                    f"Load is spread unevenly: the busiest replica carries {ratio:.1f}x the mean "
                    f"queue while others have room ({ms(ctx.stage_seconds(*stages))} of the tail "
                    f"in {' + '.join(stages)})."
                ),
                evidence=ev,
                impact=ctx.stage_excess(*stages),
            ),
        )


for _rule in (IngressNetwork(), GatewayQueue(), ApiServerOverhead(), LoadImbalance()):
    register(_rule)
