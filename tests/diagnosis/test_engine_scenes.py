"""Engine causes told apart by their discriminating signals when several look stretched
(issue 14, repair 7): a KV-heavy confounder next to a compute limit, a real KV limit, and
RAG-length prompts next to a compute limit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from builders import capture_from_arrays
from diagnosis.scenes import BASELINE, INCIDENT, context, decomposition, slo
from diagnosis.stack import FLEET_HASH, fleet_requests, in_incident, pod_gauge, pods
from tailtriage.diagnosis import diagnose
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.signals import Interference

FLEET = pods(FLEET_HASH, 3, seed=8)
BASE = {"ingress": 0.03, "engine_queue": 0.02, "prefill": 0.15}
QUEUED = {**BASE, "engine_queue": 0.6}
GPU = {"gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"}


def _engine(
    *,
    running: object,
    sm: float,
    kv: float,
    preempt_per_scrape: float,
    waiting: float,
    stages: dict[str, float] | None = None,
    prompts: np.ndarray | None = None,
    healthy: dict[str, float] | None = None,
    incident_requests: int = 900,
    outputs: np.ndarray | None = None,
    kv_before: float = 0.4,
    kv_of: Callable[[str, float, np.random.Generator], float] | None = None,
    waiting_of: Callable[[str, float, np.random.Generator], float] | None = None,
) -> DiagnosisContext:
    inc = stages or QUEUED
    before = healthy or BASE
    cap = fleet_requests(
        FLEET,
        per_window=900,
        baseline_stages={**before, "decode": 4.0},
        incident_stages={**inc, "decode": 4.0},
        seed=31,
        prompt_tokens=prompts,
        incident_per_window=incident_requests,
        output_tokens=outputs,
    )
    rows = pod_gauge("vllm:num_requests_running", FLEET, running)  # type: ignore[arg-type]
    rows += pod_gauge(
        "DCGM_FI_PROF_SM_ACTIVE",
        FLEET,
        lambda p, t, r: sm if in_incident(t) else 0.5,
        extra_labels=GPU,
    )
    rows += pod_gauge(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        FLEET,
        lambda p, t, r: sm * 0.6 if in_incident(t) else 0.3,
        extra_labels=GPU,
    )
    rows += pod_gauge(
        "vllm:kv_cache_usage_perc",
        FLEET,
        kv_of
        or (lambda p, t, r: min((kv if in_incident(t) else kv_before) + r.normal(0, 0.01), 1.0)),
    )
    rows += pod_gauge(
        "vllm:num_preemptions_total",
        FLEET,
        lambda p, t, r: max(t - INCIDENT[0], 0.0) / 15.0 * preempt_per_scrape,
    )
    rows += pod_gauge(
        "vllm:num_requests_waiting",
        FLEET,
        waiting_of
        or (lambda p, t, r: waiting * (t - INCIDENT[0]) / 300.0 if in_incident(t) else 0.0),
    )
    base = {k: before[k] for k in inc}
    return context(cap, [slo("ttft", 0.5, 0.9)], decomposition(inc, base), series_rows=rows)


def _pinned(p: str, t: float, r: np.random.Generator) -> float:
    """At max_num_seqs=256 in the incident; a free, Poisson-like batch before."""
    return 256.0 if in_incident(t) else float(r.poisson(90))


def _free(p: str, t: float, r: np.random.Generator) -> float:
    """The scheduler admits what fits in the cache: the batch swings."""
    return float(r.integers(20, 120)) if in_incident(t) else float(r.poisson(90))


def test_long_outputs_filling_the_cache_next_to_a_compute_limit_is_compute() -> None:
    # long generations keep the KV cache ~90 % full, but nothing is evicted; the batch is
    # pinned at its cap on busy SMs
    ctx = _engine(running=_pinned, sm=0.95, kv=0.92, preempt_per_scrape=0.0, waiting=30.0)
    cats = [f.category for f in diagnose(ctx)]
    assert cats[0] == "compute_saturation", cats


def test_a_full_preempting_cache_with_idle_compute_is_kv_pressure() -> None:
    ctx = _engine(running=_free, sm=0.5, kv=0.985, preempt_per_scrape=4.0, waiting=30.0)
    cats = [f.category for f in diagnose(ctx)]
    assert cats[0] == "kv_cache_pressure", cats


def test_a_full_cache_that_admits_nothing_new_does_not_prove_saturation() -> None:
    """Long prompts keep the SMs busy (97 %) while the cache sits full and the batch swings
    below its cap; nothing is evicted (vLLM V1 holds a request whose prompt's blocks do not
    fit).  The queue is the cache's: no scale-out on a compute proof."""
    from tailtriage.diagnosis.rules_saturation import saturation_proof

    ctx = _engine(running=_free, sm=0.97, kv=0.97, preempt_per_scrape=0.0, waiting=30.0)
    proof = saturation_proof(ctx)
    assert not proof.proven
    assert any("below its cap" in r for r in proof.reasons)
    kv = next(f for f in diagnose(ctx) if f.category == "kv_cache_pressure")
    assert any(e.signal == "engine.kv_limits_admission" for e in kv.evidence)
    # the same busy SMs with the batch pinned at its cap and a roomier cache: proven
    pinned = _engine(running=_pinned, sm=0.97, kv=0.8, preempt_per_scrape=0.0, waiting=30.0)
    assert saturation_proof(pinned).proven


def test_a_queue_that_met_a_full_cache_on_one_replica_is_the_caches() -> None:
    """One replica of three queues (a random split's unlucky side) behind a cache at 97 %,
    its SMs busy with long prefills; the other two idle with roomy caches.  The fleet's mean
    usage (~0.4) says nothing; where requests waited the cache was full: admission was held
    for blocks, so no compute proof and the KV rule carries the admission evidence."""
    from tailtriage.diagnosis.rules_saturation import saturation_proof

    hot = FLEET[0]

    def kv_of(p: str, t: float, r: np.random.Generator) -> float:
        full = in_incident(t) and p == hot
        return min((0.97 if full else 0.12) + r.normal(0, 0.01), 1.0)

    def waiting_of(p: str, t: float, r: np.random.Generator) -> float:
        return 90.0 * (t - INCIDENT[0]) / 300.0 if in_incident(t) and p == hot else 0.0

    ctx = _engine(
        running=_free, sm=0.97, kv=0.0, preempt_per_scrape=0.0, waiting=0.0,
        kv_of=kv_of, waiting_of=waiting_of,
    )  # fmt: skip
    kv = ctx.signals.incident.gauge("kv_usage")
    assert kv is not None and kv.mean < T.KV_HIGH_MEAN_ADMISSION
    met = ctx.signals.incident.kv_when_waiting
    assert met is not None and met > 0.95
    assert not saturation_proof(ctx).proven
    finding = next(f for f in diagnose(ctx) if f.category == "kv_cache_pressure")
    assert any(e.signal == "engine.kv_limits_admission" for e in finding.evidence)


def test_rag_length_prompts_next_to_a_compute_limit_are_not_prefill_compute() -> None:
    # RAG prompts (3-5k tokens) in both windows: prefill is a large, unchanged share of TTFT;
    # the queue in front of a pinned batch is what grew
    rng = np.random.default_rng(2)
    prompts = rng.integers(3000, 5000, 1800)
    rag = {"ingress": 0.03, "engine_queue": 0.02, "prefill": 0.4}
    ctx = _engine(
        running=_pinned,
        sm=0.95,
        kv=0.8,
        preempt_per_scrape=0.0,
        waiting=30.0,
        stages={**rag, "engine_queue": 0.6},
        prompts=prompts,
        healthy=rag,
    )
    cats = [f.category for f in diagnose(ctx)]
    assert cats[0] == "compute_saturation", cats


def _kv_full(incident_requests: int, prompts: np.ndarray | None) -> DiagnosisContext:
    return _engine(
        running=_free,
        sm=0.5,
        kv=0.985,
        preempt_per_scrape=4.0,
        waiting=30.0,
        prompts=prompts,
        incident_requests=incident_requests,
    )


def test_a_cache_filled_by_more_requests_per_replica_is_not_kv_pressure_first() -> None:
    # the same full, preempting cache: once from requests three times as long at the
    # baseline's rate (the cache is too small for them), once from twice the requests on the
    # same replicas, each as long as before (the fleet is short of replicas)
    rng = np.random.default_rng(4)
    heavier = np.concatenate([rng.integers(400, 600, 900), rng.integers(1200, 1800, 900)])
    as_before = rng.integers(400, 600, 900 + 1800)
    by_demand = _kv_full(900, heavier)
    by_load = _kv_full(1800, as_before)

    def kv(ctx: DiagnosisContext) -> float:
        return next(f.confidence for f in diagnose(ctx) if f.category == "kv_cache_pressure")

    assert diagnose(by_demand)[0].category == "kv_cache_pressure"
    # each sign kept at KV_KEEP_LOAD_DRIVEN; their noisy-OR falls by less than that
    assert kv(by_load) < (1 + T.KV_KEEP_LOAD_DRIVEN) / 2 * kv(by_demand)
    load_ev = [
        e.signal for f in diagnose(by_load) if f.category == "kv_cache_pressure" for e in f.evidence
    ]
    assert "request.load_per_replica_grew" in load_ev


def test_a_longer_prefill_without_longer_prompts_is_not_prefill_compute() -> None:
    # prefill grew 3x in both scenes; only in the second did the prompts grow with it
    slow = {"ingress": 0.03, "engine_queue": 0.05, "prefill": 0.45}
    rng = np.random.default_rng(6)
    same = rng.integers(400, 600, 1800)
    longer = np.concatenate([rng.integers(400, 600, 900), rng.integers(1300, 1700, 900)])

    def first(prompts: np.ndarray) -> str:
        ctx = _engine(
            running=_free,
            sm=0.6,
            kv=0.5,
            preempt_per_scrape=0.0,
            waiting=0.0,
            stages=slow,
            prompts=prompts,
        )
        return diagnose(ctx)[0].category

    assert first(longer) == "prefill_compute"
    assert first(same) != "prefill_compute"


def _tpot_breach(prompts: np.ndarray) -> DiagnosisContext:
    cap = fleet_requests(
        FLEET,
        per_window=900,
        baseline_stages={**BASE, "decode": 4.0},
        incident_stages={**BASE, "decode": 6.0},
        seed=33,
        prompt_tokens=prompts,
    )
    return context(cap, [slo("tpot", 0.03, 0.045)], decomposition(BASE, BASE))


def test_a_long_prompt_minority_is_interference_and_a_longer_mix_is_not() -> None:
    # token gaps breach their SLO; sampled traces show no overlap statistics worth a test,
    # only the prompt lengths: 15 % of the incident's prompts at ~10k tokens (the mean
    # quadruples, the median stays), against every prompt four times longer
    rng = np.random.default_rng(8)
    typical = rng.integers(300, 700, 1800)
    minority = typical.copy()
    minority[900:][rng.random(900) < 0.15] = 10000
    mix = np.concatenate([typical[:900], typical[900:] * 4])
    found = diagnose(_tpot_breach(minority))
    assert found[0].category == "prefill_interference", [f.category for f in found]
    signals = {e.signal for e in found[0].evidence}
    assert "request.prompt_tokens_mean_vs_median" in signals
    longer = [f.category for f in diagnose(_tpot_breach(mix))]
    assert longer and "prefill_interference" not in longer, longer


def _batch_bound(tied: bool, gpus: int = 1, prompts: np.ndarray | None = None) -> DiagnosisContext:
    """Token gaps breach their SLO while each replica's running batch ramps 40 -> 120 through
    the incident; with ``tied`` every request's TPOT follows the batch it decoded in (a
    memory-bound step reads every running sequence), else it is drawn whatever the batch."""
    rng = np.random.default_rng(21)
    n = 1800
    arrival = np.sort(rng.uniform(BASELINE[0], INCIDENT[1], n))
    pod = rng.integers(0, len(FLEET), n)
    offset = np.array([0.0, 15.0, -15.0])

    def running(p: int, t: np.ndarray | float) -> np.ndarray:
        ramp = np.clip((np.asarray(t) - INCIDENT[0]) / 300.0, 0.0, 1.0)
        return 40.0 + offset[p] + 80.0 * ramp

    batch = np.array([running(int(p), float(t)) for p, t in zip(pod, arrival, strict=True)])
    noise = rng.lognormal(0.0, 0.15, n)
    per_token = (0.01 + 0.0003 * batch) * noise if tied else rng.uniform(0.022, 0.046, n) * noise
    stages = {
        "ingress": np.full(n, 0.03),
        "prefill": np.full(n, 0.15),
        "decode": 199 * per_token,
    }
    cap = capture_from_arrays(
        arrival,
        stages,
        replica=np.asarray(FLEET)[pod].tolist(),
        output_tokens=np.full(n, 200),
        prompt_tokens=prompts,
    )
    rows = pod_gauge(
        "vllm:num_requests_running",
        FLEET,
        lambda p, t, r: float(running(FLEET.index(p), t)),
    )
    for g in range(gpus if gpus > 1 else 0):  # DCGM: one series per GPU of each pod
        rows += pod_gauge(
            "DCGM_FI_DEV_GPU_UTIL", FLEET, lambda p, t, r: 90.0, extra_labels={"gpu": str(g)}
        )
    return context(cap, [slo("tpot", 0.03, 0.045)], None, series_rows=rows)


def _dmb_confidence(ctx: DiagnosisContext) -> float:
    return next(f.confidence for f in diagnose(ctx) if f.category == "decode_memory_bound")


def test_tpot_tracking_the_batch_on_a_wide_tp_group_proves_nothing() -> None:
    # on 4 GPUs per replica the all-reduce per step grows with the batch too
    wide_tied, wide_free = (_dmb_confidence(_batch_bound(t, gpus=4)) for t in (True, False))
    assert wide_tied == pytest.approx(wide_free)


def test_tpot_tracking_the_batch_beside_long_prefills_proves_nothing() -> None:
    # a busy batch also shares its steps with more prefill chunks: where the incident carries
    # a long-prompt minority (others' prefills), the correlation is no memory-bound proof
    rng = np.random.default_rng(5)
    prompts = rng.integers(300, 700, 1800)
    prompts[900:][rng.random(900) < 0.15] = 10000  # in the later half: the incident
    tied, free = (_dmb_confidence(_batch_bound(t, prompts=prompts)) for t in (True, False))
    assert tied == pytest.approx(free)


def test_tpot_tracking_the_batch_counts_when_the_whole_prompt_mix_grew() -> None:
    # every incident prompt four times longer (the median too): decodes beside a long
    # prefill are just the incident's, so a TPOT that follows the batch is the proof again
    rng = np.random.default_rng(5)
    prompts = rng.integers(300, 700, 1800)
    prompts[900:] *= 4
    # ... and decodes beside a long prefill were 1.6x slower (what the span overlap shows in
    # such an incident: the overlapped ones are the incident's busier steps)
    beside = Interference(
        long_prompt_tokens=2000.0, overlapped=500, clean=400, tpot_ratio=1.6, tail_lift=2.0
    )

    def conf(tied: bool, mix: np.ndarray) -> float:
        ctx = _batch_bound(tied, prompts=mix)
        signals = dataclasses.replace(ctx.signals, interference=beside)
        return _dmb_confidence(dataclasses.replace(ctx, signals=signals))

    assert conf(True, prompts) > conf(False, prompts)
    # the median doubled and a long tail joined too (the mean grew far more): the long
    # prompts' stalls are back in play, and the correlation proves nothing again
    tail = rng.integers(300, 700, 1800)
    tail[900:] *= 2
    tail[900:][rng.random(900) < 0.15] = 12000
    assert conf(True, tail) == pytest.approx(conf(False, tail))


def test_tpot_following_the_running_batch_is_memory_bound_decode() -> None:
    def evidence(ctx: DiagnosisContext) -> tuple[float, float]:
        found = {f.category: f for f in diagnose(ctx)}
        dmb = found["decode_memory_bound"]
        ev = {e.signal: e.value for e in dmb.evidence}
        return float(ev["request.corr_tpot_running_batch"] or 0.0), dmb.confidence

    r_tied, conf_tied = evidence(_batch_bound(tied=True))
    r_free, conf_free = evidence(_batch_bound(tied=False))
    assert r_tied >= T.TPOT_TRACKS_BATCH > r_free, (r_tied, r_free)
    assert conf_tied > conf_free


def _kv_evidence(ctx: DiagnosisContext) -> dict[str, object]:
    found = next(f for f in diagnose(ctx) if f.category == "kv_cache_pressure")
    return {e.signal: e.source for e in found.evidence} | {"confidence": found.confidence}


def test_a_few_evictions_across_the_fleet_are_no_kv_bound_engine() -> None:
    # the same cache touching full: once evicting every scrape on every replica, once a
    # couple of sequences in the whole incident (fewer than one per replica, well under
    # PREEMPTION_SHARE_MIN of the requests): a momentary peak, not admission held back
    churning = _kv_evidence(_kv_full(900, None))
    blip = _kv_evidence(
        _engine(running=_free, sm=0.5, kv=0.985, preempt_per_scrape=0.03, waiting=30.0)
    )
    assert "engine.kv_bound" in churning
    assert "engine.kv_bound" not in blip
    assert float(blip["confidence"]) < float(churning["confidence"])  # type: ignore[arg-type]


def test_without_per_replica_counts_more_fleet_arrivals_make_the_cache_load_driven() -> None:
    # a capture without request spans has no per-replica request counts: twice the fleet's
    # arrivals, each request as long as before, still says the fleet is short of replicas
    rng = np.random.default_rng(4)
    by_load = _kv_full(1800, rng.integers(400, 600, 900 + 1800))
    sig = by_load.signals
    assert sig.baseline is not None
    blind = dataclasses.replace(
        by_load,
        signals=dataclasses.replace(
            sig,
            incident=dataclasses.replace(sig.incident, replicas={}),
            baseline=dataclasses.replace(sig.baseline, replicas={}),
        ),
    )
    assert _kv_evidence(blind).get("request.load_per_replica_grew") == "metric"


def test_longer_outputs_with_unchanged_prompts_add_to_a_full_cache() -> None:
    # the cache touches full in both scenes; in the second each request generates 3.5x the
    # baseline's tokens from the same prompts: it holds its blocks through a longer decode
    rng = np.random.default_rng(8)
    prompts = rng.integers(400, 600, 1800)
    same = np.full(1800, 200)
    longer = np.concatenate([np.full(900, 200), np.full(900, 700)])

    def kv(outputs: np.ndarray) -> dict[str, object]:
        ctx = _engine(
            running=_free,
            sm=0.5,
            kv=0.985,
            preempt_per_scrape=0.0,
            waiting=30.0,
            prompts=prompts,
            outputs=outputs,
        )
        return _kv_evidence(ctx)

    flat, grown = kv(same), kv(longer)
    assert "request.output_tokens_mean" in grown
    assert "request.output_tokens_mean" not in flat
    assert float(grown["confidence"]) > float(flat["confidence"])  # type: ignore[arg-type]


def test_a_queue_behind_prompts_that_grew_at_the_same_traffic_is_prefill_compute() -> None:
    # the engine queue holds most of the tail (prefill alone is under PREFILL_SHARE_MIN);
    # nothing is evicted and the cache is half full.  Only in the first scene did every
    # prompt get three times longer at the baseline's rate: the queue is their compute
    rng = np.random.default_rng(9)
    heavier = np.concatenate([rng.integers(400, 600, 900), rng.integers(1200, 1800, 900)])
    as_before = rng.integers(400, 600, 1800)

    def ranked(prompts: np.ndarray) -> list[str]:
        ctx = _engine(
            running=_free, sm=0.6, kv=0.5, preempt_per_scrape=0.0, waiting=30.0, prompts=prompts
        )
        return [f.category for f in diagnose(ctx)]

    assert ranked(heavier)[0] == "prefill_compute", ranked(heavier)
    assert "prefill_compute" not in ranked(as_before), ranked(as_before)


def test_a_cache_as_full_before_the_breach_is_not_what_changed() -> None:
    # nothing evicted, requests as long as before; the cache ran ~90 % full in both windows
    # in one scene, rose from 40 % in the other
    def ranked(before: float) -> list[str]:
        ctx = _engine(
            running=_free, sm=0.5, kv=0.92, preempt_per_scrape=0.0, waiting=30.0, kv_before=before
        )
        return [f.category for f in diagnose(ctx)]

    assert ranked(0.4)[0] == "kv_cache_pressure", ranked(0.4)
    # kept at KV_KEEP_UNCHANGED it falls under the reporting floor
    assert "kv_cache_pressure" not in ranked(0.9), ranked(0.9)


def _evicting_tpot(evictions_per_pod: float) -> DiagnosisContext:
    """A TPOT breach on three pods whose caches run 97 % full in the incident (40 % before),
    each evicting ``evictions_per_pod`` sequences over it; the engines count 900 finished
    requests in each window (the traces, sampled, hold 300)."""
    cap = fleet_requests(
        FLEET,
        per_window=300,
        baseline_stages={**BASE, "decode": 4.0},
        incident_stages={**BASE, "decode": 6.0},
        seed=35,
    )
    rows = pod_gauge(
        "vllm:kv_cache_usage_perc", FLEET, lambda p, t, r: 0.97 if in_incident(t) else 0.4
    )
    rows += pod_gauge(
        "vllm:num_preemptions_total",
        FLEET,
        lambda p, t, r: min(max(t - INCIDENT[0], 0.0) / 300.0, 1.0) * evictions_per_pod,
    )
    rows += pod_gauge(
        "vllm:request_success_total",
        FLEET,
        lambda p, t, r: (t - BASELINE[0]) / 600.0 * 600.0,  # 300 per pod per window
    )
    return context(cap, [slo("tpot", 0.03, 0.045)], None, series_rows=rows)


def test_evictions_explain_a_token_gap_tail_only_as_far_as_they_reach() -> None:
    # 6 evictions among the incident's 900 finished requests (not the 300 traced) can set
    # 0.7 % / 5 % of a p95 TPOT tail; 60 reach all of it
    def share(evictions_per_pod: float) -> float:
        ctx = _evicting_tpot(evictions_per_pod)
        found = next(f for f in diagnose(ctx) if f.category == "kv_cache_pressure")
        return found.explained_share or 0.0

    few, many = share(2.0), share(20.0)
    assert many == pytest.approx(1.0)
    # about 0.13; counting only the traced requests would make it 0.4
    assert 0.08 < few < 0.2, few
