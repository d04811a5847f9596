"""Rules inside the engine.  TTFT tree: prefill compute, KV-cache pressure.  ITL tree (one
sample per token gap, or TPOT from the decode span): memory-bound decode, tensor-parallel
overhead, prefill interference, KV-cache pressure."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.analyses.results import SloResult
from tailtriage.diagnosis import engine_limits as E
from tailtriage.diagnosis import facts as F
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.batch_tpot import batch_tpot
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rollout import capacity_dipped
from tailtriage.diagnosis.rule import combine, finding, gauge_evidence, ms, register, stage_evidence
from tailtriage.diagnosis.signals import Signals, WindowSignals
from tailtriage.model.vocabulary import Category

#: the KV finding's evidence that the cache filled because replicas were short (more requests
#: per replica, none heavier): a capacity cause beside it is what its queue is made of
LOAD_DRIVEN = "request.load_per_replica_grew"


def _itl_slo(ctx: DiagnosisContext) -> SloResult | None:
    """The breached per-token SLO (itl or tpot), or an e2e breach whose tail is decode."""
    slo = next(iter(ctx.breached("itl", "tpot")), None)
    if slo is not None:
        return slo
    e2e = next(iter(ctx.breached("e2e")), None)
    if (
        e2e is not None
        and ctx.decomposition is not None
        and ctx.stage_matters("decode", share=T.DECODE_TAIL_SHARE)
    ):
        return e2e
    return None


def _itl_excess(slo: SloResult) -> float:
    return max((slo.observed or 0.0) - slo.spec.threshold, 0.0)


def _evicted_tail_share(sig: Signals, slo: SloResult, preemptions: float | None) -> float:
    """How much of a token-gap percentile's tail evictions can account for: a full cache
    stretches a request's gaps only by evicting it (its next token waits for the recompute),
    so requests evicted must be as many as the tail above the percentile to set it; 1 where
    the engine exports no eviction counter (unknown, not disproved)."""
    if preemptions is None:
        return 1.0
    requests = max(F.incident_requests(sig), 1.0)
    tail = max(1.0 - slo.spec.percentile * 0.01, 1e-9)  # above the percentile
    return min(preemptions / requests / tail, 1.0)


def _prompt_shift(ctx: DiagnosisContext) -> float | None:
    inc, base = ctx.signals.incident, ctx.signals.baseline
    if base is None or not inc.prompt_tokens_mean or not base.prompt_tokens_mean:
        return None
    return inc.prompt_tokens_mean / base.prompt_tokens_mean


@dataclass(frozen=True)
class PrefillCompute:
    """Prefill steps are long: long prompts, or a token budget that packs many prompts into
    each step.  The time is GPU compute on the prompt, not waiting."""

    name: str = "prefill_compute"
    category: Category = "prefill_compute"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        # a queue from longer prompts at the same traffic - unless the cache is what holds
        # admission back (full and evicting: the KV rule's queue)
        overload = (
            F.prompts_overload(sig)
            and ctx.stage_matters("engine_queue")
            and not (E.kv_bound(sig) or F.preempting(sig))
        )
        if not ctx.stage_matters("prefill", share=T.PREFILL_SHARE_MIN) and not overload:
            return ()
        ev = list(stage_evidence(ctx, "prefill", "engine_queue"))
        weights = [T.W_PREFILL_STAGE + T.W_PREFILL_SHARE * min(ctx.stage_share("prefill"), 1.0)]
        if overload:
            weights.append(T.W_PROMPT_OVERLOAD)
            ev.append(
                Evidence(
                    "request.prompt_tokens_median",
                    round(sig.incident.prompt_tokens_median or 0.0, 1),
                    f"the typical prompt grew {F.prompt_mix_shift(sig) or 0.0:.1f}x at the same "
                    f"arrivals per replica: the engine queue is the longer prompts' compute",
                    source="span" if sig.incident.requests else "metric",
                    threshold=T.PROMPT_OVERLOAD_SHIFT,
                )
            )
        shift = _prompt_shift(ctx)
        if shift is not None:
            ev.append(
                Evidence(
                    "request.prompt_tokens_mean",
                    round(sig.incident.prompt_tokens_mean or 0.0, 1),
                    f"prompts {shift:.2f}x the baseline length",
                    source="span",
                    threshold=round(sig.baseline.prompt_tokens_mean or 0.0, 1)
                    if sig.baseline
                    else None,
                )
            )
            if shift >= T.PROMPT_SHIFT:
                weights.append(T.W_PROMPTS_GREW)
        corr = E.prompt_ttft_correlation(ctx)
        if corr is not None:
            ev.append(
                Evidence(
                    "request.corr_prompt_tokens_ttft",
                    round(corr, 2),
                    f"TTFT {'follows' if corr >= T.PROMPT_TTFT_CORRELATION else 'does not follow'}"
                    f" prompt length (Pearson r = {corr:.2f} over the incident's requests)",
                    source="span",
                    threshold=T.PROMPT_TTFT_CORRELATION,
                )
            )
            # TTFT follows prompt length in any engine; it points at prompt compute as the
            # incident's cause only when the prompts are not known to be unchanged
            if corr >= T.PROMPT_TTFT_CORRELATION and (shift is None or shift >= T.PROMPT_SHIFT):
                weights.append(T.W_TTFT_FOLLOWS_PROMPT)
        tensor = sig.incident.gauge("gpu_tensor")
        if tensor is not None:
            ev.append(gauge_evidence(tensor, "tensor cores busy during prefill"))
            if tensor.mean >= T.TENSOR_BUSY:
                weights.append(T.W_TENSOR_BUSY)
        running = sig.incident.gauge("running")
        if running is not None:
            ev.append(gauge_evidence(running, "requests sharing each engine step"))
        kv = sig.incident.gauge("kv_usage")
        if (
            kv is not None
            and kv.max >= T.KV_NEAR_FULL
            and (F.preempting(sig) or kv.mean >= T.KV_HIGH)
        ):
            # recompute after preemption looks the same - when there is recompute: evictions,
            # or a cache full all incident; one full scrape beside long prompts is the prompts
            weights = [w * T.PREFILL_KEEP_KV_FULL for w in weights]
        if shift is not None and shift < T.PROMPT_SHIFT:
            weights = [
                w * T.PREFILL_KEEP_PROMPTS_FLAT for w in weights
            ]  # prompts did not grow: steps got slower
        if corr is not None and corr < T.PROMPT_TTFT_CORRELATION:
            weights = [
                w * T.PREFILL_KEEP_TTFT_UNRELATED for w in weights
            ]  # TTFT is set by waiting, not by the prompt
        if E.compute_bound(sig) or E.kv_bound(sig):
            weights = [
                w * T.PREFILL_KEEP_OTHER_LIMIT for w in weights
            ]  # long prompts next to a fuller limit
        if tp_suspect(ctx):
            weights = [
                w * T.PREFILL_KEEP_TP_SUSPECT for w in weights
            ]  # communication, not prompt compute
        inter = sig.interference
        mix = F.prompt_mix_shift(sig)
        if (
            inter is not None
            and inter.tpot_ratio >= T.INTERFERENCE_TPOT_RATIO
            and (mix is None or mix < T.PROMPT_SHIFT)
        ):
            # a long-prompt minority stalls everyone: the interference rule explains it
            weights = [w * T.PREFILL_KEEP_INTERFERENCE for w in weights]
        return (
            finding(
                self,
                ctx,
                stage="prefill",
                confidence=combine(*weights),
                summary=(
                    f"Model execution before the first token is long: "
                    f"{ms(ctx.stage_seconds('prefill', 'engine_queue'))} of the tail in the "
                    + (
                        "engine, queued behind prompts that grew at the same traffic."
                        if overload
                        else "engine; each scheduling step carries too many prompt tokens."
                    )
                ),
                evidence=ev,
                impact=ctx.stage_explained("prefill")
                + (1.0 if overload else T.PREFILL_QUEUE_SHARE)
                * ctx.stage_explained("engine_queue"),
            ),
        )


@dataclass(frozen=True)
class KvCachePressure:
    """The KV cache is full: new requests wait for blocks and running ones are preempted and
    recomputed."""

    name: str = "kv_cache_pressure"
    category: Category = "kv_cache_pressure"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        kv = sig.incident.gauge("kv_usage")
        if kv is None or kv.max < T.KV_HIGH:
            return ()
        itl = _itl_slo(ctx)
        stages = tuple(s for s in ("engine_queue", "prefill") if ctx.stage_matters(s))
        if not stages and itl is None:
            return ()
        ev = [gauge_evidence(kv, "KV-cache usage", threshold=T.KV_NEAR_FULL)]
        weights = [T.W_KV_FULL if kv.max >= T.KV_FULL else T.W_KV_HIGH]
        pre = sig.incident.counters.get("preemptions")
        if pre is not None:
            ev.append(
                Evidence(
                    "vllm:num_preemptions_total",
                    round(pre, 1),
                    f"{pre:.0f} preemptions (requests evicted and recomputed) in the incident",
                    source="metric",
                    threshold=0,
                )
            )
            if F.preempting(sig):
                weights.append(T.W_PREEMPTIONS)
        if kv.mean >= T.KV_HIGH:
            weights.append(T.W_KV_HIGH_MEAN)
        if stages and F.outputs_grew(sig):
            weights.append(T.W_KV_LONGER_OUTPUTS)
            ev.append(
                Evidence(
                    "request.output_tokens_mean",
                    round(sig.incident.output_tokens_mean or 0.0, 1),
                    "outputs grew against the baseline while prompts did not: each request "
                    "holds its cache blocks through a longer decode, so fewer requests fit",
                    source="span" if sig.incident.requests else "metric",
                    threshold=round((sig.baseline.output_tokens_mean or 0.0), 1)
                    if sig.baseline
                    else None,
                )
            )
        limit = E.kv_limit(sig)
        if limit is not None:
            weights.append(T.W_KV_BOUND if limit.evicting else T.W_KV_ADMISSION)
            ev.append(Evidence(limit.signal, True, limit.detail, source="metric"))
        elif E.compute_bound(sig):
            # a full cache is what a pinned, busy batch looks like too (long outputs, RAG
            # prompts): without evictions and idle compute it is a symptom of the compute limit
            weights = [w * T.KV_KEEP_COMPUTE_BOUND for w in weights]
        per_replica = F.load_per_replica_grew(sig)
        more_per_replica = F.arrivals_per_replica_grew(sig) or capacity_dipped(ctx)
        if more_per_replica and F.demand_per_request_grew(sig) is False:
            # requests are no heavier, there are just more per replica: the fleet is short
            weights = [w * T.KV_KEEP_LOAD_DRIVEN for w in weights]
            ev.append(
                Evidence(
                    LOAD_DRIVEN,
                    True,
                    "arrivals per serving replica grew (without per-replica counts: the "
                    "fleet's arrivals; or a rollout took replicas away) while each request "
                    "asks for no more tokens than in the baseline: the cache fills because "
                    "replicas are short",
                    source="metric" if per_replica is None else "span",
                )
            )
        before = sig.baseline.gauge("kv_usage") if sig.baseline else None
        if (
            before is not None
            and kv.mean < before.mean + T.KV_ROSE
            and not F.preempting(sig)
            and F.demand_per_request_grew(sig) is False
        ):
            # as full before the breach, nothing evicted, requests no heavier: not what changed
            weights = [w * T.KV_KEEP_UNCHANGED for w in weights]
            ev.append(gauge_evidence(before, "KV-cache usage in the baseline, as high as now"))
        ev.extend(stage_evidence(ctx, *stages))
        impact = ctx.stage_explained(*stages)
        if itl is not None:
            impact = max(impact, _itl_excess(itl) * _evicted_tail_share(sig, itl, pre))
        return (
            finding(
                self,
                ctx,
                stage=stages[0] if stages else "decode",
                confidence=combine(*weights),
                summary=(
                    f"KV-cache pressure: usage peaks at {kv.max:.0%}"
                    + (f" with {pre:.0f} preemptions" if pre else "")
                    + "; requests wait for cache blocks and evicted ones are recomputed."
                ),
                evidence=ev,
                impact=impact,
                metric=itl.spec.metric if itl is not None and not stages else None,
            ),
        )


@dataclass(frozen=True)
class DecodeMemoryBound:
    """Each decode step is bound by HBM bandwidth: large running batches with long contexts."""

    name: str = "decode_memory_bound"
    category: Category = "decode_memory_bound"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        slo = _itl_slo(ctx)
        if slo is None:
            return ()
        sig = ctx.signals
        ev = [_slo_evidence(slo)]
        weights = [T.W_DECODE_BREACH]
        dram = sig.incident.gauge("gpu_dram")
        running = sig.incident.gauge("running")
        base_running = sig.baseline.gauge("running") if sig.baseline else None
        growth = (
            running.mean / max(base_running.mean, 1e-9)
            if running is not None and base_running is not None
            else 1.0
        )
        if dram is not None:
            ev.append(gauge_evidence(dram, "HBM bandwidth busy", threshold=T.DRAM_BUSY))
            if dram.mean >= T.DRAM_BUSY:
                weights.append(T.W_HBM_BUSY)
            elif dram.mean < T.HBM_QUIET and growth < T.DECODE_BATCH_GROWTH:
                weights = [T.W_DECODE_UNSUPPORTED]
        if running is not None:
            ev.append(gauge_evidence(running, "requests decoded per step"))
            # each step reads the KV cache of every running sequence: more of them, longer step
            if growth >= T.DECODE_BATCH_GROWTH:
                weights.append(
                    T.W_BATCH_DOUBLED if growth >= T.DECODE_BATCH_DOUBLED else T.W_BATCH_GREW
                )
        inter = sig.interference
        # decodes beside long prefills are slower: a minority's stalls - unless the whole mix
        # got longer (the median as much as the mean: no long tail joined), when every step
        # is heavier and "beside a long prefill" only marks the busier steps
        mix, mean_shift = F.prompt_mix_shift(sig), _prompt_shift(ctx)
        whole_mix = (
            mix is not None
            and mix >= T.PROMPT_SHIFT
            and (mean_shift is None or mean_shift < T.PROMPT_SHIFT * mix)
        )
        interfering = (
            inter is not None and inter.tpot_ratio >= T.INTERFERENCE_TPOT_RATIO and not whole_mix
        ) or F.long_prompt_minority(sig)
        tracks = batch_tpot(ctx)
        if tracks is not None:
            ev.append(
                Evidence(
                    "request.corr_tpot_running_batch",
                    round(tracks.r, 2),
                    f"TPOT {'tracks' if tracks.r >= T.TPOT_TRACKS_BATCH else 'does not track'} "
                    f"the running batch each request decoded in (Pearson r = {tracks.r:.2f} "
                    f"over {tracks.requests} requests)",
                    source="span",
                    threshold=T.TPOT_TRACKS_BATCH,
                )
            )
            # a wide TP group's all-reduce grows with the batch too, and so do the prefill
            # chunks a busy batch shares its steps with: in either case it tells nothing
            if (
                tracks.r >= T.TPOT_TRACKS_BATCH
                and (sig.gpus_per_replica or 1) < T.TP_WIDE_GPUS
                and not interfering
            ):
                weights.append(T.W_TPOT_TRACKS_BATCH)
        if interfering:
            # token gaps follow others' prefills
            weights = [w * T.DECODE_KEEP_INTERFERENCE for w in weights]
        nv = sig.incident.gauge("nvlink_bytes")
        if (nv is not None and dram is not None and dram.mean < T.HBM_HALF_IDLE) or tp_suspect(ctx):
            # HBM idle on a wide TP group: communication
            weights = [w * T.DECODE_KEEP_TP for w in weights]
        return (
            finding(
                self,
                ctx,
                stage="decode",
                confidence=combine(*weights),
                summary=(
                    f"Decode is memory-bandwidth bound: p{slo.spec.percentile:g} "
                    f"{slo.spec.metric} {ms(slo.observed)} against {ms(slo.spec.threshold)}; "
                    f"every step re-reads the weights and the batch's KV cache."
                ),
                evidence=ev,
                impact=_itl_excess(slo),
                metric=slo.spec.metric,
                next_steps=()
                if dram is not None
                else ("export DCGM_FI_PROF_DRAM_ACTIVE to confirm the memory-bound step",),
            ),
        )


def _slo_evidence(slo: SloResult) -> Evidence:
    return Evidence(
        f"slo.{slo.spec.metric}_p{slo.spec.percentile:g}",
        None if slo.observed is None else round(slo.observed * 1000, 2),
        f"observed {ms(slo.observed)} against {ms(slo.spec.threshold)}",
        source="derived",
        threshold=round(slo.spec.threshold * 1000, 2),
    )


def tp_suspect(ctx: DiagnosisContext) -> bool:
    """Several GPUs per replica whose HBM is under-used: steps wait on communication."""
    sig = ctx.signals
    dram = sig.incident.gauge("gpu_dram")
    return (
        (sig.gpus_per_replica or 1) >= T.TP_WIDE_GPUS
        and dram is not None
        and dram.mean < T.TP_DRAM_IDLE
    )


def _traffic_per_token(w: WindowSignals) -> float | None:
    """Interconnect bytes per generated token in one window (the engine's token counter, else
    the sampled requests' tokens: only the ratio between windows of one capture is read)."""
    nv = w.gauge("nvlink_bytes")
    tokens = w.rate("generation_tokens_counter") or w.output_tokens_per_s
    if nv is None or tokens <= 0:
        return None
    return nv.mean / tokens


def _comm_grew(inc: WindowSignals, base: WindowSignals) -> Evidence | None:
    """Evidence that communication, not the GPUs' own work, is what changed since the
    baseline: interconnect bytes per generated token grew, or the steps slowed while HBM got
    less busy and the SMs stayed short of busy; else None."""
    now, before = _traffic_per_token(inc), _traffic_per_token(base)
    if now is not None and before and now >= T.TP_TRAFFIC_GROWTH * before:
        return Evidence(
            "nvlink_bytes_per_token",
            round(now / before, 2),
            f"interconnect traffic per generated token {now / before:.2f}x the baseline's",
            source="metric",
            threshold=T.TP_TRAFFIC_GROWTH,
        )
    dram, dram_base = inc.gauge("gpu_dram"), base.gauge("gpu_dram")
    busy = inc.gauge("gpu_busy")
    if (
        dram is not None
        and dram_base is not None
        and dram.mean < min(dram_base.mean, T.TP_DRAM_IDLE)
        and (busy is None or busy.mean < T.GPU_BUSY)
    ):
        return Evidence(
            "gpu_dram.change",
            round(dram.mean - dram_base.mean, 3),
            f"HBM activity fell from {dram_base.mean:.2f} to {dram.mean:.2f} while token gaps "
            "stretched and the SMs stayed short of busy: steps wait on communication",
            source="metric",
        )
    return None


@dataclass(frozen=True)
class TensorParallelOverhead:
    """All-reduce traffic, not HBM or compute, sets the step time: a tensor-parallel degree too
    high for the interconnect (or placement across a slow link).  Every step pays it, so it is
    an ITL-tree cause: it stretches token gaps; a TTFT breach has causes of its own.

    Interconnect traffic and half-idle HBM are normal on any TP group, so levels alone prove
    nothing.  With a baseline window communication must be what changed: the traffic per
    generated token grew, or the steps slowed while HBM got less busy.  Without one (a chronic
    breach) the HBM must not be busy enough to make the step memory-bound (SM "utilisation"
    counts kernels waiting on NCCL, so it is shown, not tested); a wide group then outweighs
    a memory-bound decode that no growth supports."""

    name: str = "tensor_parallel_overhead"
    category: Category = "tensor_parallel_overhead"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        sig = ctx.signals
        nv = sig.incident.gauge("nvlink_bytes")
        dram = sig.incident.gauge("gpu_dram")
        busy = sig.incident.gauge("gpu_busy")
        gpus = sig.gpus_per_replica or 1
        slo = _itl_slo(ctx)
        if gpus < 2 or slo is None or _itl_excess(slo) <= 0:
            return ()
        if dram is not None and dram.mean >= T.DRAM_BUSY:
            return ()  # HBM busy enough to set the step time: memory-bound decode
        ev = [
            _slo_evidence(slo),
            Evidence(
                "DCGM gpu labels per pod",
                gpus,
                f"each replica spans {gpus} GPUs (tensor/pipeline parallel)",
                source="metric",
            ),
        ]
        weights = [T.W_TP_WIDE if gpus >= T.TP_WIDE_GPUS else T.W_TP_NARROW]
        if sig.baseline is not None:
            grown = _comm_grew(sig.incident, sig.baseline)
            if grown is None:
                return ()  # the same TP ran within the SLO before: it is not what changed
            ev.append(grown)
            weights.append(T.W_COMM_GREW)
        if nv is not None:
            ev.append(gauge_evidence(nv, "interconnect traffic (all-reduce)"))
            weights.append(T.W_NVLINK_SEEN)
        if dram is not None:
            ev.append(gauge_evidence(dram, "HBM bandwidth busy", threshold=T.TP_DRAM_IDLE))
            if dram.mean < T.TP_DRAM_IDLE:
                weights.append(T.W_TP_HBM_IDLE)
        if busy is not None:
            ev.append(gauge_evidence(busy, "GPUs busy"))
        steps = () if nv is not None else ("export DCGM_FI_PROF_NVLINK_TX_BYTES to measure it",)
        return (
            finding(
                self,
                ctx,
                stage="decode",
                confidence=combine(*weights),
                summary=(
                    f"Tensor-parallel overhead: each replica spans {gpus} GPUs whose HBM is "
                    f"under-used, so steps wait on all-reduce traffic; p{slo.spec.percentile:g} "
                    f"{slo.spec.metric} {ms(slo.observed)}."
                ),
                evidence=ev,
                impact=_itl_excess(slo),
                metric=slo.spec.metric,
                next_steps=steps,
            ),
        )


@dataclass(frozen=True)
class PrefillInterference:
    """Long prompts, a minority, are prefilled in the same steps as everyone else's decode and
    queue: token gaps stretch (ITL) and short requests wait behind the long chunks (TTFT)."""

    name: str = "prefill_interference"
    category: Category = "prefill_interference"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        inter = ctx.signals.interference
        # the tail lift alone is confounded (long decodes overlap more prefills by chance);
        # the per-token slowdown of overlapped requests is the signal, and a long-prompt
        # minority (mean prompt up, median not) where sampling hides the overlaps
        overlap = inter is not None and inter.tpot_ratio >= T.INTERFERENCE_TPOT_RATIO
        minority = bool(F.long_prompt_minority(ctx.signals))
        if not overlap and not minority:
            return ()
        slo = _itl_slo(ctx)
        ttft = next(iter(ctx.breached("ttft")), None)
        itl_norm = _itl_excess(slo) / slo.spec.threshold if slo is not None else 0.0
        engine = ctx.stage_explained("engine_queue", "prefill")
        ttft_norm = engine / ttft.spec.threshold if ttft is not None else 0.0
        if itl_norm <= 0 and ttft_norm <= 0:
            return ()
        use_ttft = ttft is not None and ttft_norm > itl_norm
        if use_ttft and not minority:
            # slower decode next to long prefills does not show that first tokens waited on
            # them, and with no long-prompt minority joining nothing about it changed: the
            # first tokens' wait is another cause's; only token gaps are claimed
            if itl_norm <= 0:
                return ()
            use_ttft = False
        shown = ttft if use_ttft else slo
        assert shown is not None
        weights: list[float] = []
        ev = [_slo_evidence(shown)]
        if inter is not None and overlap:
            weights += [
                T.W_INTERFERENCE,
                min(
                    max(inter.tpot_ratio - 1.0, 0.0) * T.W_INTERFERENCE_PER_SLOWDOWN,
                    T.W_INTERFERENCE_MAX,
                ),
            ]
            ev += [
                Evidence(
                    "decode_overlaps_long_prefill.tpot_ratio",
                    round(inter.tpot_ratio, 2),
                    f"requests decoding while a prompt of >= {inter.long_prompt_tokens:.0f} "
                    f"tokens was prefilled on the same replica were {inter.tpot_ratio:.2f}x "
                    f"slower per token ({inter.overlapped} vs {inter.clean} requests)",
                    source="span",
                    threshold=T.INTERFERENCE_TPOT_RATIO,
                ),
                Evidence(
                    "decode_overlaps_long_prefill.tail_lift",
                    round(inter.tail_lift, 2),
                    f"such requests are {inter.tail_lift:.1f}x over-represented among the "
                    f"slowest 5 %",
                    source="span",
                    threshold=T.INTERFERENCE_TAIL_LIFT,
                ),
            ]
        if minority:
            weights.append(T.W_LONG_PROMPT_MINORITY)
            inc, base = ctx.signals.incident, ctx.signals.baseline
            assert base is not None
            ev.append(
                Evidence(
                    "request.prompt_tokens_mean_vs_median",
                    round(inc.prompt_tokens_mean or 0.0, 1),
                    f"mean prompt {inc.prompt_tokens_mean or 0:.0f} tokens (baseline "
                    f"{base.prompt_tokens_mean or 0:.0f}) while the median stayed at "
                    f"{inc.prompt_tokens_median or 0:.0f} ({base.prompt_tokens_median or 0:.0f}):"
                    f" a minority of long prompts joined",
                    source="span",
                    threshold=round(T.PROMPT_SHIFT * (base.prompt_tokens_mean or 0.0), 1),
                )
            )
        ev += list(stage_evidence(ctx, "engine_queue", "prefill"))
        mix = F.prompt_mix_shift(ctx.signals)
        if mix is not None and mix >= T.PROMPT_SHIFT:
            # the typical prompt grew, not a minority: every prefill is longer (prompt compute)
            weights = [w * T.INTERFERENCE_KEEP_MIX_SHIFT for w in weights]
        return (
            finding(
                self,
                ctx,
                stage="decode" if not use_ttft else "engine_queue",
                confidence=combine(*weights),
                summary=(
                    (
                        f"Prefill interference: a minority of long prompts (>= "
                        f"{inter.long_prompt_tokens:.0f} tokens) is prefilled in the same steps "
                        f"as the other requests' decode, stretching token gaps "
                        f"{inter.tpot_ratio:.2f}x and queueing short requests"
                        if inter is not None and overlap
                        else "Prefill interference: a minority of long prompts joined (the mean "
                        "prompt grew, the median did not); their prefills share steps with the "
                        "other requests' decode and queue short requests"
                    )
                    + f"; p{shown.spec.percentile:g} {shown.spec.metric} {ms(shown.observed)}."
                ),
                evidence=ev,
                impact=engine if use_ttft else _itl_excess(shown),
                metric=shown.spec.metric,
            ),
        )


for _rule in (
    PrefillCompute(),
    KvCachePressure(),
    DecodeMemoryBound(),
    TensorParallelOverhead(),
    PrefillInterference(),
):
    register(_rule)
