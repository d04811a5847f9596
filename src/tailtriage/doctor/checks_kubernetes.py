"""Kubernetes checks: the HPA's series (kube-state-metrics) and the pods' lifecycle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tailtriage.doctor.check import register
from tailtriage.doctor.facts import Facts
from tailtriage.doctor.fixes import fix
from tailtriage.doctor.gap import Gap
from tailtriage.instrument import files

#: event kinds (sources.kubernetes) that place a pod's scheduling, start and readiness in time
POD_LIFECYCLE_KINDS: Final = frozenset(
    {
        "pod_created",
        "pod_scheduled",
        "pod_pending",
        "container_started",
        "pod_ready",
        "cold_start",
        "image_pulled",
    }
)
SCALING: Final = frozenset({"ttft", "e2e"})


@register("hpa_series", group="kubernetes")
def hpa_series(facts: Facts) -> Iterator[Gap]:
    """No HPA series.  kube-state-metrics scraped without them is also what a deployment with
    no autoscaler looks like, so the gap limits triage only when the capture shows scaling
    (replicas changed, pods created, requests pending) or kube-state-metrics is absent."""
    m = facts.metrics
    if m.any_prefix("kube_horizontalpodautoscaler_"):
        return
    ksm = m.any_prefix("kube_")
    scaling = (
        m.replicas_changed or facts.pods_created or facts.traces.stage_requests.get("pending", 0)
    )
    what = "no HPA series (kube-state-metrics kube_horizontalpodautoscaler_*)"
    if ksm:
        what += " although kube-state-metrics is scraped"
    what += ": the autoscaler's desired and current replicas over time are unknown"
    if ksm and not scaling:
        what += " (no scaling seen: fine if this deployment has no HPA)"
    yield Gap(
        check="hpa_series",
        what=what,
        undecidable=("pending", "scaling_lag", "compute_saturation"),
        fix=fix(
            facts, files.PROMETHEUS, "run kube-state-metrics and scrape it (job kube-state-metrics)"
        ),
        cost="one small deployment; a few series per HPA",
        metrics=SCALING if scaling or not ksm else frozenset(),
        evidence=f"{facts.pods_created} pods created, "
        f"{facts.traces.stage_requests.get('pending', 0)} requests pending",
    )


@register("pod_lifecycle", group="kubernetes")
def pod_lifecycle(facts: Facts) -> Iterator[Gap]:
    kinds = set(facts.event_kinds) & POD_LIFECYCLE_KINDS
    if kinds or facts.metrics.any_prefix("kube_pod_"):
        return
    yield Gap(
        check="pod_lifecycle",
        what=(
            "no pod lifecycle (kubectl get pods/events, kube_pod_* series): when pods were "
            "scheduled, started and ready is unknown"
        ),
        undecidable=("pending", "cold_start", "scaling_lag", "rollout"),
        fix="save `kubectl get pods -o json` and `kubectl get events -o json` with the bundle "
        f"(or scrape kube-state-metrics: instrument/{files.PROMETHEUS})",
        cost="two kubectl calls per incident",
        metrics=SCALING,
    )
