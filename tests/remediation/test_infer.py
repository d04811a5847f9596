"""What a calibration without --base reads about the deployment from the telemetry."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tailtriage.model import Capture
from tailtriage.model import schema as S
from tailtriage.model.schema import make_table
from tailtriage.remediation.calibrate.infer import (
    dtype_from_kv,
    gpu_of,
    infer_cpu,
    infer_engine,
    infer_gateway,
    infer_hardware,
    infer_hpa,
    infer_hpa_settings,
    infer_kv_blocks,
    infer_nodes,
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


def _gauges(rows: list[tuple[str, float, float, float, float]]) -> Capture:
    """(pod, time, running, waiting, kv use) scrapes of vLLM's scheduler gauges."""
    metrics, labels, times, values = [], [], [], []
    for pod, t, running, waiting, kv in rows:
        for metric, v in (
            ("vllm:num_requests_running", running),
            ("vllm:num_requests_waiting", waiting),
            ("vllm:kv_cache_usage_perc", kv),
        ):
            metrics.append(metric)
            labels.append(json.dumps({"pod": pod}))
            times.append(t)
            values.append(v)
    table = make_table(
        S.SERIES, {"metric": metrics, "labels": labels, "time": times, "value": values}
    )
    return Capture(series=table)


_CALM = [(f"vllm-{p}", 30.0 * i, 20.0 + i % 7, 0.0, 0.3) for p in "ab" for i in range(10)]


def test_a_short_queue_at_a_repeated_ceiling_with_cache_room_is_max_num_seqs() -> None:
    # one 30 s scrape catches the burst: both pods at 64, one with six waiting, cache 43 % used
    burst = [("vllm-a", 300.0, 64.0, 6.0, 0.43), ("vllm-b", 300.0, 64.0, 0.0, 0.42)]
    found, part = infer_engine(_gauges(_CALM + burst))
    assert found == {"engine.max_num_seqs": 64}, part


@pytest.mark.parametrize(
    "burst",
    [
        # the ceiling reached once: the highest count seen, not shown to be a limit
        [("vllm-a", 300.0, 101.0, 6.0, 0.2)],
        # a full cache: the queue waited for KV blocks, not for a sequence slot
        [("vllm-a", 300.0, 64.0, 6.0, 0.97), ("vllm-b", 300.0, 64.0, 0.0, 0.95)],
        # one request caught between two steps
        [("vllm-a", 300.0, 64.0, 1.0, 0.4), ("vllm-b", 300.0, 64.0, 0.0, 0.4)],
    ],
)
def test_a_single_queued_scrape_is_not_read_as_the_ceiling(
    burst: list[tuple[str, float, float, float, float]],
) -> None:
    found, _ = infer_engine(_gauges(_CALM + burst))
    assert found == {}


def _pending(delays: list[tuple[str, str, float]], max_replicas: float) -> Capture:
    """Pods scheduled after (pod, node, seconds pending), and the HPA's ``maxReplicas``."""
    events = make_table(
        S.EVENTS,
        {
            "time": [100.0 + i for i in range(len(delays))],
            "kind": ["pod_pending"] * len(delays),
            "object_name": [pod for pod, _, _ in delays],
            "duration": [d for _, _, d in delays],
            "attributes": [json.dumps({"pod": pod, "node": node}) for pod, node, _ in delays],
        },
    )
    series = make_table(
        S.SERIES,
        {
            "metric": ["kube_horizontalpodautoscaler_spec_max_replicas"],
            "labels": [json.dumps({"horizontalpodautoscaler": "vllm"})],
            "time": [0.0],
            "value": [max_replicas],
        },
    )
    return Capture(series=series, events=events)


def test_pods_scheduled_at_once_leave_room_for_every_pod_the_hpa_may_ask_for() -> None:
    # TP4 pods, each on its own node within a second: ten of them must not wait for a node
    quick = [(f"vllm-{i}", f"gpu-node-{i}", 1.0) for i in range(6)]
    found, part = infer_nodes(_pending(quick, 10), gpus_per_pod=4)
    assert found["pods.nodes"] * 8 >= 10 * 4, part
    assert found["pods.max_nodes"] >= found["pods.nodes"]
    # two nodes ran the pods scheduled at once; the rest waited minutes for new ones
    slow = [("vllm-0", "gpu-node-0", 1.0), ("vllm-1", "gpu-node-1", 1.0)] + [
        (f"vllm-{i}", f"gpu-node-{i}", 240.0) for i in range(2, 6)
    ]
    found, _ = infer_nodes(_pending(slow, 10), gpus_per_pod=4)
    assert found["pods.nodes"] == 2
