"""Rules for disaggregated and cache-aware serving (design 3.2): ``kv_transfer``,
``prefix_cache_miss`` and ``admission_control``.

They read the stage decomposition (``kv_transfer`` and ``routing`` stages from router, EPP and
prefill/decode spans) and the metrics that only these deployments export (SGLang's PD transfer
gauges and failure counters, vLLM's ``prompt_tokens_by_source`` and
``num_requests_waiting_by_reason``, llm-d's EPP index hits).  Metric names: the catalog
(``model.metric_catalog``), sources in ``reference/telemetry-conventions.md`` 2.1 and 10."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rule import combine, finding, ms, register, stage_evidence
from tailtriage.model.metric_catalog import names_for
from tailtriage.model.vocabulary import Category


@dataclass(frozen=True)
class _Stat:
    """One metric concept over a window, summed over series (gauges: per time, then mean)."""

    mean: float
    max: float
    increase: float


def _stat(
    ctx: DiagnosisContext, concept: str, window: tuple[float, float], **where: str
) -> _Stat | None:
    """The concept's samples in ``window`` (labels matching ``where``); None when absent."""
    if ctx.store is None:
        return None
    names = {n for name in names_for(concept) for n in (name, name.replace(":", "_"))}
    names |= {n + "_total" for n in names if not n.endswith("_total")}
    listed = ", ".join("'" + n.replace("'", "''") + "'" for n in sorted(names))
    rows = ctx.store.query(
        f"SELECT labels, time, value FROM series WHERE metric IN ({listed}) "
        f"AND time < {window[1]!r} ORDER BY labels, time"
    ).to_pylist()
    per_time: dict[float, float] = {}
    start: dict[str, float] = {}  # a counter's value when the window opened
    last: dict[str, float] = {}
    for r in rows:
        labels = orjson.loads(str(r["labels"]))
        if any(str(labels.get(k)) != v for k, v in where.items()):
            continue
        key, t, v = str(r["labels"]), float(r["time"]), float(r["value"])
        if t < window[0]:
            start[key] = v
            continue
        per_time[t] = per_time.get(t, 0.0) + v
        start.setdefault(key, v)
        last[key] = v
    if not per_time:
        return None
    values = list(per_time.values())
    growth = sum(max(last[k] - start[k], 0.0) for k in last)
    return _Stat(sum(values) / len(values), max(values), growth)


def _windows(ctx: DiagnosisContext) -> tuple[tuple[float, float], tuple[float, float] | None]:
    return ctx.windows.incident, ctx.windows.baseline


@dataclass(frozen=True)
class KvTransfer:
    """The prefill -> decode KV-cache handoff is slow or failing."""

    name: str = "kv_transfer"
    category: Category = "kv_transfer"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        inc, _base = _windows(ctx)
        ev = list(stage_evidence(ctx, "kv_transfer"))
        weights = [T.W_TRANSFER_STAGE] if ctx.stage_matters("kv_transfer") else []
        lat = _stat(ctx, "kv_transfer_latency", inc)
        if lat is not None and lat.max >= T.SLOW_TRANSFER_MS:
            weights.append(T.W_SLOW_TRANSFER)
            ev.append(
                Evidence(
                    "sglang:kv_transfer_latency_ms",
                    round(lat.max, 1),
                    f"KV transfers took up to {lat.max:.0f} ms (mean {lat.mean:.0f})",
                    source="metric",
                    threshold=T.SLOW_TRANSFER_MS,
                )
            )
        failed = _stat(ctx, "kv_transfer_failures", inc)
        if failed is not None and failed.increase > 0:
            weights.append(T.W_TRANSFER_FAILED)
            ev.append(
                Evidence(
                    "sglang:num_transfer_failed_reqs_total",
                    failed.increase,
                    f"{failed.increase:g} KV transfers or bootstraps failed",
                    source="metric",
                    threshold=0,
                )
            )
        if not weights or not ctx.breached():
            return ()
        return (
            finding(
                self,
                ctx,
                stage="kv_transfer",
                confidence=combine(*weights),
                summary=(
                    f"The prefill-to-decode KV transfer is slow or failing: "
                    f"{ms(ctx.stage_seconds('kv_transfer'))} of the tail waits for the KV cache."
                ),
                evidence=ev,
                impact=ctx.stage_excess("kv_transfer"),
                next_steps=("check the KV connector's transport (NIXL/RDMA vs TCP fallback)",),
            ),
        )


def _hit_share(ctx: DiagnosisContext, window: tuple[float, float]) -> float | None:
    """Prompt tokens served from the prefix cache / all prompt tokens over ``window``."""
    hit = _stat(ctx, "prompt_tokens_by_source", window, source="local_cache_hit")
    computed = _stat(ctx, "prompt_tokens_by_source", window, source="local_compute")
    if hit is not None and computed is not None and hit.increase + computed.increase > 0:
        return hit.increase / (hit.increase + computed.increase)
    hits, queries = (
        _stat(ctx, "prefix_cache_hits", window),
        _stat(ctx, "prefix_cache_queries", window),
    )
    if hits is not None and queries is not None and queries.increase > 0:
        return hits.increase / queries.increase
    rate = _stat(ctx, "prefix_cache_hit_rate", window)
    return None if rate is None else rate.mean


@dataclass(frozen=True)
class PrefixCacheMiss:
    """Prefill grew because prompts that used to hit the prefix cache now miss it; the
    evidence says whether the workload lost its reuse, or the router sent requests away from
    the endpoints that hold their prefix (or routed on a stale index)."""

    name: str = "prefix_cache_miss"
    category: Category = "prefix_cache_miss"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        inc, base = _windows(ctx)
        if base is None or not ctx.stage_matters("prefill", "engine_queue"):
            return ()
        now, before = _hit_share(ctx, inc), _hit_share(ctx, base)
        if now is None or before is None or before - now < T.HIT_DROP:
            return ()
        ev = [
            *stage_evidence(ctx, "prefill", "routing"),
            Evidence(
                "prefix_cache.hit_share",
                round(now, 3),
                f"prefix-cache hits fell from {before:.0%} to {now:.0%} of prompt tokens",
                source="metric",
                threshold=round(before, 3),
            ),
        ]
        index = _stat(ctx, "epp_index_lookup_hits", inc)
        if index is not None and index.increase > 0:
            why = (
                "routing: the endpoint picker's index still finds the prefixes, yet the engines "
                "miss them (requests sent elsewhere: a least-loaded fallback, or a stale index)"
            )
            ev.append(
                Evidence(
                    "llm_d_epp_kv_cache_index_lookup_hits_total",
                    index.increase,
                    "the picker's KV-cache index kept finding prefixes",
                    source="metric",
                )
            )
        else:
            why = (
                "workload or routing: no router index metrics tell them apart (export llm-d's "
                "EPP metrics or trace the picker's llm_d.kv_cache.index lookups)"
            )
        return (
            finding(
                self,
                ctx,
                stage="prefill",
                confidence=combine(
                    T.W_HIT_DROP, min((before - now) * T.W_PER_HIT_DROP, T.W_HIT_DROP_MAX)
                ),
                summary=(
                    f"Prefix-cache misses: hits fell from {before:.0%} to {now:.0%} of prompt "
                    f"tokens, so prefill recomputes shared prefixes; cause: {why}."
                ),
                evidence=ev,
                impact=ctx.stage_excess("prefill"),
            ),
        )


@dataclass(frozen=True)
class AdmissionControl:
    """Requests wait (deferred) or are turned away by an admission policy, not for lack of
    capacity (``vllm:num_requests_waiting_by_reason``, aborted requests)."""

    name: str = "admission_control"
    category: Category = "admission_control"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        inc, _base = _windows(ctx)
        if not ctx.breached():
            return ()
        deferred = _stat(ctx, "requests_waiting_by_reason", inc, reason="deferred")
        capacity = _stat(ctx, "requests_waiting_by_reason", inc, reason="capacity")
        ev: list[Evidence] = list(stage_evidence(ctx, "engine_queue", "gateway_queue"))
        weights: list[float] = []
        if deferred is not None and deferred.mean > 0:
            total = deferred.mean + (capacity.mean if capacity is not None else 0.0)
            share = deferred.mean / total
            if share >= T.DEFERRED_SHARE:
                weights.append(T.W_DEFERRED)
                ev.append(
                    Evidence(
                        "vllm:num_requests_waiting_by_reason{reason=deferred}",
                        round(deferred.mean, 2),
                        f"{share:.0%} of waiting requests are deferred by policy, "
                        f"not waiting for capacity",
                        source="metric",
                        threshold=T.DEFERRED_SHARE,
                    )
                )
        aborted = _stat(ctx, "requests_aborted", inc)
        if aborted is not None and aborted.increase > 0:
            weights.append(T.W_ABORTED)
            ev.append(
                Evidence(
                    "sglang:num_aborted_requests_total",
                    aborted.increase,
                    f"{aborted.increase:g} requests aborted",
                    source="metric",
                )
            )
        if not weights:
            return ()
        return (
            finding(
                self,
                ctx,
                stage="engine_queue",
                confidence=combine(*weights),
                summary=(
                    "Admission control holds requests back: they are deferred or rejected by "
                    "a queue limit or policy while capacity exists."
                ),
                evidence=ev,
                impact=ctx.stage_excess("engine_queue"),
                next_steps=(
                    "compare --max-num-queued-reqs / --max-num-queued-tokens with the arrival rate",
                ),
            ),
        )


register(KvTransfer())
register(PrefixCacheMiss())
register(AdmissionControl())
