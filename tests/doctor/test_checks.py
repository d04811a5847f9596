"""Each check on hand-built Facts: it fires on the defect it looks for, and stays quiet just on
the healthy side of its threshold."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import pytest
from rich.console import Console

from tailtriage.analyses.slo import parse_slos
from tailtriage.doctor import Gap, registered
from tailtriage.doctor.facts import Facts, MetricFacts, SkewedService, TraceFacts
from tailtriage.doctor.gap import DoctorResult
from tailtriage.renderers.doctor import doctor_renderables

SLOS = parse_slos("p95 ttft < 500ms")
HEALTHY_TRACES = TraceFacts(
    spans=4000, requests=1000, spans_loaded=True, traces_examined=1000, engine_spans=2000,
    engine_phase_spans=1000, engine_ttft_spans=1000, envoy_traces=1000, envoy_timed_traces=1000,
    edge_first_byte_traces=1000, istio=True,
    stage_requests={"ingress": 1000, "engine_queue": 1000, "prefill": 1000, "decode": 1000},
)  # fmt: skip
HEALTHY_METRICS = MetricFacts(
    names=frozenset({"vllm:num_requests_waiting", "vllm:request_queue_time_seconds_bucket",
                     "DCGM_FI_PROF_DRAM_ACTIVE", "kube_horizontalpodautoscaler_status_current_replicas"}),
    counted_requests=1000.0, counted_from="vllm:e2e_request_latency_seconds_count",
    counted_range=(0.0, 100.0), traced_in_range=1000, scrape_interval_s=15.0,
    scrape_interval_of="engine metrics",
)  # fmt: skip


def facts(traces: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
          **kw: Any) -> Facts:  # fmt: skip
    base = Facts(
        slos=SLOS,
        incident=(0.0, 600.0),
        traces=dataclasses.replace(HEALTHY_TRACES, **(traces or {})),
        metrics=dataclasses.replace(HEALTHY_METRICS, **(metrics or {})),
        event_kinds={"pod_ready": 3},
    )
    return dataclasses.replace(base, **kw)


def gaps(f: Facts) -> dict[str, Gap]:
    return {g.check: g for c in registered() for g in c.run(f)}


def test_healthy_facts_have_no_gaps() -> None:
    assert gaps(facts()) == {}


def test_clock_skew_names_the_shift_and_the_pods() -> None:
    skewed = SkewedService("vllm", 12, 0.042, ("vllm-7d9f-abc",))
    gap = gaps(facts({"skew": (skewed,), "skew_adjusted_spans": 12}))["clock_skew"]
    assert "vllm up to 42 ms on 12 spans" in gap.what and "vllm-7d9f-abc" in gap.what
    small = SkewedService("vllm", 12, 0.004, ())
    assert "clock_skew" not in gaps(facts({"skew": (small,)}))


def test_unknown_service() -> None:
    gap = gaps(
        facts({"unknown_service_spans": 2000, "unknown_service_names": ("unknown_service:python",)})
    )["service_name"]
    assert "unknown_service:python" in gap.what and "OTEL_SERVICE_NAME" in gap.fix
    assert "service_name" not in gaps(facts({"unknown_service_spans": 40}))


def test_trace_context_dropped_at_the_gateway() -> None:
    split = {"engine_only_requests": 500, "edge_only_requests": 500, "engine_orphans": 500}
    gap = gaps(facts(split))["trace_context"]
    assert "two traces per request" in gap.what and "traceparent" in gap.fix
    assert "gateway-istio.yaml" in gap.fix
    assert "trace_context" not in gaps(
        facts({"engine_only_requests": 5, "edge_only_requests": 500})
    )


def test_engine_without_phase_attributes() -> None:
    f = facts({"engine_phase_spans": 0, "stage_requests": {"ingress": 1000, "api_server": 1000}})
    gap = gaps(f)["engine_phases"]
    assert "--collect-detailed-traces" in gap.fix and "engine_queue" in gap.undecidable


def test_gateway_spans_missing() -> None:
    f = facts({"envoy_traces": 0, "envoy_timed_traces": 0, "edge_first_byte_traces": 0,
               "istio": False, "engine_only_requests": 1000,
               "stage_requests": {"engine_queue": 1000, "prefill": 1000}})  # fmt: skip
    found = gaps(f)
    assert "ingress" in found["gateway_spans"].undecidable
    assert "edge_ttft" in found  # nothing at the edge stamps the first byte either


def test_nginx_without_upstream_times() -> None:
    f = facts({"envoy_traces": 0, "envoy_timed_traces": 0, "istio": False, "nginx_spans": 900,
               "nginx_timed_spans": 0})  # fmt: skip
    gap = gaps(f)["gateway_timing"]
    assert "upstream.header_time" in gap.fix and "gateway-nginx.conf" in gap.fix


def test_old_engine_metric_names_are_advice_only() -> None:
    names = HEALTHY_METRICS.names | {
        "vllm:gpu_cache_usage_perc",
        "vllm:time_per_output_token_seconds_bucket",
    }
    f = facts(metrics={"names": names})
    gap = gaps(f)["engine_metric_version"]
    assert "vllm:time_per_output_token_seconds (now vllm:inter_token_latency_seconds)" in gap.what
    result = DoctorResult(SLOS, (gap,))
    assert result.triage_ready and result.blocking == ()


def test_missing_queue_histogram_blocks_ttft() -> None:
    f = facts(
        metrics={
            "names": frozenset(
                {
                    "vllm:num_requests_waiting",
                    "DCGM_FI_DEV_GPU_UTIL",
                    "kube_horizontalpodautoscaler_spec_max_replicas",
                }
            )
        }
    )
    gap = gaps(f)["engine_metric_version"]
    assert "engine_queue" in gap.undecidable and gap.limits(SLOS)


@pytest.mark.parametrize(("interval", "incident", "fires"), [
    (15.0, (0.0, 600.0), False), (60.0, (0.0, 120.0), True), (15.0, (0.0, 10.0), False),
])  # fmt: skip
def test_scrape_interval(interval: float, incident: tuple[float, float], fires: bool) -> None:
    f = facts(metrics={"scrape_interval_s": interval}, incident=incident)
    assert ("scrape_interval" in gaps(f)) is fires


@pytest.mark.parametrize(("traced", "fires"), [(50, True), (150, True), (300, False), (950, False)])
def test_sampling_judged_against_what_the_percentile_needs(traced: int, fires: bool) -> None:
    # 1000 requests in 100 s: 300 per 30 s bin; p95 needs 72 per bin, i.e. 24 % of them
    f = facts(metrics={"traced_in_range": traced})
    assert ("sampling" in gaps(f)) is fires


def test_pod_lifecycle_missing() -> None:
    gap = gaps(facts(event_kinds={}))["pod_lifecycle"]
    assert "cold_start" in gap.undecidable


def test_no_traces_at_all() -> None:
    f = facts({"requests": 0, "spans": 0, "spans_loaded": False, "stage_requests": {}})
    assert set(gaps(f)) == {"traces"}


def test_terminal_view_prints_input_text_verbatim() -> None:
    hostile = Gap("service_name", "spans from [bold red]evil[/] service", ("api_server",),
                  "fix [link=http://x]it[/link]", "none", frozenset({"ttft"}))  # fmt: skip
    console = Console(file=io.StringIO(), width=200, color_system=None)
    for part in doctor_renderables(DoctorResult(SLOS, (hostile,))):
        console.print(part)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold red]evil[/]" in out and "[link=http://x]it[/link]" in out
    assert "not triage-ready" in out


def test_hpa_series_missing_blocks_only_when_scaling_shows() -> None:
    ksm = HEALTHY_METRICS.names - {"kube_horizontalpodautoscaler_status_current_replicas"}
    ksm |= {"kube_deployment_spec_replicas"}
    fixed = gaps(facts(metrics={"names": ksm}))["hpa_series"]
    assert not fixed.limits(SLOS) and "fine if this deployment has no HPA" in fixed.what
    scaled = gaps(facts(metrics={"names": ksm}, events_in_range={"pod_created": 3}))
    assert scaled["hpa_series"].limits(SLOS) and "scaling_lag" in scaled["hpa_series"].undecidable
    rollout = {"pod_created": 3, "pod_killing": 3}
    pending = {"stage_requests": {**HEALTHY_TRACES.stage_requests, "pending": 400}}
    assert not gaps(facts(pending, {"names": ksm}, events_in_range=rollout))["hpa_series"].limits(
        SLOS
    )
    assert gaps(facts(pending, {"names": ksm}))["hpa_series"].limits(SLOS)
    no_ksm = HEALTHY_METRICS.names - {"kube_horizontalpodautoscaler_status_current_replicas"}
    assert gaps(facts(metrics={"names": no_ksm}))["hpa_series"].limits(SLOS)
