"""Capacity rules (TTFT tree): scaling lag, cold start, rollout.

They say *when* capacity arrived (the autoscaler's decision, the pods' start-up, a rolling
update); whether the capacity that exists is used up is ``rules_saturation``'s question."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.diagnosis import facts as F
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.facts import desired_gap, queue_grew, replicas_short
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rollout import (
    analysis_evidence,
    capacity_dipped,
    rollout_evidence,
    took_capacity,
)
from tailtriage.diagnosis.rule import (
    combine,
    finding,
    gauge_evidence,
    ms,
    register,
    stage_evidence,
)
from tailtriage.diagnosis.signals import EventRecord, Signals
from tailtriage.diagnosis.startup import startup
from tailtriage.model.vocabulary import Category

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


def scale_ups(sig: Signals) -> tuple[EventRecord, ...]:
    """Rescale events that grew the deployment (size above the previous size)."""
    out = []
    last: int | None = None
    for e in sig.events:
        if e.kind != "hpa_rescale" or e.replicas is None:
            continue
        if last is None or e.replicas > last:
            out.append(e)
        last = e.replicas
    lo, hi = sig.incident.start - T.SCALE_UP_LOOKBACK_S, sig.incident.end
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


def reaction_delay(sig: Signals) -> float | None:
    """Seconds from the start of the incident to the first scale-up decision."""
    ups = [e for e in scale_ups(sig) if e.time >= sig.incident.start - T.DECISION_SLACK_S]
    if not ups:
        return None
    return max(ups[0].time - sig.incident.start, 0.0)


def replica_growth(sig: Signals) -> tuple[float, float] | None:
    g = sig.incident.gauge("hpa_current")
    return None if g is None else (g.first, g.last)


def capacity_wait(ctx: DiagnosisContext) -> float:
    """Seconds of the percentile's excess spent waiting for replicas: pending, and half the
    engine queue (the other half may be the replicas' own saturation) - all of it when each
    replica got more requests than before and no heavier ones (the fleet was short)."""
    sig = ctx.signals
    short = F.load_per_replica_grew(sig) and F.demand_per_request_grew(sig) is False
    share = 1.0 if short else T.QUEUE_CAPACITY_SHARE
    return ctx.stage_explained("pending") + share * ctx.stage_explained("engine_queue")


def pods_still_starting(sig: Signals) -> bool:
    """A pod created before the incident became Ready (or served its first token) only after
    the incident began: capacity asked for earlier, however long before, was still loading."""
    start = sig.incident.start
    if any(created <= start < created + secs for _, created, secs in sig.startups):
        return True
    # pod conditions: scheduled at ``time``, Ready ``duration`` seconds later
    return any(
        e.time <= start < e.time + e.duration
        for e in sig.events_of("cold_start", lead=T.STARTUP_LEAD_S)
        if e.duration is not None
    )


def capacity_coming(sig: Signals) -> bool:
    """The autoscaler was still adding replicas during the incident: a late scale-up decision,
    replicas short of those it asked for, or pods loading when the incident began."""
    return reaction_delay(sig) is not None or replicas_short(sig) or pods_still_starting(sig)


def capacity_requested(sig: Signals) -> bool:
    """Capacity was on its way: a scale-up decision, replicas growing, desired > current, or
    pods created before the incident still starting when it began."""
    growth = replica_growth(sig)
    return (
        bool(scale_ups(sig))
        or (growth is not None and growth[1] > growth[0])
        or replicas_short(sig)
        or pods_still_starting(sig)
    )


def scaled_from_zero(sig: Signals) -> bool:
    growth = replica_growth(sig)
    return growth is not None and growth[0] == 0


def cold_fraction(ctx: DiagnosisContext) -> float:
    """The start-up's share of the time to capacity: start-up / (decision delay + start-up)."""
    sig = ctx.signals
    pend, cold = _startup_seconds(sig)
    whole = max(cold, startup(ctx).seconds) + pend
    if whole <= 0:
        return 0.0
    delay = reaction_delay(sig)
    if delay is None:
        # decided before the incident and still loading when it began: all start-up
        return 1.0 if scaled_from_zero(sig) or pods_still_starting(sig) else T.UNTIMED_COLD_SHARE
    return whole / (whole + delay)


def _capacity_stages(ctx: DiagnosisContext) -> tuple[str, ...]:
    return tuple(s for s in ("pending", "engine_queue") if ctx.stage_matters(s))


@dataclass(frozen=True)
class ScalingLag:
    """The autoscaler added capacity late: it scales on a metric blind to the engine's load
    (CPU of a GPU server), or its decision arrived long after the queue started to grow."""

    name: str = "scaling_lag"
    category: Category = "scaling_lag"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        stages = _capacity_stages(ctx)
        if not stages:
            return ()
        ev: list[Evidence] = list(stage_evidence(ctx, *stages))
        weights: list[float] = []
        blind = [m for m in sig.hpa_metrics if not load_aware(m)]
        if sig.hpa_metrics and blind and len(blind) == len(sig.hpa_metrics):
            weights.append(T.W_HPA_BLIND)
            ev.append(
                Evidence(
                    "hpa.target_metric",
                    ", ".join(sig.hpa_metrics),
                    "the HPA scales on a metric that does not follow the engine's load "
                    "(a GPU server's CPU stays low while requests queue)",
                    source="metric",
                )
            )
        delay = reaction_delay(sig)
        growth = replica_growth(sig)
        if delay is not None and delay >= T.LATE_SCALE_UP_S:
            very_late = delay >= 2 * T.LATE_SCALE_UP_S
            weights.append(T.W_VERY_LATE_DECISION if very_late else T.W_LATE_DECISION)
            ev.append(
                Evidence(
                    "hpa.first_scale_up_delay_s",
                    round(delay, 1),
                    f"first scale-up decision {delay:.0f} s after the incident began",
                    source="event",
                    threshold=T.LATE_SCALE_UP_S,
                )
            )
        if growth is not None and growth[1] > growth[0]:
            weights.append(T.W_REPLICAS_GROWING)
            ev.append(
                Evidence(
                    "hpa.current_replicas",
                    f"{growth[0]:g} -> {growth[1]:g}",
                    "replicas were still being added during the incident",
                    source="metric",
                )
            )
        gap = desired_gap(sig)
        if gap is not None and replicas_short(sig):
            weights.append(T.W_REPLICAS_SHORT)
            ev.append(
                Evidence(
                    "hpa.desired_minus_current",
                    round(gap, 2),
                    "desired replicas stayed above current replicas (pods not ready yet)",
                    source="metric",
                    threshold=0.0,
                )
            )
        still = never_scaled(sig)
        if still is not None and not blind:
            weights.append(T.W_NEVER_SCALED)
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
            return ()  # no sign capacity was on its way, nor an autoscaler blind to the load
        q = sig.incident.gauge("queue_waiting")
        if q is not None and queue_grew(q, T.CAPACITY_QUEUE_MEAN):
            weights.append(T.W_QUEUE_GREW)
            ev.append(gauge_evidence(q, "engine queue grew while capacity lagged"))
        conf = combine(*weights)
        # the wait for capacity is the decision's delay plus the pods' start-up: the cold-start
        # rule takes the start-up's part of it
        impact = capacity_wait(ctx) * (1.0 - cold_fraction(ctx))
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


def never_scaled(sig: Signals) -> float | None:
    """Replicas when the HPA never moved during the incident although below its maximum and
    the load grew against the baseline; else None."""
    cur, top = sig.incident.gauge("hpa_current"), sig.incident.gauge("hpa_max")
    if cur is None or scale_ups(sig) or cur.max != cur.first:
        return None
    if top is not None and cur.max >= top.max:
        return None  # pinned at its ceiling: saturation, not lag
    if cur.metric.startswith("autoscaler_"):
        return None  # Knative's KPA scales on concurrency: not moving is a pinned fleet
    base = sig.baseline
    if base is not None and sig.incident.arrival_rps < T.LOAD_GROWTH_MIN * base.arrival_rps:
        return None
    return cur.first


@dataclass(frozen=True)
class ColdStart:
    """New replicas take long to become ready: image pull, weight loading, warm-up.

    On Knative the wait shows as ``pending`` (the activator holds the request); on a plain
    Deployment behind Istio requests queue on the replicas that exist (``engine_queue``,
    ``gateway_queue``) while the new ones load - there, capacity must have been requested (a
    scale-up decision, desired > current) for the start-up to be what the tail waits for."""

    name: str = "cold_start"
    category: Category = "cold_start"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        stages = tuple(
            s for s in ("pending", "engine_queue", "gateway_queue") if ctx.stage_matters(s)
        )
        if not stages:
            return ()
        asked = capacity_requested(sig) or scaled_from_zero(sig)
        if not asked:
            return ()  # no capacity was coming: whatever the tail waits for, it is not start-up
        pend, cold_events = _startup_seconds(sig)
        st = startup(ctx)
        cold = max(cold_events, st.seconds)
        if cold <= 0 and pend <= 0:
            return ()
        delay = reaction_delay(sig)
        ev = list(stage_evidence(ctx, *stages))
        ev.append(
            Evidence(
                "pod.cold_start_s",
                round(cold, 1),
                f"new pods took {cold:.0f} s from scheduled to ready (image pull, weight load, "
                f"warm-up); {pend:.0f} s pending before that",
                source="event",
                threshold=T.COLD_START_SLOW_S,
            )
        )
        weights = [T.W_SLOW_START if cold >= T.COLD_START_SLOW_S else T.W_ANY_START]
        if st.pull_s is not None:
            ev.append(
                Evidence(
                    "Pulled",
                    round(st.pull_s, 1),
                    f"image pulls took {st.pull_s:.1f} s on average (kubelet Pulled events)",
                    source="event",
                    threshold=T.IMAGE_PULL_SLOW_S,
                )
            )
            if st.pull_s >= T.IMAGE_PULL_SLOW_S:
                weights.append(T.W_SLOW_PULL_OR_LOAD)
        if st.load_s is not None or st.engine_s is not None:
            load = max(st.load_s or 0.0, st.engine_s or 0.0)
            ev.append(
                Evidence(
                    "pod.container_started_to_ready_s",
                    round(load, 1),
                    f"{load:.0f} s from container start to Ready (weight loading, warm-up)"
                    + (
                        f"; {st.probe_failures} readiness-probe failures"
                        if st.probe_failures
                        else ""
                    ),
                    source="event",
                    threshold=T.WEIGHT_LOAD_SLOW_S,
                )
            )
            if load >= T.WEIGHT_LOAD_SLOW_S or st.probe_failures:
                weights.append(T.W_SLOW_PULL_OR_LOAD)
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
            if cold + pend > T.STARTUP_OVER_DECISION * max(delay, 1.0):
                weights.append(T.W_STARTUP_DOMINATES)
        if scaled_from_zero(sig):
            weights.append(T.W_FROM_ZERO)
            ev.append(
                Evidence(
                    "hpa.current_replicas",
                    0,
                    "scaled from zero: every request waited for a cold replica",
                    source="metric",
                )
            )
        if sig.hpa_metrics and all(load_aware(m) for m in sig.hpa_metrics):
            weights.append(T.W_LOAD_AWARE_HPA)
        nodes = sig.events_of("failed_scheduling", "node_scale_up")
        if nodes:
            weights.append(T.W_NODE_WAIT)
            ev.append(
                Evidence(
                    "FailedScheduling",
                    len(nodes),
                    "new pods waited for a GPU node (cluster autoscaler provisioning)",
                    source="event",
                )
            )
        frac = cold_fraction(ctx)
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=combine(*weights),
                summary=(
                    f"Cold starts: capacity was requested but new pods need {cold:.0f} s to "
                    f"pull the image, load the model and warm up; "
                    f"{ms(ctx.stage_seconds(*stages))} of the tail waits in "
                    f"{' + '.join(stages)} meanwhile."
                ),
                evidence=ev,
                impact=capacity_wait(ctx) * frac
                + T.COLD_GATEWAY_SHARE * frac * ctx.stage_explained("gateway_queue"),
            ),
        )


@dataclass(frozen=True)
class Rollout:
    """A rolling update or model swap took serving capacity away during the breach: a new
    ReplicaSet scaled up while the old one scaled down (``diagnosis.rollout``), its pods
    killed; a scale-down's kills are not a rollout."""

    name: str = "rollout"
    category: Category = "rollout"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        stages = tuple(
            s for s in ("pending", "engine_queue", "gateway_queue") if ctx.stage_matters(s)
        )
        roll = rollout_evidence(ctx)
        if not roll.is_rollout and not roll.rollout_kills:
            return ()
        if ctx.stage_matters("prefill") and (capacity_dipped(ctx) or F.load_per_replica_grew(sig)):
            # the replicas left carry more: bigger batches make every prefill step longer
            stages = (*stages, "prefill")
        if not stages:
            return ()
        weights = [T.W_ROLLOUT if roll.is_rollout else T.W_ROLLOUT_KILLS_ONLY]
        if roll.rollout_kills:
            weights.append(T.W_ROLLOUT_KILLS)
        if not scale_ups(sig):
            weights.append(T.W_NO_SCALE_UP)
        ev = list(stage_evidence(ctx, *stages))
        first = roll.first if roll.first is not None else sig.incident.start
        versions = (
            f"ReplicaSet {', '.join(roll.old)} -> {', '.join(roll.new)}; " if roll.new else ""
        )
        ev.append(
            Evidence(
                "ScalingReplicaSet",
                roll.steps,
                f"{versions}{roll.steps} rollout step(s) and {roll.rollout_kills} pod "
                f"termination(s) of the old version, the first {first - sig.incident.start:+.0f} s "
                f"from the start of the incident"
                + (
                    f"; {roll.scale_down_kills} other termination(s) were a scale-down"
                    if roll.scale_down_kills
                    else ""
                ),
                source="event",
            )
        )
        if len(roll.by_replicaset) >= 2:
            ev.append(
                Evidence(
                    "request.ttft_mean_by_replicaset",
                    ", ".join(f"{rs}: {ms(t)}" for rs, t, _ in roll.by_replicaset),
                    "mean TTFT per version in the incident ("
                    + ", ".join(f"{n} requests on {rs}" for rs, _, n in roll.by_replicaset)
                    + ")",
                    source="span",
                )
            )
        ev.extend(analysis_evidence(ctx))
        conf = combine(*weights)
        if took_capacity(ctx) is False:
            # a surge rollout: ready replicas never fell below the desired count and the new
            # pods served at full speed - replacing replicas took no capacity away
            conf *= T.ROLLOUT_KEEP_NO_CAPACITY_LOST
            ev.append(
                Evidence(
                    "rollout.capacity_lost",
                    False,
                    "ready replicas never fell below the desired count and no new pod served "
                    "slower in its warm-up: the rollout took no capacity away",
                    source="event",
                )
            )
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=conf,
                summary=(
                    f"A rolling update aligned with the breach: replicas were replaced while "
                    f"traffic was served ({ms(ctx.stage_seconds(*stages))} of the tail in "
                    f"{' + '.join(stages)})."
                ),
                evidence=ev,
                impact=ctx.stage_explained(*stages),
            ),
        )


for _rule in (ScalingLag(), ColdStart(), Rollout()):
    register(_rule)
