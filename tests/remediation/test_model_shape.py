"""A served model outside the simulator's catalog: its shape estimated from its name, so the
roofline (and the KV cache it sizes) still applies instead of a line and a default cache; and
the KV-cache gauge read under the name older vLLM exports."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tailtriage.errors import ConfigError
from tailtriage.model import Capture
from tailtriage.remediation.calibrate.deployment import inferred_base
from tailtriage.remediation.calibrate.infer import infer_kv_blocks
from tailtriage.remediation.calibrate.shapes import estimate_shape, params_of
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.cluster import make_template
from tailtriage.simulator.config import apply_overrides
from tailtriage.simulator.steptime import MODELS, kv_bytes_per_token
from tailtriage.store.input import load_capture

#: published config.json numbers (layers, KV heads, head size) of models outside the catalog
PUBLISHED = {
    # Qwen2.5-14B's architecture: 48 layers, 8 KV heads of 128
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": (14.8, 48 * 2 * 8 * 128 * 2),
    # Llama 3.3 70B has Llama 3.1 70B's architecture
    "meta-llama/Llama-3.3-70B-Instruct": (70.6, 80 * 2 * 8 * 128 * 2),
    # Llama 3.2 3B: 28 layers, 8 KV heads of 128
    "meta-llama/Llama-3.2-3B-Instruct": (3.2, 28 * 2 * 8 * 128 * 2),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_a_shape_estimated_from_the_name_is_near_the_published_one(name: str) -> None:
    est = estimate_shape([name])
    assert est is not None
    params, kv_bytes = PUBLISHED[name]
    assert est.shape.params_b == pytest.approx(params, rel=0.1)
    # KV bytes per token set the cache's size in tokens: within 30 % of the real model's
    assert kv_bytes_per_token(est.shape) == pytest.approx(kv_bytes, rel=0.3)


@pytest.mark.parametrize(
    "name",
    [
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "my-finetune",
        "gpt-4o",
    ],
)
def test_no_estimate_without_a_dense_parameter_count(name: str) -> None:
    assert estimate_shape([name]) is None


def test_parameter_counts_in_names() -> None:
    assert params_of("Qwen/Qwen2.5-Coder-1.5B-Instruct") == 1.5
    assert params_of("meta-llama/Llama-3.3-70B-Instruct") == 70.0
    assert params_of("llama-3.1-8b-instruct-v2") == 8.0


def test_the_simulator_replays_a_model_given_by_its_numbers_like_the_catalog_entry() -> None:
    cfg = resolve_scenario("decode_memory_bound")  # qwen2.5-32b, fp8, 2 x L40S
    s = MODELS["qwen2.5-32b"]
    numbers = {"model.name": "acme/in-house-32b", "model.params_b": s.params_b,
               "model.layers": s.layers, "model.hidden": s.hidden, "model.heads": s.heads,
               "model.kv_heads": s.kv_heads}  # fmt: skip
    rng = np.random.default_rng(0)
    want, got = (make_template(c, 0, rng) for c in (cfg, apply_overrides(cfg, numbers)))
    assert got.kv_blocks == want.kv_blocks
    assert got.step_model.step_time(8, 256, 4096) == want.step_model.step_time(8, 256, 4096)


def test_architecture_numbers_must_be_complete() -> None:
    with pytest.raises(ConfigError, match=r"model\.layers"):
        apply_overrides(resolve_scenario("decode_memory_bound"), {"model.params_b": 14.0})
    with pytest.raises(ConfigError, match="unknown model"):
        apply_overrides(resolve_scenario("decode_memory_bound"), {"model.name": "acme-x"})


def _renamed(cap: Capture, served: str) -> Capture:
    """The capture as if its model had been served under ``served``, without the KV gauge."""
    rq = cap.requests
    names = pa.array([served if m else m for m in rq["model"].to_pylist()], pa.string())
    rq = rq.set_column(rq.schema.get_field_index("model"), "model", names)
    se = cap.series
    se = se.filter(pc.invert(pc.equal(se["metric"], "vllm:kv_cache_usage_perc")))
    labels = []
    for text in se["labels"].to_pylist():
        d = json.loads(text)
        if "model_name" in d:
            d["model_name"] = served
        labels.append(json.dumps(d))
    se = se.set_column(se.schema.get_field_index("labels"), "labels", pa.array(labels))
    return cap.replace(requests=rq, series=se)


@pytest.fixture(scope="module")
def qwen_bundle(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    """decode_memory_bound (qwen2.5-32b in fp8 on 2 x L40S), shortened, read back."""
    out = tmp_path_factory.mktemp("qwen")
    short = {"workload.0.duration_s": 60, "workload.1.duration_s": 150}
    write_bundle(simulate(apply_overrides(resolve_scenario("decode_memory_bound"), short)), out)
    return load_capture(out)


@pytest.mark.slow
def test_a_model_outside_the_catalog_keeps_the_roofline_and_its_kv_cache(
    qwen_bundle: Capture,
) -> None:
    cfg = resolve_scenario("decode_memory_bound")
    cap = _renamed(qwen_bundle, "Qwen/Qwen2.5-Coder-32B-Instruct-FP8")
    config, evidence, gaps = inferred_base(cap)
    parts = {g.part for g in gaps}
    assert "model.name / gpu.type" not in parts, gaps  # not fitted as a line for want of a name
    assert "model shape" in parts  # ... but said to be an estimate
    assert config.step_time.mode == "roofline"
    assert config.model.dtype == "fp8"  # the name says so
    true_blocks = make_template(cfg, 0, np.random.default_rng(0)).kv_blocks
    blocks = make_template(config, 0, np.random.default_rng(0)).kv_blocks
    assert blocks == pytest.approx(true_blocks, rel=0.1), evidence["hardware"]


@pytest.mark.slow
def test_the_kv_cache_size_is_read_from_the_gauge_vllm_exported_before_0_9(
    qwen_bundle: Capture,
) -> None:
    se = qwen_bundle.series
    old = pc.if_else(
        pc.equal(se["metric"], "vllm:kv_cache_usage_perc"),
        "vllm:gpu_cache_usage_perc",
        se["metric"],
    )
    cap = qwen_bundle.replace(
        series=se.set_column(se.schema.get_field_index("metric"), "metric", old)
    )
    found, part = infer_kv_blocks(cap)
    true_blocks = make_template(
        resolve_scenario("decode_memory_bound"), 0, np.random.default_rng(0)
    )
    assert found["engine.num_gpu_blocks"] == pytest.approx(true_blocks.kv_blocks, rel=0.03), part


def _sampled(capture: Capture, keep: float, seed: int = 1) -> Capture:
    """Whole traces dropped at random: each request (and all its stages) kept with ``keep``."""
    rng = np.random.default_rng(seed)
    kept = pa.array([i for i in capture.requests["request_id"].to_pylist() if rng.random() < keep])
    return capture.replace(
        requests=capture.requests.filter(pc.is_in(capture.requests["request_id"], kept)),
        stages=capture.stages.filter(pc.is_in(capture.stages["request_id"], kept)),
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_kv_cache_of_sampled_traces_is_sized_from_the_running_gauge(
    qwen_bundle: Capture, seed: int
) -> None:
    """One traced request in ten: the cache is what the running sequences held, not what the
    traced few held divided by the ratio (which scatters several-fold)."""
    true_blocks = make_template(
        resolve_scenario("decode_memory_bound"), 0, np.random.default_rng(0)
    )
    config, evidence, _ = inferred_base(_sampled(qwen_bundle, 0.1, seed), sampled=0.1)
    blocks = config.engine.num_gpu_blocks
    assert blocks == pytest.approx(true_blocks.kv_blocks, rel=0.2), evidence["kv_cache"]
