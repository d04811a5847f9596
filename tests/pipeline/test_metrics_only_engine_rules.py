"""Metrics-only scenes for the engine causes read from histograms alone
(``diagnosis.rules_metrics_engine``): Prometheus ``query_range`` files shaped as vLLM exports
them (``vllm:time_to_first_token_seconds``, ``vllm:request_prompt_tokens``,
``vllm:inter_token_latency_seconds``, one series per pod), no traces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from prometheus_files import (
    VLLM_ITL,
    VLLM_PHASE,
    VLLM_TTFT,
    gauge_rows,
    histogram_rows,
    write_query_range,
)
from tailtriage.pipeline.triage import triage
from tailtriage.store.input import load_capture

T0 = 1_767_261_600.0
STEP = 15.0
SCRAPES = 60
SLOW = range(30, 48)  # the incident's scrapes
#: vLLM's 1-2-5 buckets of the per-request token histograms
TOKEN_BUCKETS = tuple(float(m * 10**e) for e in range(5) for m in (1, 2, 5))
PODS = ("vllm-a", "vllm-b", "vllm-c")

Draw = Callable[[np.random.Generator, int, bool], np.ndarray]


def _times() -> list[float]:
    return [T0 + i * STEP for i in range(SCRAPES)]


def _series(rng: np.random.Generator, n: Callable[[int], int], draw: Draw) -> list[np.ndarray]:
    """Per scrape, ``n(i)`` observations drawn by ``draw(rng, n, in_incident)``."""
    return [draw(rng, 0 if i == 0 else n(i), i in SLOW) for i in range(SCRAPES)]


def _prompt_rows(lab: dict[str, str], prompts: list[np.ndarray]) -> list[dict[str, object]]:
    """One pod's prompt-token histogram (``vllm:request_prompt_tokens``)."""
    return histogram_rows("vllm:request_prompt_tokens", lab, TOKEN_BUCKETS, _times(), prompts)


def _phase_rows(
    lab: dict[str, str], queue: list[np.ndarray], prefill: list[np.ndarray]
) -> list[dict[str, object]]:
    """One pod's TTFT (queue + prefill), queue-time and prefill-time histograms."""
    ttft = [q + p for q, p in zip(queue, prefill, strict=True)]
    return [
        *histogram_rows("vllm:time_to_first_token_seconds", lab, VLLM_TTFT, _times(), ttft),
        *histogram_rows("vllm:request_queue_time_seconds", lab, VLLM_PHASE, _times(), queue),
        *histogram_rows("vllm:request_prefill_time_seconds", lab, VLLM_PHASE, _times(), prefill),
    ]


def _labels(pod: str) -> dict[str, str]:
    return {"engine": "0", "model_name": "llama", "namespace": "llm", "pod": pod}


def _imbalance_bundle(
    folder: Path,
    hot_weight: float,
    late_from: int = 0,
    hot_queue: tuple[float, float] = (0.5, 1.5),
    idle_until: int = 0,
) -> Path:
    """Three pods; in the incident the first takes ``hot_weight`` times the others' requests
    and its requests queue ``hot_queue`` seconds; with ``hot_weight == 1`` every pod queues
    alike.  The last pod is first scraped at scrape ``late_from`` (created then), and serves
    nothing before scrape ``idle_until`` (scraped while it loads)."""
    rng = np.random.default_rng(3)
    folder.mkdir(parents=True)
    rows: list[dict[str, object]] = []
    for k, pod in enumerate(PODS):
        weight = hot_weight if k == 0 else 1.0

        def n(i: int, w: float = weight, last: bool = k == len(PODS) - 1) -> int:
            if last and i < idle_until:
                return 0
            return int(40 * w) if i in SLOW else 40

        def queue(
            r: np.random.Generator,
            m: int,
            slow: bool,
            w: float = weight,
            fresh: bool = k == len(PODS) - 1 and idle_until > 0,
        ) -> np.ndarray:
            # a pod that just started serving has no backlog: its requests do not queue
            busy = slow and (w > 1.0 or hot_weight == 1.0) and not fresh
            return r.uniform(*hot_queue, m) if busy else r.uniform(0.001, 0.02, m)

        qs = _series(rng, n, queue)
        pf = _series(rng, n, lambda r, m, _s: r.uniform(0.05, 0.15, m))
        ttft = [q + p for q, p in zip(qs, pf, strict=True)]
        lab, first = _labels(pod), late_from if k == len(PODS) - 1 else 0
        t = _times()[first:]
        rows += histogram_rows("vllm:time_to_first_token_seconds", lab, VLLM_TTFT, t, ttft[first:])
        rows += histogram_rows("vllm:request_queue_time_seconds", lab, VLLM_PHASE, t, qs[first:])
        rows += histogram_rows("vllm:request_prefill_time_seconds", lab, VLLM_PHASE, t, pf[first:])
    write_query_range(folder / "vllm.json", rows)
    return folder


def test_one_replica_taking_the_load_is_load_imbalance_without_traces(tmp_path: Path) -> None:
    rep = triage(
        load_capture(_imbalance_bundle(tmp_path / "b", 3.0)), "p95 ttft < 400ms", whatif=False
    )
    assert rep.slos[0].source == "engine_histograms" and rep.slos[0].breached
    cats = [f.category for f in rep.findings]
    assert cats[0] == "load_imbalance", cats
    top = rep.findings[0]
    assert top.rule == "metrics_load_imbalance" and "vllm-a" in top.summary
    assert not {"gateway_queue", "ingress_network"} & set(cats)


def test_every_replica_slow_alike_is_not_load_imbalance(tmp_path: Path) -> None:
    rep = triage(
        load_capture(_imbalance_bundle(tmp_path / "b", 1.0)), "p95 ttft < 400ms", whatif=False
    )
    assert rep.slos[0].breached
    assert "load_imbalance" not in [f.category for f in rep.findings]


def test_a_pod_created_during_the_incident_is_not_load_imbalance(tmp_path: Path) -> None:
    cap = load_capture(_imbalance_bundle(tmp_path / "b", 3.0, late_from=SLOW.start + 6))
    rep = triage(cap, "p95 ttft < 400ms", whatif=False)
    assert rep.slos[0].breached
    assert "metrics_load_imbalance" not in [f.rule for f in rep.findings]


def test_a_pod_scraped_while_it_loads_is_exposed_from_its_first_request(tmp_path: Path) -> None:
    """The third pod's series exist from the start, but it serves only from the incident's
    middle (it was loading): its idle scrapes are not time it could take requests, so its
    exposure - what the count test weighs each replica's share by - starts at its first."""
    from tailtriage.analyses.engine_metrics import find_histograms
    from tailtriage.analyses.replica_histograms import per_replica
    from tailtriage.store import DuckDBStore

    mid = SLOW.start + (SLOW.stop - SLOW.start) // 2
    store = DuckDBStore(load_capture(_imbalance_bundle(tmp_path / "b", 1.0, idle_until=mid)))
    found = find_histograms(store, phases=False)
    assert found is not None
    ttft = found.engine_latencies["ttft"]
    lo, hi = T0 + SLOW.start * STEP, T0 + SLOW.stop * STEP
    reps = per_replica(store, ttft.family.name, (lo, hi), dict(ttft.family.where))
    assert reps["vllm-a"].exposure == hi - lo
    # first observed at scrape ``mid``: serving since the scrape before it
    assert reps["vllm-c"].exposure == hi - (T0 + (mid - 1) * STEP)


def test_a_replica_releasing_an_old_backlog_is_not_load_imbalance(tmp_path: Path) -> None:
    """In the incident one pod delivers three times the others' first tokens, each ~100 s
    after its request arrived: requests queued there before the window, now drained (the
    histogram counts a request when its first token comes), not routing in the window."""
    cap = load_capture(_imbalance_bundle(tmp_path / "b", 3.0, hot_queue=(80.0, 120.0)))
    rep = triage(cap, "p95 ttft < 400ms", whatif=False)
    assert rep.slos[0].source == "engine_histograms" and rep.slos[0].breached
    assert "load_imbalance" not in [f.category for f in rep.findings]


def _interference_bundle(folder: Path, long_share: float, shift: float) -> Path:
    """One pod; in the incident token gaps stretch while ``long_share`` of the prompts are
    ~10k tokens (a long-prompt minority) and the rest are ``shift`` times the usual length."""
    rng = np.random.default_rng(5)
    folder.mkdir(parents=True)

    def n(_i: int) -> int:
        return 60

    def prompts(r: np.random.Generator, m: int, slow: bool) -> np.ndarray:
        base = r.lognormal(np.log(600.0), 0.4, m)
        if not slow:
            return base
        long = r.uniform(size=m) < long_share
        return np.where(long, r.uniform(8000, 12000, m), base * shift)

    def gaps(r: np.random.Generator, m: int, slow: bool) -> np.ndarray:
        return r.uniform(0.04, 0.09, m * 20) if slow else r.uniform(0.015, 0.03, m * 20)

    lab = _labels("vllm-a")
    rows = [
        *_prompt_rows(lab, _series(rng, n, prompts)),
        *histogram_rows(
            "vllm:inter_token_latency_seconds", lab, VLLM_ITL, _times(), _series(rng, n, gaps)
        ),
    ]
    write_query_range(folder / "vllm.json", rows)
    return folder


def test_a_new_long_prompt_minority_beside_an_itl_breach_is_prefill_interference(
    tmp_path: Path,
) -> None:
    cap = load_capture(_interference_bundle(tmp_path / "b", long_share=0.15, shift=1.0))
    rep = triage(cap, "p95 itl < 50ms", whatif=False)
    assert rep.slos[0].source == "engine_histograms" and rep.slos[0].breached
    cats = [f.category for f in rep.findings]
    assert cats[0] == "prefill_interference", cats
    top = rep.findings[0]
    assert top.rule == "metrics_prefill_interference" and top.metric == "itl"
    assert any("new" in e.detail for e in top.evidence)


def test_prompts_that_all_grew_are_not_prefill_interference(tmp_path: Path) -> None:
    cap = load_capture(_interference_bundle(tmp_path / "b", long_share=0.0, shift=4.0))
    rep = triage(cap, "p95 itl < 50ms", whatif=False)
    assert rep.slos[0].breached
    assert "prefill_interference" not in [f.category for f in rep.findings]


def _kv_bundle(folder: Path, kv_before: float, surge: float = 1.0) -> Path:
    """One pod whose requests queue in the incident while its KV cache peaks at 97 %, after
    peaking at ``kv_before`` before it; in the incident it gets ``surge`` times the requests,
    whose prompts are as long as before."""
    rng = np.random.default_rng(9)
    folder.mkdir(parents=True)

    def n(i: int) -> int:
        return int(40 * surge) if i in SLOW else 40

    def queue(r: np.random.Generator, m: int, slow: bool) -> np.ndarray:
        return r.uniform(0.5, 1.5, m) if slow else r.uniform(0.001, 0.02, m)

    qs = _series(rng, n, queue)
    pf = _series(rng, n, lambda r, m, _s: r.uniform(0.05, 0.15, m))
    lab = _labels("vllm-a")
    kv = [0.97 if i in SLOW else kv_before for i in range(SCRAPES)]
    waiting = [6.0 if i in SLOW else 0.0 for i in range(SCRAPES)]
    rows = [
        *_phase_rows(lab, qs, pf),
        *gauge_rows("vllm:kv_cache_usage_perc", lab, _times(), kv),
        *gauge_rows("vllm:num_requests_waiting", lab, _times(), waiting),
        *_prompt_rows(lab, _series(rng, n, lambda r, m, _s: r.uniform(300, 700, m))),
    ]
    write_query_range(folder / "vllm.json", rows)
    return folder


def test_a_cache_filled_by_more_requests_of_the_same_size_is_not_kv_first(
    tmp_path: Path,
) -> None:
    """Twice the requests, none longer: the cache fills because the replicas are short, and
    more cache per replica would only move the queue - KV pressure is not the headline."""
    rep = triage(
        load_capture(_kv_bundle(tmp_path / "b", 0.3, surge=2.0)),
        "p95 ttft < 400ms",
        whatif=False,
    )
    assert rep.slos[0].breached
    kv = [f for f in rep.findings if f.rule == "metrics_kv_filling"]
    assert kv and kv[0].confidence < 0.5
    assert any(e.signal == "request.load_grew" for e in kv[0].evidence)


def test_a_kv_cache_that_filled_while_requests_waited_is_kv_pressure(tmp_path: Path) -> None:
    rep = triage(load_capture(_kv_bundle(tmp_path / "b", 0.3)), "p95 ttft < 400ms", whatif=False)
    assert rep.slos[0].source == "engine_histograms" and rep.slos[0].breached
    assert rep.findings[0].category == "kv_cache_pressure"
    assert "metrics_kv_filling" in [f.rule for f in rep.findings]


def test_a_kv_cache_that_was_always_full_is_not_what_changed(tmp_path: Path) -> None:
    rep = triage(load_capture(_kv_bundle(tmp_path / "b", 0.97)), "p95 ttft < 400ms", whatif=False)
    assert rep.slos[0].breached
    assert "metrics_kv_filling" not in [f.rule for f in rep.findings]


def _prompt_bundle(folder: Path, shift: float) -> Path:
    """One pod at the same request rate throughout; in the incident every prompt is
    ``shift`` times longer, requests queue 0.5-1.5 s and prefill a little longer."""
    rng = np.random.default_rng(11)
    folder.mkdir(parents=True)

    def n(_i: int) -> int:
        return 40

    def prompts(r: np.random.Generator, m: int, slow: bool) -> np.ndarray:
        return r.lognormal(np.log(600.0), 0.4, m) * (shift if slow else 1.0)

    qs = _series(
        rng, n, lambda r, m, slow: r.uniform(0.5, 1.5, m) if slow else r.uniform(0.001, 0.02, m)
    )
    pf = _series(
        rng, n, lambda r, m, slow: r.uniform(0.1, 0.25, m) if slow else r.uniform(0.05, 0.15, m)
    )
    lab = _labels("vllm-a")
    rows = [
        *_phase_rows(lab, qs, pf),
        *_prompt_rows(lab, _series(rng, n, prompts)),
    ]
    write_query_range(folder / "vllm.json", rows)
    return folder


def test_a_queue_behind_a_longer_prompt_mix_is_prefill_compute_without_traces(
    tmp_path: Path,
) -> None:
    # the median prompt comes from the prompt-token histogram (histogram_quantile 0.5)
    longer = triage(
        load_capture(_prompt_bundle(tmp_path / "a", 3.0)), "p95 ttft < 400ms", whatif=False
    )
    assert longer.slos[0].source == "engine_histograms" and longer.slos[0].breached
    assert longer.findings[0].category == "prefill_compute", [f.category for f in longer.findings]
    ev = {e.signal for e in longer.findings[0].evidence}
    assert "request.prompt_tokens_median" in ev
    same = triage(
        load_capture(_prompt_bundle(tmp_path / "b", 1.0)), "p95 ttft < 400ms", whatif=False
    )
    assert same.slos[0].breached
    assert same.findings[0].category != "prefill_compute"
