"""Rolling updates from real kubectl output, told apart from a scale-down (issue 14, repair 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analyses.test_rollout import small_rollout
from builders import capture_from_arrays
from diagnosis.scenes import BASELINE, INCIDENT, context, decomposition, slo
from diagnosis.stack import (
    DEPLOYMENT,
    FLEET_HASH,
    event,
    fleet_requests,
    in_incident,
    kubectl_events,
    pod_gauge,
    pods,
    with_events,
)
from tailtriage.analyses.rollout import WarmUp
from tailtriage.diagnosis import diagnose
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.rollout import took_capacity, warmup_tail_share
from tailtriage.simulator import simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.store.input import load_capture

NEW_HASH = "5c8d7f9b6"
OLD = pods(FLEET_HASH, 3, seed=1)
NEW = pods(NEW_HASH, 3, seed=3)
OLD_RS, NEW_RS = f"{DEPLOYMENT}-{FLEET_HASH}", f"{DEPLOYMENT}-{NEW_HASH}"
BASE = {"ingress": 0.03, "engine_queue": 0.02, "prefill": 0.15}
INC = {"ingress": 0.03, "engine_queue": 0.7, "prefill": 0.15}


def _controller(t: float, message: str) -> dict[str, Any]:
    return event(
        t,
        "ScalingReplicaSet",
        message,
        kind="Deployment",
        name=DEPLOYMENT,
        component="deployment-controller",
        field_path=None,
    )


def _kill(t: float, pod: str) -> dict[str, Any]:
    return event(t, "Killing", "Stopping container vllm", name=pod)


def _ctx(tmp: Path, items: list[dict[str, Any]], serving: list[str]) -> DiagnosisContext:
    cap = fleet_requests(
        serving,
        per_window=900,
        baseline_stages={**BASE, "decode": 3.0},
        incident_stages={**INC, "decode": 3.0},
        seed=17,
    )
    cap = with_events(cap, kubectl_events(tmp, items, "events"))
    rows = pod_gauge(
        "vllm:num_requests_waiting",
        serving,
        lambda p, t, r: (t - INCIDENT[0]) / 20.0 if in_incident(t) else 0.0,
    )
    rows += pod_gauge(
        "DCGM_FI_PROF_SM_ACTIVE",
        serving,
        lambda p, t, r: 0.9 if in_incident(t) else 0.6,
        extra_labels={"gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"},
    )
    return context(cap, [slo("ttft", 0.5, 1.0)], decomposition(INC, BASE), series_rows=rows)


def _max_unavailable_rollout() -> list[dict[str, Any]]:
    t = INCIDENT[0] - 20
    items = []
    # maxSurge 1 / maxUnavailable 1: new pods come up while old ones are stopped
    for i in range(3):
        step = t + 90 * i
        items.append(_controller(step, f"Scaled up replica set {NEW_RS} to {i + 1} from {i}"))
        items.append(
            _controller(step + 1, f"Scaled down replica set {OLD_RS} to {2 - i} from {3 - i}")
        )
        items.append(_kill(step + 1, OLD[i]))
    return items


def test_a_rollout_that_slowed_prefill_without_a_queue_is_still_the_rollout(
    tmp_path: Path,
) -> None:
    # the replicas left carry more requests each: bigger batches, longer prefill steps; the
    # engine queue does not grow (the tail is all prefill)
    slower = {"ingress": 0.03, "engine_queue": 0.02, "prefill": 0.6}
    rng = np.random.default_rng(3)
    arrival = np.concatenate([np.sort(rng.uniform(*w, 900)) for w in (BASELINE, INCIDENT)])
    # three old replicas before; two serve the incident's requests while the third is replaced
    replica = np.concatenate([rng.choice(OLD, 900), rng.choice(OLD[1:], 900)])
    late = arrival >= INCIDENT[0]
    stages = {
        k: np.where(late, slower[k], BASE[k]) * rng.lognormal(0.0, 0.3, 1800)
        for k in ("ingress", "engine_queue", "prefill")
    }
    cap = capture_from_arrays(
        arrival, {**stages, "decode": np.full(1800, 3.0)}, replica=replica.tolist()
    )
    cap = with_events(cap, kubectl_events(tmp_path, _max_unavailable_rollout(), "events"))
    ctx = context(cap, [slo("ttft", 0.5, 1.0)], decomposition(slower, BASE))
    findings = diagnose(ctx)
    assert findings[0].category == "rollout", [f.category for f in findings]
    assert findings[0].impact > 0.3


def test_a_rolling_update_outranks_the_saturation_it_causes(tmp_path: Path) -> None:
    # old pods and the first new one serve; the new version is no slower per request
    ctx = _ctx(tmp_path, _max_unavailable_rollout(), [*OLD[1:], NEW[0]])
    findings = diagnose(ctx)
    cats = [f.category for f in findings]
    assert cats[0] == "rollout", cats
    ev = {e.signal: e for e in findings[0].evidence}
    assert OLD_RS in ev["ScalingReplicaSet"].detail and NEW_RS in ev["ScalingReplicaSet"].detail
    assert NEW_RS in str(ev["request.ttft_mean_by_replicaset"].value)


def test_a_scale_down_is_not_a_rollout(tmp_path: Path) -> None:
    t = INCIDENT[0] - 60
    items = [
        event(
            t,
            "SuccessfulRescale",
            "New size: 2; reason: All metrics below target",
            kind="HorizontalPodAutoscaler",
            name=DEPLOYMENT,
            component="horizontal-pod-autoscaler",
            field_path=None,
        ),
        event(
            t - 600,
            "SuccessfulRescale",
            "New size: 3; reason: pods metric vllm:num_requests_waiting above target",
            kind="HorizontalPodAutoscaler",
            name=DEPLOYMENT,
            component="horizontal-pod-autoscaler",
            field_path=None,
        ),
        _controller(t + 1, f"Scaled down replica set {OLD_RS} to 2 from 3"),
        _kill(t + 2, OLD[2]),
    ]
    cats = [f.category for f in diagnose(_ctx(tmp_path, items, OLD[:2]))]
    assert "rollout" not in cats, cats


@pytest.mark.parametrize(("surge", "unavailable", "took"), [(0, 1, True), (1, 0, False)])
def test_a_surge_rollout_takes_no_capacity_away(
    tmp_path: Path, surge: int, unavailable: int, took: bool
) -> None:
    # the simulator rolls three replicas over, its bundle read back from kubectl-shaped files:
    # maxUnavailable 1 stops an old pod before its successor is Ready; maxSurge 1 does not
    write_bundle(simulate(small_rollout(surge, unavailable)), tmp_path)
    cap = load_capture(tmp_path)
    ctx = context(cap, [slo("ttft", 0.5, 1.0)], decomposition(INC, BASE))
    assert took_capacity(ctx) is took


@pytest.mark.parametrize(("slow_new_pod", "tail_on_it"), [(True, True), (False, False)])
def test_a_warm_up_takes_capacity_only_when_the_tail_is_made_of_it(
    slow_new_pod: bool, tail_on_it: bool
) -> None:
    # one new pod among three old ones, warming up through the whole incident: its requests are
    # the tail band only when they are the slow ones, not by their quarter of the traffic
    serving = [*OLD, NEW[0]]
    cap = fleet_requests(
        serving,
        per_window=900,
        baseline_stages={**BASE, "decode": 3.0},
        incident_stages={**BASE, "decode": 3.0},
        per_replica_incident={NEW[0]: {**INC, "decode": 3.0}} if slow_new_pod else None,
        seed=5,
    )
    ctx = context(cap, [slo("ttft", 0.5, 1.0)], decomposition(INC, BASE))
    warm = WarmUp(NEW[0], INCIDENT[0], INCIDENT[1] - INCIDENT[0], 200, 0.8, 200, 0.2)
    share = warmup_tail_share(ctx, [warm])
    assert share is not None
    assert (share >= T.WARMUP_TAIL_SHARE) is tail_on_it, share
