"""Contract tests over the whole remediation catalog: every proposal is a change the simulator
accepts, names a known action, and renders config a person can apply."""

from __future__ import annotations

from typing import Any

import pytest

from diagnosis.scenes import context, decomposition, gauge, requests, slo
from diagnosis.test_rules import HEALTHY
from tailtriage.diagnosis import Finding
from tailtriage.model.vocabulary import ACTIONS, CATEGORIES
from tailtriage.remediation import Target, candidates_for, overrides_of, registered
from tailtriage.remediation.actions import Remediation
from tailtriage.simulator import ScenarioConfig, apply_overrides, resolve_scenario

SCENARIO: dict[str, Any] = {
    "rollouts": [{"at_s": 10.0}],
    "gpu": {"tp": 4, "interconnect": "pcie"},
    "engine": {"prefix_caching": False},
}


def _ctx(replicas: int = 2) -> Any:
    inc = {
        "ingress": 0.1,
        "gateway_queue": 0.1,
        "pending": 0.2,
        "api_server": 0.1,
        "engine_queue": 0.3,
        "prefill": 0.3,
    }
    cap = requests(
        incident_stages={**inc, "decode": 3.0}, baseline_stages={**HEALTHY, "decode": 2.0}
    )
    rows = gauge("vllm:num_requests_running", [8.0] * 40, labels={"pod": "vllm-0"})
    rows += gauge("kube_horizontalpodautoscaler_status_current_replicas", [replicas] * 40)
    return context(
        cap,
        [slo("ttft", 0.5, 1.1), slo("tpot", 0.02, 0.04)],
        decomposition(inc, HEALTHY),
        series_rows=rows,
    )


def _config() -> ScenarioConfig:
    from tailtriage.simulator.config import from_dict

    return from_dict(SCENARIO)


def _reader(cfg: ScenarioConfig) -> Any:
    """``current(key)``: the value at a dotted key of ``cfg`` (list items by index)."""

    def current(key: str) -> Any:
        node: Any = cfg
        for part in key.split("."):
            node = node[int(part)] if part.isdigit() else getattr(node, part, None)
        return node

    return current


@pytest.mark.parametrize("category", [c for c in CATEGORIES if c != "insufficient_telemetry"])
def test_every_proposal_is_a_valid_simulator_override(category: str) -> None:
    ctx = _ctx()
    cfg = _config()
    finding = Finding(category, "engine_queue", 0.9, "test", impact=0.3)

    current = _reader(cfg)

    cands = candidates_for(ctx, [finding], current, Target())
    assert cands, f"no remediation for {category}"
    for c in cands:
        assert c.action in ACTIONS and category in c.addresses
        assert c.summary and "\n" not in c.summary
        rem = Remediation(c.action, c.addresses, c.summary, c.parameters)
        if not c.not_predicted:  # a change the simulator cannot model says why instead
            apply_overrides(cfg, overrides_of(rem))  # raises ConfigError on an unknown key
        else:
            assert "simulator" in c.not_predicted
        assert c.config.strip(), f"{c.action} renders no config"


def test_catalog_actions_are_registered_once_with_known_names() -> None:
    names = [a.name for a in registered()]
    assert len(names) == len(set(names))
    assert set(names) <= set(ACTIONS)
    assert resolve_scenario("canonical-example").engine.max_num_batched_tokens > 0


@pytest.mark.parametrize(
    ("hpa", "bounds"),
    [
        # an HPA on CPU running 6 to 8 replicas: the new metric keeps those bounds
        ({"enabled": True, "metric": "cpu", "min_replicas": 6, "max_replicas": 8}, (6, 8)),
        # no autoscaler, 3 fixed replicas: the added HPA starts at today's count
        ({"enabled": False}, (3, 6)),
    ],
)
def test_hpa_snippet_keeps_the_deployment_replica_bounds(
    hpa: dict[str, Any], bounds: tuple[int, int]
) -> None:
    from tailtriage.simulator.config import from_dict

    cfg = from_dict({**SCENARIO, "hpa": hpa, "pods": {"initial_replicas": 3}})

    current = _reader(cfg)

    finding = Finding("scaling_lag", "pending", 0.9, "test", impact=0.3)
    cands = [
        c for c in candidates_for(_ctx(), [finding], current, Target()) if c.action == "hpa_metric"
    ]
    assert cands
    lo, hi = bounds
    for c in cands:
        assert f"minReplicas: {lo}\n" in c.config and f"maxReplicas: {hi}\n" in c.config, c.config
        assert f"minReplicaCount: {lo}\n" in c.config and f"maxReplicaCount: {hi}\n" in c.config
        if not hpa["enabled"]:
            assert c.parameters["hpa.min_replicas"] == lo
            assert c.parameters["hpa.max_replicas"] == hi


def test_rollout_fixes_never_take_replicas_away() -> None:
    """A Deployment of 3 replicas without an HPA, rolled out one pod at a time: every rollout
    fix keeps at least the replicas running now, surge-first stops no pod before its
    replacement is Ready, and the full surge brings up the whole new version."""
    cfg = apply_overrides(
        _config(),
        {
            "pods.initial_replicas": 3,
            "hpa.enabled": False,
            "rollouts.0.max_surge": 0,
            "rollouts.0.max_unavailable": 1,
        },
    )

    current = _reader(cfg)

    finding = Finding("rollout", "pending", 0.9, "test", impact=0.3)
    cands = candidates_for(_ctx(), [finding], current, Target())
    for c in cands:
        if "pods.initial_replicas" in c.parameters:
            assert c.parameters["pods.initial_replicas"] > 3, c
    surges = sorted(
        (c.parameters["rollouts.0.max_surge"], c.parameters["rollouts.0.max_unavailable"])
        for c in cands
        if "rollouts.0.max_surge" in c.parameters
    )
    assert surges == [(1, 0), (3, 0)]


def test_warm_replicas_above_the_hpa_ceiling_raise_it_too() -> None:
    """Six replicas ran in the incident and the (calibrated) HPA allows 5: six warm ones need
    maxReplicas 6 as well (minReplicas above maxReplicas is refused: the fix was once dropped
    without a prediction)."""
    from tailtriage.simulator.config import from_dict

    cfg = from_dict({**SCENARIO, "hpa": {"enabled": True, "min_replicas": 2, "max_replicas": 5}})

    current = _reader(cfg)

    finding = Finding("scaling_lag", "pending", 0.9, "test", impact=0.3)
    cands = candidates_for(_ctx(replicas=6), [finding], current, Target())
    (warm,) = [c for c in cands if c.action == "min_replicas"]
    assert warm.parameters["hpa.min_replicas"] == 6
    assert warm.parameters["hpa.max_replicas"] == 6 and "maxReplicas 5 -> 6" in warm.summary
    rem = Remediation(warm.action, warm.addresses, warm.summary, warm.parameters)
    fixed = apply_overrides(cfg, overrides_of(rem))
    assert fixed.hpa.min_replicas == fixed.hpa.max_replicas == 6


@pytest.mark.parametrize(("budget", "chunk"), [(2048, 512), (32768, 2048), (512, 256)])
def test_chunked_prefill_proposes_an_itl_sized_chunk(budget: int, chunk: int) -> None:
    """A quarter of the engine's budget, never above the size vLLM's tuning guide names for
    inter-token latency (a fitted 32768 budget once gave a 8192 'fix' that still stalled
    every decode) nor below the floor where steps do too little prefill work."""
    from tailtriage.simulator.config import from_dict

    cfg = from_dict({**SCENARIO, "engine": {"max_num_batched_tokens": budget}})
    finding = Finding("prefill_interference", "decode", 0.9, "test", impact=0.3)
    cands = candidates_for(_ctx(), [finding], _reader(cfg), Target())
    (chunked,) = [c for c in cands if c.action == "chunked_prefill"]
    assert chunked.parameters["engine.max_num_batched_tokens"] == chunk


def test_a_skewed_hash_is_replaced_by_envoys_least_request() -> None:
    # the calibration replayed a hot pod (weighted routing): the fix is what a DestinationRule
    # can set, simulated as Envoy runs it, and the summary names the skew, not the policy
    cfg = apply_overrides(
        _config(), {"gateway.routing": "weighted", "gateway.weights": (2.4, 0.8, 0.8)}
    )
    finding = Finding("load_imbalance", "engine_queue", 0.9, "test", impact=0.3)
    (c,) = [
        c
        for c in candidates_for(_ctx(), [finding], _reader(cfg), Target())
        if c.action == "routing_policy"
    ]
    assert c.parameters == {"gateway.routing": "least_request"}
    assert "2.4 fair shares" in c.summary
    assert "simple: LEAST_REQUEST" in c.config


@pytest.mark.parametrize(("gpu", "offered"), [("H100", True), ("L40S", False), ("L4", False)])
def test_nvlink_placement_only_where_the_gpu_has_nvlink(gpu: str, offered: bool) -> None:
    # a TP group split over PCIe: NVLink placement is the fix on an H100 (SXM nodes have it),
    # a change no scheduler can make for an L40S or L4, which have none
    cfg = apply_overrides(_config(), {"gpu.type": gpu, "model.name": "llama-3.1-8b"})
    finding = Finding("tensor_parallel_overhead", "decode", 0.9, "test", impact=0.3)
    actions = {c.action for c in candidates_for(_ctx(), [finding], _reader(cfg), Target())}
    assert ("placement" in actions) is offered
    assert "tensor_parallel" in actions  # fewer ranks: possible on any GPU
