"""Grafana dashboard JSON, recording rules and alert rules over the exporter's series.

The dashboard answers three questions: is the time queueing or execution (the two kinds side
by side), which stage moved the p95 over time, and did the replicas follow the queue (replica
count and the HPA's desired/max replicas against the queue depth, from kube-state-metrics and
vLLM).  Rules precompute the p95 per stage and per kind and the queued share, and alert when
the TTFT SLO breaches or queueing takes most of the time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import yaml

from tailtriage.exporter.metrics import STAGE_METRIC, TTFT_METRIC

#: the window of every rate(): 4 scrapes at a 15 s interval plus slack (Prometheus' advice
#: of at least four samples per range)
WINDOW: Final = "1m"
#: queued share of all stage time above which queueing is the story, not execution
QUEUE_SHARE_ALERT: Final = 0.5
#: how long a condition must hold before it pages (filters single-scrape spikes)
ALERT_FOR: Final = "5m"

P95_STAGE = f"tailtriage:stage_duration_seconds:p95_{WINDOW}"
P95_KIND = f"tailtriage:kind_duration_seconds:p95_{WINDOW}"
QUEUE_SHARE = f"tailtriage:queue_share:ratio_{WINDOW}"
P95_TTFT = f"tailtriage:ttft_seconds:p95_{WINDOW}"


@dataclass(frozen=True, slots=True)
class DashboardFiles:
    """File name -> content of everything ``tailtriage dashboards`` writes."""

    files: dict[str, str]


def recording_rules() -> dict[str, Any]:
    rate = f"rate({STAGE_METRIC}_bucket[{WINDOW}])"
    return {
        "name": "tailtriage-recording",
        "rules": [
            {"record": P95_STAGE,
             "expr": f"histogram_quantile(0.95, sum by (le, stage, kind) ({rate}))"},
            {"record": P95_KIND, "expr": f"histogram_quantile(0.95, sum by (le, kind) ({rate}))"},
            {"record": QUEUE_SHARE,
             "expr": f'sum(rate({STAGE_METRIC}_sum{{kind="queue"}}[{WINDOW}])) / '
                     f"sum(rate({STAGE_METRIC}_sum[{WINDOW}]))"},
            {"record": P95_TTFT,
             "expr": f"histogram_quantile(0.95, sum by (le) (rate({TTFT_METRIC}_bucket[{WINDOW}])))"},
        ],
    }  # fmt: skip


def alert_rules(ttft_slo_s: float) -> dict[str, Any]:
    return {
        "name": "tailtriage-alerts",
        "rules": [
            {
                "alert": "TailtriageTTFTSLOBreach",
                "expr": f"{P95_TTFT} > {ttft_slo_s:g}",
                "for": ALERT_FOR,
                "labels": {"severity": "page"},
                "annotations": {
                    "summary": f"p95 TTFT above {ttft_slo_s * 1e3:g} ms",
                    "description": "Run `tailtriage triage` on the window; the queue-vs-"
                    "execution panel shows which kind of stage grew.",
                },
            },
            {
                "alert": "TailtriageQueueingDominates",
                "expr": f"{QUEUE_SHARE} > {QUEUE_SHARE_ALERT}",
                "for": ALERT_FOR,
                "labels": {"severity": "ticket"},
                "annotations": {
                    "summary": "Requests spend most of their time queued, not executing",
                    "description": "Capacity or autoscaling, not the GPU kernels: compare "
                    "replicas and the HPA's desired replicas with the queue depth.",
                },
            },
        ],
    }


def _panel(pid: int, title: str, exprs: list[tuple[str, str]], unit: str, y: int, x: int = 0,
           w: int = 12) -> dict[str, Any]:  # fmt: skip
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def dashboard(ttft_slo_s: float) -> dict[str, Any]:
    """The queue-vs-execution dashboard (Grafana 10+ JSON model, Prometheus datasource)."""
    panels = [
        _panel(1, "p95: queueing vs execution", [(P95_KIND, "{{kind}}")], "s", 0),
        _panel(2, "Share of request time spent queued", [(QUEUE_SHARE, "queued")],
               "percentunit", 0, 12),
        _panel(3, "p95 per stage over time (which stage moved the tail)",
               [(P95_STAGE, "{{stage}} ({{kind}})")], "s", 8, 0, 24),
        _panel(4, f"p95 TTFT against the SLO ({ttft_slo_s * 1e3:g} ms)",
               [(P95_TTFT, "p95 TTFT"), (f"vector({ttft_slo_s:g})", "SLO")], "s", 16),
        _panel(5, "Replicas and HPA against queue depth", [
            ("sum(kube_deployment_status_replicas_available)", "available replicas"),
            ("sum(kube_horizontalpodautoscaler_status_desired_replicas)", "HPA desired"),
            ("sum(kube_horizontalpodautoscaler_spec_max_replicas)", "HPA max"),
            ("sum(vllm:num_requests_waiting)", "engine queue depth"),
        ], "short", 16, 12),
    ]  # fmt: skip
    return {
        "uid": "tailtriage-queue-exec",
        "title": "tailtriage: queueing vs execution",
        "tags": ["tailtriage", "llm-inference"],
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    }  # fmt: skip


def dashboard_files(ttft_slo_s: float) -> DashboardFiles:
    import json

    rules = {"groups": [recording_rules(), alert_rules(ttft_slo_s)]}
    return DashboardFiles({
        "tailtriage-queue-vs-execution.json": json.dumps(dashboard(ttft_slo_s), indent=2) + "\n",
        "tailtriage-rules.yml": yaml.safe_dump(rules, sort_keys=False, width=100),
    })  # fmt: skip
