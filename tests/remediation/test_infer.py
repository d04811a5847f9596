"""What a calibration without --base reads about the deployment from the telemetry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tailtriage.remediation.calibrate.infer import (
    dtype_from_kv,
    gpu_of,
    infer_cpu,
    infer_gateway,
    infer_hardware,
    infer_hpa,
    infer_hpa_settings,
    infer_kv_blocks,
    infer_routing,
    infer_token_budget,
    model_of,
)
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.cluster import make_template
from tailtriage.simulator.config import apply_overrides
from tailtriage.store.input import load_capture


@pytest.mark.parametrize(
    ("names", "want"),
    [
        (["meta-llama/Llama-3.1-8B-Instruct"], ("llama-3.1-8b", None)),
        (["meta-llama/Meta-Llama-3.1-70B-Instruct"], ("llama-3.1-70b", None)),
        (["Qwen/Qwen2.5-32B-Instruct-AWQ"], ("qwen2.5-32b", "awq")),
        (["neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8"], ("llama-3.1-8b", "fp8")),
        (["gpt-4o", "mistral-7b"], ("mistral-7b", None)),
        (["my-finetune"], (None, None)),
    ],
)
def test_model_names(names: list[str], want: tuple[str | None, str | None]) -> None:
    assert model_of(names) == want


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA H200", "H200"),
        ("Tesla T4", None),
    ],
)
def test_dcgm_gpu_names(name: str, want: str | None) -> None:
    assert gpu_of([name]) == want


def _bundle(name: str, tmp: Path, **overrides: object) -> Path:
    cfg = resolve_scenario(name)
    short = {"workload.0.duration_s": 60, "workload.1.duration_s": 150, **overrides}
    write_bundle(simulate(apply_overrides(cfg, short)), tmp)
    return tmp


@pytest.mark.slow
@pytest.mark.parametrize("limit", [12, 9])
def test_gateway_limit_read_from_the_gateway_queue(limit: int, tmp_path: Path) -> None:
    cap = load_capture(_bundle("gateway_queue", tmp_path, **{"gateway.concurrency_limit": limit}))
    found, part = infer_gateway(cap)
    assert found == {"gateway.concurrency_limit": limit}, part
    assert infer_hpa(cap)[0] == {"hpa.enabled": False}  # gateway_queue has no HPA


@pytest.mark.slow
def test_hardware_read_from_labels(tmp_path: Path) -> None:
    cap = load_capture(_bundle("decode_memory_bound", tmp_path))
    found, _ = infer_hardware(cap)
    assert found["model.name"] == "qwen2.5-32b"
    assert found["gpu.type"] == "L40S" and found["gpu.tp"] == 2
    assert found["gpu.interconnect"] == "pcie"  # L40S has no NVLink
    assert infer_gateway(cap)[0] == {}  # no gateway queueing: no limit claimed


@pytest.mark.slow
def test_kv_cache_size_and_weight_dtype_read_from_kv_usage(tmp_path: Path) -> None:
    cfg = resolve_scenario("decode_memory_bound")  # qwen2.5-32b in fp8 on 2 x L40S
    cap = load_capture(_bundle("decode_memory_bound", tmp_path))
    found, part = infer_kv_blocks(cap)
    true_blocks = make_template(cfg, 0, np.random.default_rng(0)).kv_blocks
    assert found["engine.num_gpu_blocks"] == pytest.approx(true_blocks, rel=0.03), part
    hardware, _ = infer_hardware(cap)
    dtype, _ = dtype_from_kv({**hardware, **found})
    assert dtype == {"model.dtype": "fp8"}  # the name does not say so; the cache size does


@pytest.mark.slow
def test_cpu_use_and_routing_read_from_the_counter_and_dispatches(tmp_path: Path) -> None:
    cap = load_capture(_bundle("scaling_lag", tmp_path))
    found, part = infer_cpu(cap)
    truth = resolve_scenario("scaling_lag").cpu  # base 1.6 cores, 5 ms/request, 30 us/token
    assert found["cpu.base_cores"] == pytest.approx(truth.base_cores, rel=0.1), part
    assert found["cpu.per_token_core_s"] == pytest.approx(truth.per_token_core_s, rel=0.15)
    assert infer_routing(cap)[0] == {"gateway.routing": "least_outstanding"}
    assert infer_hpa_settings(cap)[0]["hpa.metric"] == "cpu"


@pytest.mark.slow
def test_random_routing_and_token_budget_of_the_worked_example(tmp_path: Path) -> None:
    cap = load_capture(
        _bundle("canonical-example", tmp_path, **{"workload.2.duration_s": 120})
    )  # random routing, max_num_batched_tokens 256 with longer prompts
    assert infer_routing(cap)[0] == {"gateway.routing": "random"}
    assert infer_token_budget(cap)[0] == {"engine.max_num_batched_tokens": 256}
