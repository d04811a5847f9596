"""Every built-in scenario: a healthy period, then an incident that shows its root cause."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pyarrow.compute as pc
import pytest

from tailtriage.model.capture import Capture
from tailtriage.model.vocabulary import STAGES
from tailtriage.simulator import simulate
from tailtriage.simulator.summary import stage_matrix, summarize

pytestmark = pytest.mark.slow


def windows(cap: Capture) -> tuple[tuple[float, float], tuple[float, float]]:
    ex = cap.metadata.extra
    return tuple(ex["baseline"]), tuple(ex["incident"])  # type: ignore[return-value]


def stage_mean(cap: Capture, stage: str, window: tuple[float, float]) -> float:
    return float(summarize(cap, window)["stage_mean_ms"].get(stage, 0.0))


def tpot_ms(cap: Capture, window: tuple[float, float], q: float = 50) -> float:
    req = cap.requests
    arrival = req["arrival"].to_numpy()
    ok = (
        (req["status"].to_numpy(zero_copy_only=False) == "ok")
        & (arrival >= window[0])
        & (arrival < window[1])
    )
    out = req["output_tokens"].to_numpy()
    ok &= out > 1
    e2e = req["e2e"].to_numpy()
    ttft = pc.fill_null(req["ttft"], np.nan).to_numpy()
    return float(np.percentile((e2e[ok] - ttft[ok]) / (out[ok] - 1), q) * 1e3)


def series_delta(cap: Capture, metric: str, window: tuple[float, float]) -> float:
    """Increase of a counter summed over pods within the window."""
    s = cap.series.filter(pc.equal(cap.series["metric"], metric))
    total = 0.0
    for pod in {json.loads(x)["pod"] for x in s["labels"].to_pylist()}:
        rows = [
            (r["time"], r["value"]) for r in s.to_pylist() if json.loads(r["labels"])["pod"] == pod
        ]
        inside = [v for t, v in rows if window[0] <= t <= window[1]]
        if inside:
            total += max(inside) - min(inside)
    return total


def kinds(cap: Capture) -> list[str]:
    return [str(k) for k in cap.events["kind"].to_pylist()]


def ratio(cap: Capture, stage: str) -> float:
    base, inc = windows(cap)
    return stage_mean(cap, stage, inc) / max(stage_mean(cap, stage, base), 1e-3)


def check_ingress(cap: Capture) -> None:
    assert ratio(cap, "ingress") > 5


def check_gateway_queue(cap: Capture) -> None:
    base, inc = windows(cap)
    assert stage_mean(cap, "gateway_queue", inc) > 10 * max(
        stage_mean(cap, "gateway_queue", base), 0.1
    )
    assert stage_mean(cap, "pending", inc) == 0  # the deployment cannot grow
    assert "pod_created" not in kinds(cap)


def check_scaling_lag(cap: Capture) -> None:
    base, inc = windows(cap)
    assert stage_mean(cap, "pending", inc) > 10 * max(stage_mean(cap, "pending", base), 1.0)
    assert "hpa_rescale" in kinds(cap)


def check_cold_start(cap: Capture) -> None:
    ev = cap.events.filter(pc.equal(cap.events["kind"], "cold_start")).to_pylist()
    assert ev and min(e["duration"] for e in ev) > 120
    assert "node_scale_up" in kinds(cap) and "image_pulling" in kinds(cap)
    _, inc = windows(cap)
    assert stage_mean(cap, "pending", inc) > 1000


def check_compute_saturation(cap: Capture) -> None:
    assert ratio(cap, "engine_queue") > 10
    assert "pod_created" not in kinds(cap)  # already at max replicas


def check_prefill_compute(cap: Capture) -> None:
    assert ratio(cap, "prefill") > 5


def check_kv(cap: Capture) -> None:
    base, inc = windows(cap)
    assert series_delta(cap, "vllm:num_preemptions_total", inc) > 10
    assert series_delta(cap, "vllm:num_preemptions_total", base) == 0


def check_decode_memory(cap: Capture) -> None:
    base, inc = windows(cap)
    assert tpot_ms(cap, inc) > 1.5 * tpot_ms(cap, base)


def check_tp(cap: Capture) -> None:
    base, inc = windows(cap)
    assert tpot_ms(cap, inc) > 1.2 * tpot_ms(cap, base)
    assert tpot_ms(cap, base) > 40  # all-reduces over PCIe: slow even when healthy


def check_interference(cap: Capture) -> None:
    base, inc = windows(cap)
    assert tpot_ms(cap, inc, 95) > 1.3 * tpot_ms(cap, base, 95)


def check_imbalance(cap: Capture) -> None:
    _, inc = windows(cap)
    _ids, mat = stage_matrix(cap)
    req = cap.requests
    arrival = req["arrival"].to_numpy()
    sel = (arrival >= inc[0]) & (arrival < inc[1])
    replicas = np.array(req["replica"].to_pylist(), dtype=object)
    q = mat[:, STAGES.index("engine_queue")]
    per = sorted(float(q[sel & (replicas == r)].mean()) for r in set(replicas[sel]))
    assert per[-1] > 5 * per[len(per) // 2]


def check_api(cap: Capture) -> None:
    assert ratio(cap, "api_server") > 5


def check_rollout(cap: Capture) -> None:
    k = kinds(cap)
    assert "rollout" in k and k.count("pod_killing") >= 3
    _, inc = windows(cap)
    assert stage_mean(cap, "pending", inc) + stage_mean(cap, "gateway_queue", inc) > 100


CHECKS: dict[str, Callable[[Capture], None]] = {
    "ingress_network": check_ingress,
    "gateway_queue": check_gateway_queue,
    "scaling_lag": check_scaling_lag,
    "cold_start": check_cold_start,
    "compute_saturation": check_compute_saturation,
    "prefill_compute": check_prefill_compute,
    "kv_cache_pressure": check_kv,
    "decode_memory_bound": check_decode_memory,
    "tensor_parallel_overhead": check_tp,
    "prefill_interference": check_interference,
    "load_imbalance": check_imbalance,
    "api_server_overhead": check_api,
    "rollout": check_rollout,
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_scenario_shows_its_root_cause(name: str) -> None:
    cap = simulate(name)
    assert cap.metadata.extra["root_cause"] == name
    base, _ = windows(cap)
    healthy = summarize(cap, base)
    assert healthy["failed"] == 0
    assert healthy["ttft"]["p95_ms"] < 500  # the period before the incident is healthy
    CHECKS[name](cap)
