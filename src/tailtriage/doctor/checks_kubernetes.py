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
    no autoscaler looks like, so the gap limits triage only when kube-state-metrics is absent or
    the capture shows scaling: replicas changed, the HPA rescaled, more pods created than
    killed, or requests pending for capacity with no pod killed (a rollout's pending)."""
    m = facts.metrics
    if m.any_prefix("kube_horizontalpodautoscaler_"):
        return
    ksm = m.any_prefix("kube_")
    ev = facts.events_in_range
    killed = ev.get("pod_killing", 0)
    pending = facts.traces.stage_requests.get("pending", 0)
    scaling = bool(
        m.replicas_changed
        or ev.get("hpa_rescale", 0)
        or ev.get("pod_created", 0) > killed
        or (pending and not killed)
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
        evidence=f"{ev.get('pod_created', 0)} pods created and {killed} killed in the capture, "
        f"{pending} requests pending",
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
