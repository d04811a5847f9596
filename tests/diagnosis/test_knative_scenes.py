"""Knative activator buffering on a fixed fleet is a gateway queue (issue 14, repair 6)."""

from __future__ import annotations

import pytest

from diagnosis.scenes import INCIDENT, context, decomposition, slo
from diagnosis.stack import FLEET_HASH, fleet_requests, in_incident, pod_gauge, pods
from tailtriage.analyses.decomposition import reclassify
from tailtriage.diagnosis import diagnose
from tailtriage.diagnosis.context import DiagnosisContext

FLEET = pods(FLEET_HASH, 3, seed=6)
#: ingress gateway, activator throttler_try (pending), queue-proxy queue_wait, engine
BASE = {"ingress": 0.02, "pending": 0.01, "gateway_queue": 0.005, "engine_queue": 0.01}
INC = {**BASE, "pending": 0.6}
KSVC = {
    "namespace_name": "llm-serving",
    "configuration_name": "vllm",
    "revision_name": "vllm-00003",
}


def _knative(desired: float, actual_until: float) -> DiagnosisContext:
    """Three pods at containerConcurrency; the KPA wants ``desired`` pods from the incident's
    start, and the actual count follows ``actual_until`` seconds later."""
    cap = fleet_requests(
        FLEET,
        per_window=900,
        baseline_stages={**BASE, "prefill": 0.1, "decode": 2.0},
        incident_stages={**INC, "prefill": 0.1, "decode": 2.0},
        seed=21,
    )
    ready_at = INCIDENT[0] + actual_until
    rows = pod_gauge(
        "autoscaler_desired_pods",
        ["autoscaler"],
        lambda p, t, r: desired if in_incident(t) else 3.0,
        extra_labels=KSVC,
    )
    rows += pod_gauge(
        "autoscaler_actual_pods",
        ["autoscaler"],
        lambda p, t, r: desired if t >= ready_at else 3.0,
        extra_labels=KSVC,
    )
    rows += pod_gauge(
        "activator_request_concurrency",
        ["activator-6d9f8c7b5-q2x7m"],
        lambda p, t, r: 40.0 + r.poisson(5) if in_incident(t) else 1.0,
        extra_labels=KSVC,
    )
    # containerConcurrency caps the engine: its own queue stays empty
    rows += pod_gauge("vllm:num_requests_waiting", FLEET, lambda p, t, r: 0.0)
    rows += pod_gauge(
        "DCGM_FI_PROF_SM_ACTIVE",
        FLEET,
        lambda p, t, r: 0.55,
        extra_labels={"gpu": "0", "modelName": "NVIDIA L40S"},
    )
    return context(cap, [slo("ttft", 0.5, 0.9)], decomposition(INC, BASE), series_rows=rows)


def test_activator_buffering_on_a_fixed_fleet_is_a_gateway_queue() -> None:
    findings = diagnose(_knative(desired=3.0, actual_until=0.0))
    cats = [f.category for f in findings]
    assert cats[0] == "gateway_queue", cats
    assert "scaling_lag" not in cats and "cold_start" not in cats
    # the activator's throttler_try (pending per span) is read as the queue it was: the
    # breakdown the report shows moves it, so table and finding say the same
    assert findings[0].stage == "gateway_queue"
    ctx = _knative(desired=3.0, actual_until=0.0)
    assert ctx.decomposition is not None
    moved = reclassify(ctx.decomposition, findings[0].moves)
    stages = {s.stage: s.seconds for s in moved.stages}
    assert stages.get("pending", 0.0) == 0.0
    assert stages["gateway_queue"] == pytest.approx(INC["gateway_queue"] + INC["pending"], rel=0.2)


def test_activator_waiting_for_requested_pods_is_not_a_gateway_queue() -> None:
    # the KPA asked for six pods at once; they arrived 200 s later
    cats = [f.category for f in diagnose(_knative(desired=6.0, actual_until=200.0))]
    assert cats[0] in ("scaling_lag", "cold_start"), cats
    assert "gateway_queue" not in cats
    assert not any(f.moves for f in diagnose(_knative(desired=6.0, actual_until=200.0)))
