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
    if facts.metrics.any_prefix("kube_horizontalpodautoscaler_"):
        return
    yield Gap(
        check="hpa_series",
        what=(
            "no HPA series (kube-state-metrics kube_horizontalpodautoscaler_*): desired and "
            "current replicas over time are unknown"
        ),
        undecidable=("pending", "scaling_lag", "compute_saturation"),
        fix=fix(
            facts, files.PROMETHEUS, "run kube-state-metrics and scrape it (job kube-state-metrics)"
        ),
        cost="one small deployment; a few series per HPA",
        metrics=SCALING,
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
