"""A KV cache the calibration reads off the usage gauge is a measured size, not a product of
the memory model - yet a change of what shares the GPU memory with it (an fp8 cache, fp8
weights, more GPUs) must still resize it, or every memory fix on a KV-bound stack is
predicted to do nothing."""

from __future__ import annotations

import pytest

from tailtriage.analyses.slo import parse_slos
from tailtriage.model import Capture
from tailtriage.remediation.whatif import Replay
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.cluster import resized_cache
from tailtriage.simulator.config import apply_overrides

#: the KV cache this stand-in runs with: a third of what its H100 would hold, so that the
#: incident's long outputs queue for blocks (p95 TTFT ~55 s)
PINNED = 1400


@pytest.fixture(scope="module")
def kv_bound() -> Capture:
    cfg = apply_overrides(
        resolve_scenario("kv_cache_pressure"),
        {
            "workload.0.duration_s": 60,
            "workload.1.duration_s": 180,
            "engine.num_gpu_blocks": PINNED,
        },
    )
    return simulate(cfg)


def test_a_pinned_cache_follows_what_shares_its_memory() -> None:
    base = apply_overrides(resolve_scenario("kv_cache_pressure"), {"engine.num_gpu_blocks": 1000})

    def blocks(overrides: dict[str, object]) -> int:
        return resized_cache(base, apply_overrides(base, overrides)).engine.num_gpu_blocks

    assert blocks({"model.kv_dtype": "fp8"}) == 2000  # a byte per value instead of two
    assert blocks({"gpu.tp": 2}) > 2000  # twice the memory, the weights once
    assert blocks({"model.dtype": "fp8"}) > 1000  # half the weights: room for more blocks
    assert blocks({"engine.max_num_seqs": 64}) == 1000  # nothing the cache is sized from
    assert blocks({"engine.num_gpu_blocks": 1500, "model.kv_dtype": "fp8"}) == 1500
    unpinned = resolve_scenario("kv_cache_pressure")
    assert resized_cache(unpinned, apply_overrides(unpinned, {"gpu.tp": 2})).engine == (
        apply_overrides(unpinned, {"gpu.tp": 2}).engine
    )


def test_an_fp8_cache_on_a_kv_bound_stack_is_predicted_to_help(kv_bound: Capture) -> None:
    slos = parse_slos("p95 ttft < 1s")
    with Replay(kv_bound, slos, seed=0) as rep:
        pinned = rep.calibration.config.engine.num_gpu_blocks
        assert 0.8 * PINNED < pinned < 1.2 * PINNED  # read off the usage gauge
        base = rep.predict({}).slos[0].baseline
        fp8 = rep.predict({"model.kv_dtype": "fp8"}).slos[0].predicted
        doubled = rep.predict({"engine.num_gpu_blocks": 2 * pinned}).slos[0].predicted
    assert base is not None and fp8 is not None and doubled is not None
    assert base > 10.0  # the replay queues for blocks as the stack did
    assert fp8 < 0.1 * base
    # the cache holds twice the tokens, and each step reads half the KV bytes on top
    assert fp8 <= doubled
    assert fp8 == pytest.approx(doubled, rel=0.05)
