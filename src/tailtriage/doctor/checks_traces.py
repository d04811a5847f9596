"""Trace checks: engine spans, their phase attributes, service names, context propagation at
the gateway, the gateway's upstream timing, clock skew, and where TTFT is stamped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tailtriage.doctor.check import register
from tailtriage.doctor.facts import EDGE_STAGES, ENGINE_STAGES, Facts
from tailtriage.doctor.fixes import engine_file, fix, gateway_file
from tailtriage.doctor.gap import Gap
from tailtriage.instrument import files

#: below this share of requests a defect is a data-quality count, not a missing signal
MIN_SHARE: Final = 0.1
#: clock shifts smaller than this move a stage boundary less than a report rounds to
SKEW_TOLERANCE_S: Final = 0.005
ALL: Final = frozenset({"ttft", "itl", "tpot", "e2e"})
FIRST_TOKEN: Final = frozenset({"ttft", "e2e"})
ENGINE_CAUSES: Final = (
    "compute_saturation",
    "prefill_compute",
    "kv_cache_pressure",
    "prefill_interference",
)


@register("traces", group="traces")
def traces(facts: Facts) -> Iterator[Gap]:
    """No request traces at all: only the engines' histograms are left."""
    if facts.traces.requests:
        return
    what = "no request traces: no span of any tier, so no request can be decomposed"
    if facts.traces.spans:
        what = (
            f"{facts.traces.spans} spans, but none marks an inference request: no engine, "
            "gateway or GenAI span the stage rules know (map yours: `tailtriage ingest --rules`)"
        )
    yield Gap(
        check="traces",
        what=what,
        undecidable=(
            "ingress",
            "gateway_queue",
            "pending",
            "api_server",
            "engine_queue",
            "prefill",
            "decode",
            "scaling_lag",
            "gateway_queue",
            "ingress_network",
        ),
        fix=fix(
            facts, files.COLLECTOR, "run an OpenTelemetry Collector and send it every tier's spans"
        ),
        cost="one Collector deployment; span export is batched and asynchronous",
        metrics=ALL,
    )


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


@register("engine_spans", group="traces")
def engine_spans(facts: Facts) -> Iterator[Gap]:
    """Requests are traced at the edge but the engine writes no spans."""
    t = facts.traces
    engine_requests = max(t.stage_requests.get(s, 0) for s in ENGINE_STAGES)
    if not t.requests or engine_requests or t.engine_spans:
        return
    yield Gap(
        check="engine_spans",
        what=f"no engine spans: {t.requests} requests are traced at the edge only",
        undecidable=(
            "api_server",
            "engine_queue",
            "prefill",
            "decode",
            "api_server_overhead",
            *ENGINE_CAUSES,
        ),
        fix=fix(
            facts,
            engine_file(facts),
            "start the engine with --otlp-traces-endpoint and OTEL_SERVICE_NAME",
        ),
        cost="one span per request, exported in batches off the request path; a restart",
        metrics=ALL,
    )


@register("engine_phases", group="traces", needs_spans=True)
def engine_phases(facts: Facts) -> Iterator[Gap]:
    """Engine spans without the per-phase latency attributes: the engine time is one block."""
    t = facts.traces
    if not t.engine_spans or t.stage_requests.get("prefill", 0):
        return
    if t.engine_phase_spans >= MIN_SHARE * t.engine_spans:
        return
    yield Gap(
        check="engine_phases",
        what=(
            f"engine spans lack the phase timings (gen_ai.latency.time_in_queue, "
            f"time_in_model_prefill/decode): {t.engine_phase_spans} of {t.engine_spans} "
            f"engine spans examined have them"
        ),
        undecidable=("engine_queue", "prefill", "decode", *ENGINE_CAUSES),
        fix=fix(
            facts,
            engine_file(facts),
            "run a vLLM V1 engine (0.9 or newer) with --collect-detailed-traces all",
        ),
        cost="detailed traces time every forward pass: vLLM warns they can slow the engine",
        metrics=ALL,
    )


@register("service_name", group="traces", needs_spans=True)
def service_name(facts: Facts) -> Iterator[Gap]:
    """Spans from `unknown_service`: OTEL_SERVICE_NAME (or service.name) is unset."""
    t = facts.traces
    if _share(t.unknown_service_spans, t.spans) < MIN_SHARE:
        return
    names = ", ".join(t.unknown_service_names) or "no service.name"
    yield Gap(
        check="service_name",
        what=(
            f"{t.unknown_service_spans} of {t.spans} spans come from {names}: "
            f"OTEL_SERVICE_NAME is unset"
        ),
        undecidable=("api_server", "load_imbalance", "api_server_overhead"),
        fix=fix(facts, engine_file(facts), "set OTEL_SERVICE_NAME on every traced container"),
        cost="an environment variable; a restart",
        metrics=FIRST_TOKEN,
    )


@register("trace_context", group="traces")
def trace_context(facts: Facts) -> Iterator[Gap]:
    """The gateway drops `traceparent`: one trace at the edge and another at the engine."""
    t = facts.traces
    orphans = t.engine_only_requests
    if orphans < MIN_SHARE * max(t.requests, 1) or not t.edge_only_requests:
        return
    yield Gap(
        check="trace_context",
        what=(
            f"trace context is dropped at the gateway: {orphans} engine traces have no edge "
            f"span and {t.edge_only_requests} edge traces no engine span (two traces per "
            f"request)"
        ),
        undecidable=(
            "ingress",
            "gateway_queue",
            "pending",
            "api_server",
            "scaling_lag",
            "gateway_queue",
            "ingress_network",
        ),
        fix=fix(facts, gateway_file(facts), "propagate W3C traceparent through the gateway"),
        cost="configuration only; no extra spans",
        metrics=FIRST_TOKEN,
        evidence=f"{t.engine_orphans} engine spans point at a parent that is not in the traces",
    )


@register("gateway_spans", group="traces")
def gateway_spans(facts: Facts) -> Iterator[Gap]:
    """The engine is traced but no tier in front of it is."""
    t = facts.traces
    edge = max(t.stage_requests.get(s, 0) for s in EDGE_STAGES)
    if not t.requests or edge or t.engine_only_requests < t.requests * (1 - MIN_SHARE):
        return
    if t.envoy_traces or t.nginx_spans or t.knative_spans:
        return
    yield Gap(
        check="gateway_spans",
        what=f"no gateway spans: {t.requests} requests are traced from the engine inward",
        undecidable=(
            "ingress",
            "gateway_queue",
            "pending",
            "ingress_network",
            "gateway_queue",
            "scaling_lag",
            "cold_start",
        ),
        fix=fix(facts, gateway_file(facts), "turn on the gateway's tracing"),
        evidence=f"{t.engine_orphans} engine spans point at a parent span that is not in the "
        "traces (a gateway that traces but exports elsewhere)"
        if t.engine_orphans
        else "",
        cost="one or two spans per request at the proxy; sampled by the Collector",
        metrics=FIRST_TOKEN,
    )


@register("gateway_timing", group="traces", needs_spans=True)
def gateway_timing(facts: Facts) -> Iterator[Gap]:
    """Gateway spans without upstream timing (Envoy verbose events, NGINX upstream times)."""
    t = facts.traces
    envoy_missing = t.envoy_traces - t.envoy_timed_traces
    nginx_missing = t.nginx_spans - t.nginx_timed_spans
    if envoy_missing >= MIN_SHARE * max(t.envoy_traces, 1) and t.envoy_traces:
        what = (
            f"gateway spans carry no upstream timing events ({envoy_missing} of "
            f"{t.envoy_traces} Envoy traces examined lack first_upstream_tx_byte_sent / "
            f"first_downstream_tx_byte_sent)"
        )
        action = "turn on Envoy's verbose tracing (span events)"
    elif nginx_missing >= MIN_SHARE * max(t.nginx_spans, 1) and t.nginx_spans:
        what = (
            f"NGINX spans carry no upstream times ({nginx_missing} of {t.nginx_spans} "
            f"lack upstream.header_time)"
        )
        action = "add otel_span_attr upstream.header_time $upstream_header_time"
    else:
        return
    yield Gap(
        check="gateway_timing",
        what=what,
        undecidable=("ingress", "gateway_queue", "gateway_queue", "ingress_network"),
        fix=fix(facts, gateway_file(facts), action),
        cost="a few timestamps per span; no extra spans",
        metrics=FIRST_TOKEN,
    )


@register("clock_skew", group="traces", needs_spans=True)
def clock_skew(facts: Facts) -> Iterator[Gap]:
    """Hosts whose clocks disagree: spans had to be shifted into their parents."""
    skewed = [s for s in facts.traces.skew if s.max_shift_s >= SKEW_TOLERANCE_S]
    if not skewed:
        return
    parts = [
        f"{s.service} up to {s.max_shift_s * 1000:.0f} ms on {s.spans} spans"
        + (f" (pods {', '.join(s.pods[:3])}{' ...' if len(s.pods) > 3 else ''})" if s.pods else "")
        for s in skewed
    ]
    yield Gap(
        check="clock_skew",
        what="clock skew between hosts: " + "; ".join(parts),
        undecidable=(
            "ingress",
            "gateway_queue",
            "api_server",
            "engine_queue",
            "ingress_network",
            "api_server_overhead",
        ),
        fix="run chrony (or NTP) on every node so the hosts agree within a millisecond; "
        "tailtriage shifted the spans meanwhile",
        cost="a node daemon; no application change",
        metrics=FIRST_TOKEN,
        evidence=f"{facts.traces.skew_adjusted_spans} spans shifted in all",
    )


@register("edge_ttft", group="traces", needs_spans=True)
def edge_ttft(facts: Facts) -> Iterator[Gap]:
    """TTFT known only from the engine, which stamps arrival when tokenization begins."""
    t = facts.traces
    edge = _share(t.edge_first_byte_traces, t.traces_examined) + _share(
        t.stage_requests.get("client", 0) + t.token_times, t.requests
    )
    if not t.engine_ttft_spans or edge >= MIN_SHARE:
        return
    yield Gap(
        check="edge_ttft",
        what=(
            "TTFT is the engine's (gen_ai.latency.time_to_first_token), stamped after "
            "tokenization: no edge first-byte time (first_downstream_tx_byte_sent) to "
            "measure what users see"
        ),
        evidence=f"{t.engine_ttft_spans} engine spans with it in {t.traces_examined} traces",
        undecidable=(
            "ingress",
            "gateway_queue",
            "pending",
            "api_server",
            "ingress_network",
            "api_server_overhead",
        ),
        fix=fix(facts, gateway_file(facts), "record the first response byte at the edge"),
        cost="a few timestamps per gateway span",
        metrics=frozenset({"ttft"}),
    )
