"""Both regimes of the token budget come out of the model (no special cases)."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from tailtriage.simulator import simulate
from tailtriage.simulator.config import from_dict
from tailtriage.simulator.summary import summarize


def one_pod(
    engine: dict[str, object], phase: dict[str, object], **over: object
) -> dict[str, object]:
    cfg: dict[str, object] = {
        "name": "regime",
        "seed": 5,
        "hpa": {"enabled": False},
        "pods": {"initial_replicas": 1},
        "engine": engine,
        "output": {"token_times": "off"},
        "workload": [{"name": "steady", "duration_s": 400, **phase}],
    }
    cfg.update(over)
    return cfg


def ttft_ms(cfg: dict[str, object], q: float) -> float:
    cap = simulate(from_dict(cfg))
    ttft = pc.drop_null(cap.requests["ttft"]).to_numpy()
    return float(np.percentile(ttft, q) * 1e3)


def test_short_prompts_many_sharing_a_step_smaller_budget_lowers_ttft() -> None:
    # 16 slots full of decodes: a 256-token step carries a whole prompt and stalls every
    # decode; 128-token chunks ride on memory-bound decode steps, slots turn over sooner.
    phase = {
        "arrivals": {"process": "poisson", "rate": 3.2},
        "prompt_tokens": {"kind": "lognormal", "median": 220, "sigma": 0.4, "max": 1000},
        "output_tokens": {"kind": "lognormal", "median": 60, "sigma": 0.5, "max": 400},
    }
    model = {"model": {"name": "qwen2.5-32b"}, "gpu": {"type": "A100"}}
    big = ttft_ms(one_pod({"max_num_batched_tokens": 256, "max_num_seqs": 16}, phase, **model), 95)
    small = ttft_ms(
        one_pod({"max_num_batched_tokens": 128, "max_num_seqs": 16}, phase, **model), 95
    )
    assert small < 0.85 * big, (small, big)


def test_long_prompts_chunked_smaller_budget_raises_ttft() -> None:
    # 6,000-token prompts at low load: TTFT is the prefill; 128-token chunks need 47 steps,
    # each paying a full weight read (below the knee), instead of 3 compute-bound ones.
    phase = {
        "arrivals": {"process": "poisson", "rate": 0.3},
        "prompt_tokens": {"kind": "constant", "value": 6000},
        "output_tokens": {"kind": "constant", "value": 20},
    }
    big = ttft_ms(one_pod({"max_num_batched_tokens": 2048, "max_num_seqs": 64}, phase), 50)
    mid = ttft_ms(one_pod({"max_num_batched_tokens": 512, "max_num_seqs": 64}, phase), 50)
    small = ttft_ms(one_pod({"max_num_batched_tokens": 128, "max_num_seqs": 64}, phase), 50)
    assert big < mid < small, (big, mid, small)
    assert small > 1.5 * big


def test_throughput_cost_of_the_smaller_budget_is_slight() -> None:
    # Peak tokens per second of a full step: 128 tokens give up a few percent, not more.
    from tailtriage.simulator.steptime import GPUS, MODELS, RooflineStepTime

    m = RooflineStepTime(MODELS["qwen2.5-32b"], GPUS["A100"], mfu=0.65)
    loss = 1 - (128 / m.step_time(112, 16, 0)) / (256 / m.step_time(240, 16, 0))
    assert 0 < loss < 0.1


def test_summary_decomposition_adds_up_to_the_band() -> None:
    phase = {"arrivals": {"process": "poisson", "rate": 3.0}}
    cap = simulate(from_dict(one_pod({}, phase)))
    s = summarize(cap)
    dec = s["ttft_p95_decomposition_ms"]
    total = sum(v for k, v in dec.items() if k != "execution")
    assert s["ttft"]["p90_ms"] <= total * 1.05
    assert total <= s["ttft"]["p99_ms"]
