"""What a calibration without --base reads about the deployment from the telemetry."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailtriage.pipeline.load import load_capture
from tailtriage.remediation.calibrate.infer import (
    gpu_of,
    infer_gateway,
    infer_hardware,
    infer_hpa,
    model_of,
)
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import apply_overrides


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
