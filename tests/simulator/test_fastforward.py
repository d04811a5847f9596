"""Decode-only stretches run as one event give the same capture, byte for byte, as stepping
one event per engine step - whatever cuts them short (arrivals, scrapes, scale-downs, KV
pressure, rollouts)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.test_simulation import small_config, table_bytes
from tailtriage.simulator import fastforward, simulate
from tailtriage.simulator.batching import BatchLimits, ContinuousBatcher, Sequence
from tailtriage.simulator.config import from_dict


def config(**over: Any) -> dict[str, Any]:
    """``small_config`` with two replicas, longer outputs and a gentler ramp: long decode-only
    stretches for the fast path to take."""
    cfg: dict[str, Any] = small_config(name="ff", seed=3)
    cfg["pods"] = {**cfg["pods"], "initial_replicas": 2}
    healthy, incident = cfg["workload"]
    cfg["workload"] = [
        {**healthy, "arrivals": {"rate": 3},
         "output_tokens": {**healthy["output_tokens"], "median": 200, "max": 900}},
        {**incident, "arrivals": {"rate": 12}},
    ]  # fmt: skip
    cfg.update(over)
    return cfg


def both_ways(cfg: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes, int]:
    """The capture with stretches, the capture stepped one event per step, and how many steps
    the stretches skipped (so that a test sees they ran)."""
    skipped = 0
    settle = fastforward.settle

    def counting(run: fastforward.DecodeRun, steps: int, cpu: float) -> None:
        nonlocal skipped
        skipped += steps
        settle(run, steps, cpu)

    with monkeypatch.context() as m:
        m.setattr(fastforward, "settle", counting)
        fast = table_bytes(simulate(cfg))
    with fastforward.one_event_per_step():
        slow = table_bytes(simulate(cfg))
    return fast, slow, skipped


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    seed=st.integers(0, 10_000),
    routing=st.sampled_from(
        ["random", "round_robin", "least_request", "least_outstanding", "prefix_aware", "weighted"]
    ),
    limit=st.sampled_from([0, 6]),
    blocks=st.sampled_from([0, 300]),  # 0: sized from memory; 300: sequences are preempted
    step_mode=st.sampled_from(["roofline", "fitted"]),
)
def test_stretches_give_the_same_capture(
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    routing: str,
    limit: int,
    blocks: int,
    step_mode: str,
) -> None:
    cfg = from_dict(config(
        seed=seed,
        gateway={"routing": routing, "concurrency_limit": limit, "weights": [2.0, 1.0],
                 "weighted_from_s": 10.0},
        engine={"num_gpu_blocks": blocks},
        step_time={"mode": step_mode},
        rollouts=[{"at_s": 25, "max_surge": 0, "max_unavailable": 1}],
    ))  # fmt: skip
    fast, slow, skipped = both_ways(cfg, monkeypatch)
    assert skipped > 0
    assert fast == slow


def test_warm_up_and_scale_down_cut_stretches(monkeypatch: pytest.MonkeyPatch) -> None:
    # new pods warm up slower after Ready (not stretched); the HPA scales down mid-flight
    cfg = from_dict(config(
        pods={"initial_replicas": 1, "ready_warmup_s": 10, "ready_warmup_factor": 1.6,
              "drain_s": 1, "load_gb_s": 40.0},
        hpa={"enabled": True, "metric": "vllm:num_requests_running", "target": 6,
             "min_replicas": 1, "max_replicas": 4, "sync_period_s": 3, "scrape_interval_s": 5,
             "scrape_lag_s": 0, "scale_down": {"stabilization_s": 0, "pods": 0, "percent": 100}},
    ))  # fmt: skip
    fast, slow, skipped = both_ways(cfg, monkeypatch)
    assert skipped > 0
    assert fast == slow


def decoding_batcher(blocks: int) -> tuple[ContinuousBatcher, float]:
    """A batcher with sequences in decode (eight admitted), outputs ending at different steps."""
    b = ContinuousBatcher(BatchLimits(max_num_batched_tokens=4096), kv_blocks=blocks)
    for i in range(8):
        b.add(Sequence(str(i), prompt_tokens=100 + 37 * i, output_tokens=40 + 9 * i), 0.0)
    t = 0.0
    while b.waiting or b.prefilling:
        plan = b.schedule(t)
        assert plan is not None
        t += 0.01
        b.complete(plan, t)
    return b, t


def state(b: ContinuousBatcher) -> tuple[int, ...]:
    return (b.step_no, b.free_blocks, b.handed_out, b.generation_tokens_total, b.num_running)


@pytest.mark.parametrize("blocks", [200, 80])
def test_a_decode_run_completes_like_its_steps_one_by_one(blocks: int) -> None:
    a, t = decoding_batcher(blocks)
    b, _ = decoding_batcher(blocks)
    plan_a, plan_b = a.schedule(t), b.schedule(t)
    assert plan_a is not None and plan_b is not None
    k = a.decode_run(1000)
    assert 2 <= k < 1000  # something to skip, ended by a finish or by the blocks
    a.complete_decode_run(plan_a, k)
    for r in range(k):
        assert not b.complete(plan_b, t).finished
        if r < k - 1:
            plan_b = b.schedule(t)
            assert plan_b is not None and not plan_b.preempted
            assert plan_b.decode_seqs == plan_a.decode_seqs
    assert state(a) == state(b)
    next_a, next_b = a.schedule(t), b.schedule(t)
    assert next_a is not None and next_b is not None
    assert (next_a.decode_seqs, next_a.context_tokens, len(next_a.preempted)) == (
        next_b.decode_seqs, next_b.context_tokens, len(next_b.preempted))  # fmt: skip


def test_a_run_longer_than_allowed_is_refused() -> None:
    b, t = decoding_batcher(200)
    plan = b.schedule(t)
    assert plan is not None
    k = b.decode_run(1000)
    with pytest.raises(RuntimeError, match="decode-only run"):
        b.complete_decode_run(plan, k + 1)
    b.add(Sequence("late", prompt_tokens=50, output_tokens=5), t)
    assert b.decode_run(1000) == 0  # a waiting request: the next step admits it


@pytest.mark.parametrize(
    "engine",
    [
        {"max_num_seqs": 4},  # a queue waiting for a slot
        {"num_gpu_blocks": 250},  # ... for KV blocks, preempted heads with cached blocks
        {"num_gpu_blocks": 250, "chunked_prefill": False, "prefix_caching": False},
    ],
)
def test_stretches_while_a_queue_waits_give_the_same_capture(
    monkeypatch: pytest.MonkeyPatch, engine: dict[str, Any]
) -> None:
    cfg = from_dict(config(seed=11, engine=engine))
    waited = 0
    begin = fastforward.begin

    def noting(pod: Any, plan: Any, start: float, dt: float) -> fastforward.DecodeRun | None:
        nonlocal waited
        run = begin(pod, plan, start, dt)
        waited += run is not None and bool(pod.batcher.waiting)
        return run

    monkeypatch.setattr(fastforward, "begin", noting)
    fast, slow, _ = both_ways(cfg, monkeypatch)
    assert waited > 0  # stretches ran with requests waiting in front of the engine
    assert fast == slow


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    chunked=st.booleans(),
    reuse=st.booleans(),
    seqs=st.sampled_from([3, 64]),
)
def test_a_queue_judged_blocked_is_admitted_in_none_of_the_stretch(
    seed: int, chunked: bool, reuse: bool, seqs: int
) -> None:
    """Step a small engine one step at a time under random arrivals (KV tight, long prompts:
    preemptions and cached blocks); wherever a stretch would run with requests waiting, the
    steps it covers admit none of them."""
    rng = np.random.default_rng(seed)
    limits = BatchLimits(max_num_batched_tokens=256, max_num_seqs=seqs, chunked_prefill=chunked)
    b = ContinuousBatcher(limits, kv_blocks=90, reuse_freed=reuse)
    stretches = 0
    t, i = 0.0, 0
    for _ in range(600):
        if rng.random() < 0.15:
            prompt, out = int(rng.integers(20, 700)), int(rng.integers(5, 120))
            b.add(Sequence(str(i), prompt, out, cached_tokens=int(rng.integers(0, 64))), t)
            i += 1
        plan = b.schedule(t)
        if plan is None:
            t += 0.01
            continue
        k = b.decode_run(1000) if b.waiting else 0
        for _ in range(k - 1):  # the steps the stretch would skip, one by one
            t += 0.01
            assert not b.complete(plan, t).finished
            plan = b.schedule(t)
            assert plan is not None and not plan.chunks and not plan.preempted
        stretches += k > 1
        t += 0.01
        b.complete(plan, t)
    assert stretches > 0
