"""Build OTLP/JSON trace documents for tests, span by span (times in seconds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tailtriage.model import Capture

T0 = 1_700_000_000.0
KIND = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


@dataclass
class Sp:
    trace: str
    id: str
    parent: str | None
    name: str
    start: float  # seconds after T0
    end: float
    kind: str = "INTERNAL"
    service: str = "svc"
    attrs: Mapping[str, Any] = field(default_factory=dict)
    events: Sequence[tuple[str, float]] = ()  # (name, seconds after T0)
    resource: Mapping[str, Any] = field(default_factory=dict)
    error: bool = False


def any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def ns(t: float) -> str:
    return str(round((T0 + t) * 1e9))


def otlp_doc(spans: Sequence[Sp]) -> dict[str, Any]:
    groups: dict[tuple[str, tuple[tuple[str, Any], ...]], list[dict[str, Any]]] = {}
    for s in spans:
        body: dict[str, Any] = {
            "traceId": s.trace,
            "spanId": s.id,
            "name": s.name,
            "kind": KIND[s.kind],
            "startTimeUnixNano": ns(s.start),
            "endTimeUnixNano": ns(s.end),
            "attributes": [{"key": k, "value": any_value(v)} for k, v in s.attrs.items()],
            "status": {"code": 2} if s.error else {},
        }
        if s.parent:
            body["parentSpanId"] = s.parent
        if s.events:
            body["events"] = [{"name": n, "timeUnixNano": ns(t)} for n, t in s.events]
        key = (s.service, tuple(sorted(s.resource.items())))
        groups.setdefault(key, []).append(body)
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": k, "value": any_value(v)}
                        for k, v in {"service.name": svc, **dict(res)}.items()
                    ]
                },
                "scopeSpans": [{"scope": {"name": "test"}, "spans": bodies}],
            }
            for (svc, res), bodies in groups.items()
        ]
    }


def write_jsonl(path: Path, docs: Sequence[Mapping[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    return path


def tid(i: int) -> str:
    return f"{i + 1:032x}"


def sid(i: int, k: int) -> str:
    return f"{(i + 1) * 100 + k:016x}"


def vllm_trace(
    i: int,
    t: float,
    *,
    ingress: float = 0.05,
    router_gap: float = 0.01,
    api: float = 0.01,
    queue: float = 0.2,
    prefill: float = 0.3,
    decode: float = 1.0,
    edge_delay: float | None = 0.002,
) -> list[Sp]:
    """Istio gateway -> router egress -> FastAPI -> vLLM llm_request (V1 attributes)."""
    up = t + ingress
    http0 = up + router_gap
    llm0 = http0 + api
    ft = llm0 + queue + prefill
    fin = ft + decode
    events = [("first_downstream_tx_byte_sent", ft + edge_delay)] if edge_delay is not None else []
    gw = {"k8s.pod.name": "gw-0", "host.name": "node-gw"}
    pod = {"k8s.pod.name": "vllm-0", "k8s.node.name": "gpu-1", "host.name": "gpu-1"}
    envoy = {"component": "proxy", "http.status_code": "200"}
    return [
        Sp(
            tid(i),
            sid(i, 1),
            None,
            "api.example.com:443/*",
            t,
            fin + 0.003,
            "SERVER",
            "istio-ingressgateway",
            envoy,
            events,
            gw,
        ),
        Sp(
            tid(i),
            sid(i, 2),
            sid(i, 1),
            "router outbound|8000||vllm egress",
            up,
            fin + 0.002,
            "CLIENT",
            "istio-ingressgateway",
            envoy,
            (),
            gw,
        ),
        Sp(
            tid(i),
            sid(i, 3),
            sid(i, 2),
            "POST /v1/chat/completions",
            http0,
            fin + 0.001,
            "SERVER",
            "vllm",
            {"http.route": "/v1/chat/completions", "http.response.status_code": 200},
            (),
            pod,
        ),
        Sp(
            tid(i),
            sid(i, 4),
            sid(i, 3),
            "llm_request",
            llm0,
            fin,
            "SERVER",
            "vllm",
            {
                "gen_ai.usage.prompt_tokens": 100,
                "gen_ai.usage.completion_tokens": 50,
                "gen_ai.request.model": "llama",
                "gen_ai.latency.time_in_queue": queue,
                "gen_ai.latency.time_in_model_prefill": prefill,
                "gen_ai.latency.time_in_model_decode": decode,
                "gen_ai.latency.time_to_first_token": ft - llm0,
                "gen_ai.latency.e2e": fin - llm0,
            },
            (),
            pod,
        ),
    ]


#: the seconds an Envoy gateway spends on a request in :func:`envoy_pool_traces`
ENVOY_RX = 0.02  # TLS and the request body: the last byte arrives 20 ms after the span start
POOL_WAIT = 0.28  # then the request waits for a free upstream connection
CONNECT_TRY = 0.1  # a failed connect (UF) before the retry that gets through


def envoy_pool_traces(first: int) -> dict[str, list[Sp]]:
    """Istio ingress gateway traces (HCM span with verbose events, ``response_flags``, a
    ``router <cluster> egress`` child per try) behind a connection-pool limit, by case:

    * ``egress``: the request waits ``POOL_WAIT`` for a connection, then its try starts;
    * ``events_only``: no upstream span (``spawn_upstream_span`` off), the events bound the wait;
    * ``retried``: the first try fails to connect (``UF``) and the retry (``retry.count``)
      gets through: a pool wait of zero, then the connect failure (network);
    * ``connect_failure``: no upstream span and ``UF``: the event time is a connect failure."""
    out: dict[str, list[Sp]] = {}
    cases = ("egress", "events_only", "retried", "connect_failure")
    for k, case in enumerate(cases):
        i = first + k
        t = 10.0 * k
        spans = vllm_trace(i, t, ingress=ENVOY_RX + POOL_WAIT)
        hcm, up, http = spans[0], spans[1], spans[2]
        tx = t + ENVOY_RX + POOL_WAIT
        flags = "UF,URX" if case in ("retried", "connect_failure") else "-"
        hcm.attrs = {**hcm.attrs, "response_flags": flags}
        hcm.events = [
            ("last_downstream_rx_byte_received", t + ENVOY_RX),
            ("first_upstream_tx_byte_sent", tx),
            *hcm.events,
        ]
        if case == "retried":
            # the wait ended at once: the failed connect and the retry are the network's
            up.start = t + ENVOY_RX
            failed = Sp(
                up.trace,
                sid(i, 9),
                hcm.id,
                up.name,
                up.start,
                up.start + CONNECT_TRY,
                "CLIENT",
                up.service,
                {**up.attrs, "response_flags": "UF"},
                (),
                up.resource,
                error=True,
            )
            up.start = up.start + CONNECT_TRY
            up.attrs = {**up.attrs, "retry.count": "1"}
            spans.append(failed)
        if case in ("events_only", "connect_failure"):
            spans.remove(up)
            http.parent = hcm.id
        out[case] = spans
    return out


def envoy_breakdown(cap: Capture) -> dict[str, dict[str, float]]:
    """Per case of :func:`envoy_pool_traces` (first trace 0), its ingress and gateway_queue."""
    cases = ("egress", "events_only", "retried", "connect_failure")
    out = {}
    for k, case in enumerate(cases):
        got = {"ingress": 0.0, "gateway_queue": 0.0}
        for r in cap.stages.to_pylist():
            if r["request_id"] == tid(k) and r["stage"] in got:
                got[r["stage"]] += r["duration"]
        out[case] = got
    return out


#: what the Envoy scene must give: the pool wait a gateway queue, TLS, body, connect failures,
#: retries and transfer (router_gap: 10 ms from the try's start to the pod) ingress
ENVOY_WANT = {
    "egress": {"ingress": ENVOY_RX + 0.01, "gateway_queue": POOL_WAIT},
    "events_only": {"ingress": ENVOY_RX + 0.01, "gateway_queue": POOL_WAIT},
    "retried": {"ingress": ENVOY_RX + POOL_WAIT + 0.01, "gateway_queue": 0.0},
    "connect_failure": {"ingress": ENVOY_RX + POOL_WAIT + 0.01, "gateway_queue": 0.0},
}
