"""Removing one kind of telemetry from a bundle on purpose: files deleted, spans or span
events filtered out of the OTLP/JSON traces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson

ENGINE_SERVICE = "vllm"
GATEWAY_SERVICE = "istio-ingressgateway"
#: keep one trace in this many (95 % removed)
KEEP_ONE_IN = 20


def _edit_traces(bundle: Path, edit: Callable[[dict], dict | None]) -> None:
    """Rewrite every OTLP/JSON line, passing each resourceSpans entry through ``edit``."""
    for path in bundle.glob("*.otlp.jsonl"):
        out = []
        for line in path.read_bytes().splitlines():
            doc = orjson.loads(line)
            kept = [r for r in (edit(rs) for rs in doc["resourceSpans"]) if r is not None]
            if kept:
                out.append(orjson.dumps({"resourceSpans": kept}))
        path.write_bytes(b"\n".join(out) + b"\n")


def _service(rs: dict) -> str:
    for a in rs["resource"]["attributes"]:
        if a["key"] == "service.name":
            return str(a["value"]["stringValue"])
    return ""


def drop_engine_spans(bundle: Path) -> None:
    _edit_traces(bundle, lambda rs: None if _service(rs) == ENGINE_SERVICE else rs)


def drop_gateway_events(bundle: Path) -> None:
    def edit(rs: dict) -> dict:
        if _service(rs) == GATEWAY_SERVICE:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span.pop("events", None)
        return rs

    _edit_traces(bundle, edit)


def drop_most_traces(bundle: Path) -> None:
    def edit(rs: dict) -> dict | None:
        for ss in rs["scopeSpans"]:
            ss["spans"] = [s for s in ss["spans"] if int(s["traceId"][:8], 16) % KEEP_ONE_IN == 0]
        rs["scopeSpans"] = [ss for ss in rs["scopeSpans"] if ss["spans"]]
        return rs if rs["scopeSpans"] else None

    _edit_traces(bundle, edit)


def drop_trace_context(bundle: Path) -> None:
    """The gateway forwards no traceparent: the engine starts a trace of its own."""

    def edit(rs: dict) -> dict:
        if _service(rs) == ENGINE_SERVICE:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["traceId"] = span["traceId"][16:] + span["traceId"][:16]
                    if span["name"].startswith("POST "):  # the engine's outermost span
                        span.pop("parentSpanId", None)
        return rs

    _edit_traces(bundle, edit)


def drop_service_name(bundle: Path) -> None:
    """The engine runs without OTEL_SERVICE_NAME: the SDK's default service name."""

    def edit(rs: dict) -> dict:
        for a in rs["resource"]["attributes"]:
            if a["key"] == "service.name" and a["value"]["stringValue"] == ENGINE_SERVICE:
                a["value"]["stringValue"] = "unknown_service:python"
        return rs

    _edit_traces(bundle, edit)


def delete_files(pattern: str) -> Callable[[Path], None]:
    def cut(bundle: Path) -> None:
        found = list(bundle.glob(pattern))
        assert found, f"the bundle has no {pattern} to remove"
        for p in found:
            p.unlink()

    return cut


#: removal -> (how, the checks that must name it)
REMOVALS: dict[str, tuple[Callable[[Path], None], set[str]]] = {
    "engine spans": (drop_engine_spans, {"engine_spans"}),
    "HPA series": (delete_files("prometheus-kube_horizontalpodautoscaler_*.json"), {"hpa_series"}),
    "DCGM": (delete_files("prometheus-DCGM_*.json"), {"dcgm"}),
    # without Envoy's events the edge's first byte is gone too: TTFT is the engine's
    "gateway events": (drop_gateway_events, {"gateway_timing", "edge_ttft"}),
    "95 % of traces": (drop_most_traces, {"sampling"}),
    "trace context at the gateway": (drop_trace_context, {"trace_context"}),
    "OTEL_SERVICE_NAME": (drop_service_name, {"service_name"}),
}
