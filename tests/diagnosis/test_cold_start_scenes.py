"""Cold start on a plain Deployment behind Istio, no Knative (issue 14, repair 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diagnosis.scenes import INCIDENT, context, decomposition, slo
from diagnosis.stack import (
    DEPLOYMENT,
    FLEET_HASH,
    IMAGE,
    event,
    fleet_requests,
    in_incident,
    kubectl_events,
    pod,
    pod_gauge,
    pods,
    with_events,
)
from tailtriage.diagnosis import diagnose
from tailtriage.diagnosis import imbalance as imbalance_module
from tailtriage.diagnosis.context import DiagnosisContext

OLD = pods(FLEET_HASH, 2, seed=1)
NEW = pods(FLEET_HASH, 2, seed=2)
RS = f"{DEPLOYMENT}-{FLEET_HASH}"
BASE = {"ingress": 0.03, "api_server": 0.01, "engine_queue": 0.02, "prefill": 0.15}
INC = {"ingress": 0.03, "api_server": 0.01, "engine_queue": 0.75, "prefill": 0.15}


def _scale_up(
    tmp: Path,
    *,
    decide_after: float,
    hpa_metric: str,
    pull: str | None,
    ready_after: float,
    ksm: bool = True,
    load: float = 1.0,
    scraped_while_loading: bool = False,
) -> DiagnosisContext:
    """The HPA scales 2 -> 4 ``decide_after`` s into the incident; the new pods pull the image
    (``pull`` = the kubelet's duration text, None = cached) and become Ready ``ready_after`` s
    after they were created.  Meanwhile requests queue on the two old pods.  ``ksm=False``:
    no kube-state-metrics HPA series, only kubectl's events and pods; ``load``: the incident's
    arrivals over the baseline's; ``scraped_while_loading``: the new pods' engine gauges are
    scraped from the baseline on (empty until Ready) and they serve traced requests."""
    t = INCIDENT[0] + decide_after
    reason = (
        "cpu resource utilization (percentage of request) above target"
        if hpa_metric == "cpu"
        else f"pods metric {hpa_metric} above target"
    )
    items: list[dict[str, Any]] = [
        event(
            t,
            "SuccessfulRescale",
            f"New size: 4; reason: {reason}",
            kind="HorizontalPodAutoscaler",
            name=DEPLOYMENT,
            component="horizontal-pod-autoscaler",
            field_path=None,
        ),
        event(
            t + 0.5,
            "ScalingReplicaSet",
            f"Scaled up replica set {RS} to 4 from 2",
            kind="Deployment",
            name=DEPLOYMENT,
            component="deployment-controller",
            field_path=None,
        ),
    ]
    started = t + 2 + (41.2 if pull else 1.0) + 3.0
    for name in NEW:
        items.append(
            event(
                t + 1,
                "SuccessfulCreate",
                f"Created pod: {name}",
                kind="ReplicaSet",
                name=RS,
                component="replicaset-controller",
                field_path=None,
            )
        )
        items.append(
            event(
                t + 2,
                "Scheduled",
                f"Successfully assigned llm-serving/{name} to gpu-node-7",
                name=name,
                component="default-scheduler",
                field_path=None,
            )
        )
        if pull:
            items.append(event(t + 2, "Pulling", f'Pulling image "{IMAGE}"', name=name))
            items.append(
                event(
                    t + 44,
                    "Pulled",
                    f'Successfully pulled image "{IMAGE}" in {pull} ({pull} including '
                    f"waiting). Image size: 9412345678 bytes.",
                    name=name,
                )
            )
        else:
            items.append(
                event(
                    t + 3,
                    "Pulled",
                    f'Container image "{IMAGE}" already present on machine',
                    name=name,
                )
            )
        items.append(event(started, "Started", "Started container vllm", name=name))
        if ready_after > 60:
            items.append(
                event(
                    started + 10,
                    "Unhealthy",
                    'Readiness probe failed: Get "http://10.4.2.17:8000/health": dial tcp '
                    "10.4.2.17:8000: connect: connection refused",
                    name=name,
                    type_="Warning",
                    count=int((ready_after - 60) // 10),
                    last=t + ready_after - 5,
                )
            )
    pod_items = [
        pod(
            n,
            FLEET_HASH,
            created=INCIDENT[0] - 86400,
            scheduled=INCIDENT[0] - 86399,
            started=INCIDENT[0] - 86300,
            ready=INCIDENT[0] - 86100,
        )
        for n in OLD
    ] + [
        pod(
            n,
            FLEET_HASH,
            created=t + 1,
            scheduled=t + 2,
            started=started,
            ready=t + 1 + ready_after if t + 1 + ready_after < INCIDENT[1] else None,
        )
        for n in NEW
    ]
    events = kubectl_events(tmp, items, "events")
    pod_rows = kubectl_events(tmp, pod_items, "pods")
    cap = fleet_requests(
        [*OLD, *NEW] if scraped_while_loading else OLD,
        per_window=900,
        baseline_stages={**BASE, "decode": 3.0},
        incident_stages={**(BASE if scraped_while_loading else INC), "decode": 3.0},
        per_replica_incident={p: {**INC, "decode": 3.0} for p in OLD}
        if scraped_while_loading
        else None,
        seed=12,
        incident_per_window=round(900 * load),
    )
    cap = with_events(cap, events, pod_rows)
    ready_at = t + 1 + ready_after
    hpa = {"horizontalpodautoscaler": DEPLOYMENT, "namespace": "llm-serving"}
    rows = (
        []
        if not ksm
        else pod_gauge(
            "kube_horizontalpodautoscaler_status_desired_replicas",
            ["ksm"],
            lambda p, x, r: 4.0 if x >= t else 2.0,
            extra_labels=hpa,
        )
    )
    if ksm:
        rows += pod_gauge(
            "kube_horizontalpodautoscaler_status_current_replicas",
            ["ksm"],
            lambda p, x, r: 4.0 if x >= ready_at else 2.0,
            extra_labels=hpa,
        )
        rows += pod_gauge(
            "kube_horizontalpodautoscaler_spec_target_metric",
            ["ksm"],
            lambda p, x, r: 4.0,
            extra_labels={**hpa, "metric_name": hpa_metric},
        )
    rows += pod_gauge(
        "vllm:num_requests_waiting",
        OLD,
        lambda p, x, r: (x - INCIDENT[0]) / 15.0 if in_incident(x) else 0.0,
    )
    if scraped_while_loading:
        rows += pod_gauge(
            "vllm:num_requests_running",
            [*OLD, *NEW],
            lambda p, x, r: float(
                r.poisson(150 if in_incident(x) else 40)
                if p in OLD
                else (r.poisson(40) if x >= ready_at else 0)
            ),
        )
    rows += pod_gauge(
        "DCGM_FI_PROF_SM_ACTIVE",
        OLD,
        lambda p, x, r: 0.92 if in_incident(x) else 0.5,
        extra_labels={"gpu": "0", "modelName": "NVIDIA H100 80GB HBM3"},
    )
    return context(cap, [slo("ttft", 0.5, 1.0)], decomposition(INC, BASE), series_rows=rows)


def test_slow_image_pull_and_weight_load_is_cold_start(tmp_path: Path) -> None:
    # the HPA reacts in 20 s on the queue; the pods need 41 s to pull and ~3 min to load
    ctx = _scale_up(
        tmp_path,
        decide_after=20,
        hpa_metric="vllm:num_requests_waiting",
        pull="41.2s",
        ready_after=230,
    )
    findings = diagnose(ctx)
    cats = [f.category for f in findings]
    assert cats[0] == "cold_start", cats
    top = findings[0]
    signals = {e.signal: e.value for e in top.evidence}
    assert signals["Pulled"] == 41.2
    assert signals["pod.container_started_to_ready_s"] >= 150
    # the scale-up was prompt: whatever scaling lag is found explains the smaller part
    lag = [f for f in findings if f.category == "scaling_lag"]
    assert all((f.explained_share or 0) < (top.explained_share or 0) for f in lag)


def test_a_late_decision_with_fast_pods_is_scaling_lag_not_cold_start(tmp_path: Path) -> None:
    # the HPA scales on CPU and decides after 150 s; the image is cached, pods ready in 25 s
    ctx = _scale_up(tmp_path, decide_after=150, hpa_metric="cpu", pull=None, ready_after=25)
    cats = [f.category for f in diagnose(ctx)]
    assert cats[0] == "scaling_lag", cats


def test_pods_asked_for_minutes_before_and_still_loading_are_cold_start(tmp_path: Path) -> None:
    # the HPA decided 170 s before the tail began (beyond the scale-up look-back); the pods
    # pull for 41 s and load for minutes, Ready 130 s into the incident, while twice the
    # requests queue on the old pods; no HPA series: only kubectl's events and pods say
    # capacity was on its way
    ctx = _scale_up(
        tmp_path,
        decide_after=-170,
        hpa_metric="vllm:num_requests_waiting",
        pull="41.2s",
        ready_after=300,
        ksm=False,
        load=2.0,
    )
    findings = diagnose(ctx)
    assert findings[0].category == "cold_start", [f.category for f in findings]
    # decided before the incident: the whole wait for capacity is start-up
    assert (findings[0].explained_share or 0) >= 0.9


def test_pods_scraped_while_loading_are_not_cold_replicas_of_an_imbalance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the new pods' exporters answer from container start, so their gauges cover the whole
    # window (empty until Ready, 2 min into the incident) while the old pods run full batches:
    # by sample counts they served the whole window, by their pod conditions they did not
    def ctx() -> DiagnosisContext:
        return _scale_up(
            tmp_path,
            decide_after=-100,
            hpa_metric="vllm:num_requests_waiting",
            pull="41.2s",
            ready_after=220,
            scraped_while_loading=True,
        )

    findings = diagnose(ctx())
    cats = [f.category for f in findings]
    assert cats[0] == "cold_start", cats
    assert "load_imbalance" not in cats
    # capacity was on its way: compute saturation claims no more than the other half of the
    # queue that the capacity rules leave it
    sat = [f for f in findings if f.category == "compute_saturation"]
    assert all((f.explained_share or 0) <= (findings[0].explained_share or 0) for f in sat)
    # the scene has the power to fail: without the pod conditions the empty new pods make the
    # old ones look hot
    monkeypatch.setattr(imbalance_module, "_joined_late", lambda ctx: frozenset())
    assert "load_imbalance" in [f.category for f in diagnose(ctx())]
