"""Engine causes decided from the engines' histograms alone (captures without traces).

With spans, load imbalance is the requests per replica against the routing's chance spread
with the tail band on the hot replicas, and prefill interference is decodes overlapping long
prefills on one replica.  Without them the engines' own histograms carry the same facts:

* :class:`MetricsLoadImbalance` - every replica exports its TTFT histogram, so its ``+Inf``
  count is the requests it took: the same Pearson test against each replica's share of the
  window (:func:`diagnosis.imbalance.pearson`), and the hot replicas' mean engine TTFT above
  the others' stands in for "the tail band sits on them".
* :class:`MetricsKvFilling` - the KV cache that had room before the incident reached the
  point where a new sequence's blocks no longer fit, while requests waited: admission is held
  back by cache blocks.  The span rule weighs a full cache against a pinned batch; without
  spans the change against the baseline is the evidence that the cache, not the batch, moved.
* :class:`MetricsPrefillInterference` - a per-token breach while the prompt-length histogram
  grew a long tail (p99 an order of magnitude above the median): a minority of long prompts
  whose prefills stall every decode sharing their steps.  Memory-bound decode stretches the
  token gaps too, but with the whole prompt mix shifted, not a new tail.

Both run only when the percentiles are engine-side (no traces); with traces the span rules
decide."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.analyses.engine_metrics import TOKEN_HISTOGRAMS, find_histograms
from tailtriage.analyses.histograms import load_histogram, present_families
from tailtriage.analyses.replica_histograms import ReplicaWindow, per_replica
from tailtriage.diagnosis import engine_limits as E
from tailtriage.diagnosis import facts as F
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.imbalance import SpreadTest, pearson
from tailtriage.diagnosis.rule import (
    combine,
    finding,
    gauge_evidence,
    ms,
    register,
    stage_evidence,
)
from tailtriage.diagnosis.rules_metrics import engine_side_only
from tailtriage.model.vocabulary import Category


@dataclass(frozen=True)
class ReplicaSkew:
    """Requests per replica against their chance spread, and the hot replicas' TTFT lift."""

    test: SpreadTest
    lift: float  # hot replicas' mean engine TTFT / the others'
    hot_share: float  # share of the window's requests the hot replicas took


def replica_skew(ctx: DiagnosisContext) -> ReplicaSkew | None:
    """The count test over the engine TTFT histogram's replicas in the incident window, and
    the TTFT lift of the hot ones; None without a per-replica TTFT histogram, without a hot
    replica, or when the fleet changed during the window (a scale-up or a rollout spreads
    load unevenly by itself: that is the capacity rules' evidence, not the routing's)."""
    if ctx.store is None:
        return None
    found = find_histograms(ctx.store, phases=False)
    picked = None if found is None else found.engine_latencies.get("ttft")
    if picked is None:
        return None
    lo, hi = ctx.windows.incident
    reps = per_replica(ctx.store, picked.family.name, (lo, hi), dict(picked.family.where))
    seen = {k: r for k, r in reps.items() if r.exposure > 0}
    if any(r.exposure < T.STABLE_FLEET_EXPOSURE * (hi - lo) for r in seen.values()):
        return None  # replicas came or went: new pods fill up, old ones carry the backlog
    total_n = sum(r.count for r in seen.values())
    total_t = sum(r.exposure for r in seen.values())
    if len(seen) < 2 or total_n < T.MIN_IMBALANCE_REQUESTS or total_t <= 0:
        return None
    expected = {k: total_n * r.exposure / total_t for k, r in seen.items()}
    test = pearson({k: r.count for k, r in seen.items()}, expected, 1.0, "requests")
    if test is None or not test.significant:
        return None
    hot = [seen[k] for k in test.hot]
    if _mean_of(hot) >= T.REPLICA_BACKLOG_SHARE * (hi - lo):
        return None  # a backlog from before the window drained there (see the threshold)
    rest = [r for k, r in seen.items() if k not in test.hot]
    lift = _mean_of(hot) / max(_mean_of(rest), 1e-9) if rest else 1.0
    return ReplicaSkew(test, lift, sum(r.count for r in hot) / total_n)


def _mean_of(reps: list[ReplicaWindow]) -> float:
    """Request-weighted mean of the replicas' means."""
    n = sum(r.count for r in reps if r.mean is not None)
    return sum(r.count * (r.mean or 0.0) for r in reps) / n if n > 0 else 0.0


@dataclass(frozen=True)
class MetricsLoadImbalance:
    """Some replicas take far more than their share of the requests, and their requests are
    the slow ones: the routing spreads load unevenly (metrics-only captures)."""

    name: str = "metrics_load_imbalance"
    category: Category = "load_imbalance"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not engine_side_only(ctx):
            return ()
        stages = tuple(s for s in ("engine_queue", "prefill") if ctx.stage_matters(s))
        if not stages:
            return ()
        skew = replica_skew(ctx)
        if skew is None or skew.lift < T.REPLICA_TTFT_LIFT:
            return ()
        t = skew.test
        hot = ", ".join(t.hot)
        ev = [
            *stage_evidence(ctx, *stages),
            Evidence(
                "requests per replica (engine TTFT histogram count)",
                round(t.ratio, 2),
                f"{hot} took {t.ratio:.1f}x the requests expected for the time each served "
                f"({skew.hot_share:.0%} of the incident's); chi-square {t.statistic:.0f} on "
                f"{t.dof} dof, p = {t.p_value:.2g}",
                source="metric",
                threshold=T.MIN_IMBALANCE_RATIO,
            ),
            Evidence(
                "engine TTFT mean, hot replicas / others",
                round(skew.lift, 2),
                f"requests on {hot} waited {skew.lift:.1f}x as long for their first token",
                source="metric",
                threshold=T.REPLICA_TTFT_LIFT,
            ),
        ]
        conf = combine(
            T.W_IMBALANCE,
            min((t.ratio - 1.0) / T.IMBALANCE_RATIO_SCALE, T.W_IMBALANCE_MAX),
            min((skew.lift - 1.0) / T.REPLICA_LIFT_SCALE, T.W_IMBALANCE_MAX),
        )
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=conf,
                summary=(
                    f"Load is spread unevenly: {hot} took {t.ratio:.1f}x their share of the "
                    f"requests and their first tokens came {skew.lift:.1f}x later "
                    f"({ms(ctx.stage_seconds(*stages))} of the engine-side tail in "
                    f"{' + '.join(stages)}). Read from each replica's TTFT histogram."
                ),
                evidence=ev,
                impact=ctx.stage_explained(*stages),
            ),
        )


@dataclass(frozen=True)
class MetricsKvFilling:
    """The KV cache filled during the incident while requests waited (metrics-only)."""

    name: str = "metrics_kv_filling"
    category: Category = "kv_cache_pressure"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not engine_side_only(ctx):
            return ()
        stages = tuple(s for s in ("engine_queue", "prefill") if ctx.stage_matters(s))
        sig = ctx.signals
        kv, waiting = sig.incident.gauge("kv_usage"), sig.incident.gauge("queue_waiting")
        before = sig.baseline.gauge("kv_usage") if sig.baseline is not None else None
        if (
            not stages
            or kv is None
            or before is None
            or waiting is None
            or kv.max < T.KV_FILL_PEAK
            or kv.max - before.max < T.KV_FILL_RISE
            or waiting.mean < T.WAITING_MIN
        ):
            return ()
        weights = [T.WM_KV_FILLED, T.WM_KV_WAITING]
        ev = [
            gauge_evidence(kv, "KV-cache usage in the incident", threshold=T.KV_FILL_PEAK),
            gauge_evidence(before, "KV-cache usage before it"),
            gauge_evidence(waiting, "requests waiting for admission", threshold=T.WAITING_MIN),
            *stage_evidence(ctx, *stages),
        ]
        pre = sig.incident.counters.get("preemptions") or 0.0
        if F.preempting(sig):
            weights.append(T.W_PREEMPTIONS)
            ev.append(
                Evidence(
                    "preemptions",
                    round(pre, 1),
                    f"{pre:.0f} running requests evicted and recomputed",
                    source="metric",
                    threshold=0,
                )
            )
        if E.compute_bound(sig) and not E.kv_bound(sig):
            # a full cache is what a pinned, busy batch looks like too
            weights = [w * T.KV_KEEP_COMPUTE_BOUND for w in weights]
        if F.arrivals_per_replica_grew(sig) and F.demand_per_request_grew(sig) is False:
            # more requests, none heavier: the cache fills because the fleet is short
            weights = [w * T.KV_KEEP_LOAD_DRIVEN for w in weights]
            ev.append(
                Evidence(
                    "request.load_grew",
                    True,
                    "the engines' request rate grew against the baseline while each request "
                    "asks for no more tokens: the cache fills because replicas are short",
                    source="metric",
                )
            )
        return (
            finding(
                self,
                ctx,
                stage=stages[0],
                confidence=combine(*weights),
                summary=(
                    f"The KV cache filled: usage peaked at {kv.max:.0%} against {before.max:.0%}"
                    f" before the incident while {waiting.mean:.1f} requests waited on average; "
                    f"new requests wait for cache blocks "
                    f"({ms(ctx.stage_seconds(*stages))} of the engine-side tail in "
                    f"{' + '.join(stages)})."
                ),
                evidence=ev,
                impact=ctx.stage_explained(*stages),
            ),
        )


@dataclass(frozen=True)
class PromptTail:
    """The prompt-length histogram's median and 99th percentile over a window (tokens)."""

    p50: float
    p99: float

    @property
    def ratio(self) -> float:
        return self.p99 / max(self.p50, 1.0)


def prompt_tail(ctx: DiagnosisContext, window: tuple[float, float] | None) -> PromptTail | None:
    """p50 and p99 of the engines' prompt-length histogram over ``window``."""
    if ctx.store is None or window is None:
        return None
    for family in present_families(ctx.store, TOKEN_HISTOGRAMS["prompt"]):
        hist = load_histogram(ctx.store, family)
        if hist is None:
            continue
        w = hist.window(*window)
        if w.count < T.MIN_INTERFERENCE_REQUESTS:
            return None
        p50 = w.quantile(T.PROMPT_TYPICAL_PERCENTILE).value
        p99 = w.quantile(T.PROMPT_TAIL_PERCENTILE).value
        if p50 == p50 and p99 == p99 and p99 < float("inf"):  # finite, not NaN
            return PromptTail(p50, p99)
    return None


@dataclass(frozen=True)
class MetricsPrefillInterference:
    """A per-token breach next to a new long-prompt minority (metrics-only captures)."""

    name: str = "metrics_prefill_interference"
    category: Category = "prefill_interference"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        if not engine_side_only(ctx):
            return ()
        slo = next(iter(ctx.breached("itl", "tpot")), None)
        if slo is None:
            return ()
        now = prompt_tail(ctx, ctx.windows.incident)
        if now is None or now.ratio < T.PROMPT_TAIL_RATIO or now.p99 < T.LONG_PROMPT_MIN_TOKENS:
            return ()
        before = prompt_tail(ctx, ctx.windows.baseline)
        weights = [T.WM_PROMPT_TAIL]
        ev = [
            Evidence(
                "request_prompt_tokens p99 / p50",
                round(now.ratio, 1),
                f"p99 prompt {now.p99:.0f} tokens against a median of {now.p50:.0f}: a "
                f"minority of long prompts",
                source="metric",
                threshold=T.PROMPT_TAIL_RATIO,
            )
        ]
        if before is not None:
            grew = now.ratio >= T.PROMPT_TAIL_GROWTH * before.ratio
            ev.append(
                Evidence(
                    "request_prompt_tokens p99 / p50, baseline",
                    round(before.ratio, 1),
                    f"before the incident the p99 prompt was {before.ratio:.1f}x the median"
                    + (": the long prompts are new" if grew else ""),
                    source="metric",
                )
            )
            if grew:
                weights.append(T.WM_PROMPT_TAIL_NEW)
        return (
            finding(
                self,
                ctx,
                stage="decode",
                confidence=combine(*weights),
                summary=(
                    f"Long prompts stall decoding: p{slo.spec.percentile:g} {slo.spec.metric} "
                    f"{ms(slo.observed)} against {ms(slo.spec.threshold)} while the p99 prompt "
                    f"is {now.ratio:.0f}x the median; each long prefill fills the engine steps "
                    f"the running requests decode in. Engine spans would show the overlap."
                ),
                evidence=ev,
                impact=max((slo.observed or 0.0) - slo.spec.threshold, 0.0),
                metric=slo.spec.metric,
            ),
        )


register(MetricsLoadImbalance())
register(MetricsKvFilling())
register(MetricsPrefillInterference())
