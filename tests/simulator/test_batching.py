"""The continuous-batching scheduler: budgets, KV blocks, preemption, token accounting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.errors import ConfigError
from tailtriage.simulator.batching import BatchLimits, ContinuousBatcher, Sequence
from tailtriage.simulator.steptime import GPUS, MODELS, RooflineStepTime

MODEL = RooflineStepTime(MODELS["llama-3.1-8b"], GPUS["H100"])


def drive(
    batcher: ContinuousBatcher, seqs: list[Sequence], arrivals: list[float]
) -> tuple[np.ndarray, int]:
    t, i, done, ends, max_tokens = 0.0, 0, 0, [], 0
    while done < len(seqs):
        while i < len(seqs) and arrivals[i] <= t:
            batcher.add(seqs[i], arrivals[i])
            i += 1
        plan = batcher.schedule(t)
        if plan is None:
            assert i < len(seqs), "scheduler stalled with work left"
            t = arrivals[i]
            continue
        max_tokens = max(max_tokens, plan.tokens)
        assert plan.decode_seqs + len(plan.chunks) <= batcher.limits.max_num_seqs
        t += MODEL.step_time(plan.prefill_tokens, plan.decode_seqs, plan.context_tokens)
        ends.append(t)
        done += len(batcher.complete(plan, t).finished)
        assert 0 <= batcher.free_blocks <= batcher.total_blocks
    return np.array(ends), max_tokens


def test_limits_reject_budget_below_max_num_seqs() -> None:
    with pytest.raises(ConfigError, match="max_num_batched_tokens"):
        BatchLimits(max_num_batched_tokens=64, max_num_seqs=128)


def test_long_prompt_is_chunked_by_the_budget() -> None:
    b = ContinuousBatcher(BatchLimits(max_num_batched_tokens=256, max_num_seqs=8), 10_000)
    seq = Sequence("a", prompt_tokens=1000, output_tokens=3)
    b.add(seq, 0.0)
    chunks = []
    t = 0.0
    while seq.finish_time is None:
        plan = b.schedule(t)
        assert plan is not None
        chunks.append(plan.prefill_tokens)
        t += 0.01
        b.complete(plan, t)
    assert chunks == [256, 256, 256, 232, 0, 0]
    assert seq.first_token_time == pytest.approx(0.04)
    assert seq.first_scheduled == 0.0


def test_without_chunked_prefill_a_prompt_waits_for_an_empty_step() -> None:
    lim = BatchLimits(max_num_batched_tokens=512, max_num_seqs=8, chunked_prefill=False)
    b = ContinuousBatcher(lim, 10_000)
    small, big = Sequence("s", 100, 5), Sequence("b", 600, 2)
    b.add(small, 0.0)
    b.add(big, 0.0)
    plan = b.schedule(0.0)
    assert plan is not None and [s.request_id for s, _ in plan.chunks] == ["s"]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    blocks=st.integers(40, 3000),
    budget=st.sampled_from([64, 256, 2048]),
    seed=st.integers(0, 2**31),
)
def test_every_token_is_emitted_once_and_blocks_return(
    n: int, blocks: int, budget: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    lim = BatchLimits(max_num_batched_tokens=budget, max_num_seqs=min(budget, 32), block_size=16)
    # every request must fit alone, or it could never run (the simulator validates this)
    max_len = blocks * 16 // 2
    seqs = [
        Sequence(
            f"r{i}",
            int(rng.integers(1, min(max_len - 50, 700))),
            int(rng.integers(1, 50)),
            cached_tokens=int(rng.integers(0, 64)),
        )
        for i in range(n)
    ]
    arrivals = sorted(float(x) for x in rng.uniform(0, 2, n))
    b = ContinuousBatcher(lim, blocks)
    ends, max_tokens = drive(b, seqs, arrivals)
    assert max_tokens <= budget
    assert b.free_blocks == blocks and b.idle
    for seq in seqs:
        times = np.concatenate([ends[a : a + c] for a, c in seq.segments])
        assert len(times) == seq.output_tokens
        assert np.all(np.diff(times) > 0)
        assert times[0] == seq.first_token_time and times[-1] == seq.finish_time
        assert seq.engine_arrival <= seq.first_scheduled < seq.first_token_time  # type: ignore[operator]


def test_kv_pressure_causes_recompute_preemptions() -> None:
    rng = np.random.default_rng(3)
    seqs = [Sequence(f"r{i}", 400, 300) for i in range(40)]
    arrivals = sorted(float(x) for x in rng.uniform(0, 0.5, 40))
    roomy = ContinuousBatcher(BatchLimits(max_num_seqs=64), 50_000)
    drive(roomy, [Sequence(s.request_id, 400, 300) for s in seqs], arrivals)
    tight = ContinuousBatcher(BatchLimits(max_num_seqs=64), 400)
    drive(tight, seqs, arrivals)
    assert roomy.preemptions_total == 0
    assert tight.preemptions_total > 0
    assert sum(s.preemptions for s in seqs) == tight.preemptions_total
    # recomputed prompts are counted as prefill work again
    assert tight.prompt_tokens_total > 40 * 400


def test_prefix_caching_resumes_a_preempted_sequence_from_its_cached_blocks() -> None:
    """vLLM V1 with prefix caching keeps a preempted request's freed blocks until they are
    evicted: its resume recomputes less than a full re-prefill, every token still comes out
    once and every block comes back."""
    rng = np.random.default_rng(3)
    arrivals = sorted(float(x) for x in rng.uniform(0, 0.5, 40))
    runs = {}
    for reuse in (False, True):
        seqs = [Sequence(f"r{i}", 400, 300) for i in range(40)]
        b = ContinuousBatcher(BatchLimits(max_num_seqs=64), 400, reuse_freed=reuse)
        drive(b, seqs, arrivals)
        assert b.free_blocks == b.total_blocks
        assert b.generation_tokens_total == 40 * 300
        runs[reuse] = (b.prompt_tokens_total - 40 * 400) / max(b.preemptions_total, 1)
        assert b.preemptions_total > 0
    # recomputed prompt tokens per preemption: only the evicted blocks are recomputed
    assert runs[True] < runs[False]
