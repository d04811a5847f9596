"""OTLP/JSON traces as the OpenTelemetry Collector's file exporter writes them (JSON lines,
one ExportTraceServiceRequest per line), with the spans the real components export."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tailtriage.model import Capture
from tailtriage.simulator.bundle._common import (
    ACTIVATOR_POD,
    GATEWAY_NODE,
    GATEWAY_POD,
    NAMESPACE,
    ROUTE,
    SERVICE_HOST,
    SERVICE_PORT,
    UPSTREAM_CLUSTER,
    attrs,
    hex_id,
    ns,
    octet,
    uuid,
)

#: requests per OTLP line: the Collector's batch processor sends bounded batches, and the file
#: exporter writes one ExportTraceServiceRequest per batch
REQUESTS_PER_LINE = 200

_KIND_SERVER = 2
_KIND_CLIENT = 3
_KIND_INTERNAL = 1


@dataclass(frozen=True)
class _Resource:
    service: str
    pod: str | None
    node: str | None
    namespace: str

    def to_otlp(self) -> dict[str, Any]:
        return {
            "attributes": attrs(
                {
                    "service.name": self.service,
                    "k8s.namespace.name": self.namespace,
                    "k8s.pod.name": self.pod,
                    "k8s.node.name": self.node,
                }
            )
        }


_SCOPES = {
    "istio-ingressgateway": "envoy",
    "activator": "knative.dev/serving/pkg/activator",
    "queue-proxy": "knative.dev/serving/pkg/queue",
    "vllm-http": "opentelemetry.instrumentation.fastapi",
    "vllm": "vllm.llm_engine",
}


@dataclass
class _Span:
    resource: _Resource
    scope: str
    body: dict[str, Any]


# -- attribute encoding: constants once, per-request values with typed helpers --------------
def _str(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _int(key: str, value: int) -> dict[str, Any]:
    return {"key": key, "value": {"intValue": str(value)}}


def _dbl(key: str, value: float) -> dict[str, Any]:
    return {"key": key, "value": {"doubleValue": value}}


_ENVOY_CONST = attrs(
    {
        "component": "proxy",
        "node_id": f"router~10.0.1.23~{GATEWAY_POD}.istio-system~istio-system.svc.cluster.local",
        "zone": "us-east-1a",
        "http.url": f"https://api.example.com{ROUTE}",
        "http.method": "POST",
        "http.protocol": "HTTP/1.1",
        "upstream_cluster": UPSTREAM_CLUSTER,
        "upstream_cluster.name": UPSTREAM_CLUSTER,
        "istio.canonical_service": "istio-ingressgateway",
        "istio.canonical_revision": "latest",
        "istio.mesh_id": "cluster.local",
        "istio.namespace": "istio-system",
        "istio.cluster_id": "Kubernetes",
    }
)
_ENVOY_DOWNSTREAM = attrs(
    {"peer.address": "203.0.113.7", "downstream_cluster": "-", "user_agent": "OpenAI/Python 1.54.0"}
)
_HTTP_CONST = attrs(
    {
        "http.request.method": "POST",
        "http.route": ROUTE,
        "url.path": ROUTE,
        "url.scheme": "http",
        "server.port": SERVICE_PORT,
        "network.protocol.version": "1.1",
        "user_agent.original": "OpenAI/Python 1.54.0",
    }
)
#: vLLM sets gen_ai.request.* only when truthy
_GENAI_PARAMS = attrs(
    {"gen_ai.request.temperature": 0.7, "gen_ai.request.top_p": 0.95, "gen_ai.request.n": 1}
)


# -- one request's trace --------------------------------------------------------------------
@dataclass(frozen=True)
class _Req:
    request_id: str
    trace_id: str
    arrival: float
    first_token: float | None
    finish: float
    prompt_tokens: int | None
    output_tokens: int | None
    status: str
    http_status: int
    replica: str | None
    node: str | None
    stages: tuple[tuple[str, float, float], ...]  # (stage, start, end) in time order


class _TraceBuilder:
    """Turns one request into the spans the real components along its path would export."""

    def __init__(self, req: _Req) -> None:
        self.req = req
        self.spans: list[_Span] = []
        self._n = 0
        self._ids: str | None = None
        self._request_uuid = uuid(req.trace_id)  # Envoy's x-request-id, on both gateway spans
        self.gateway = _Resource("istio-ingressgateway", GATEWAY_POD, GATEWAY_NODE, "istio-system")
        self.activator = _Resource("activator", ACTIVATOR_POD, GATEWAY_NODE, "knative-serving")
        self.pod = _Resource("vllm", req.replica, req.node, NAMESPACE)
        self.queue_proxy = _Resource("queue-proxy", req.replica, req.node, NAMESPACE)

    def _span_id(self) -> str:
        # one 64-byte hash per trace gives up to 8 span ids (a trace has at most 8 spans)
        if self._ids is None:
            self._ids = hex_id(f"{self.req.trace_id}/spans", 64)
        k = self._n
        self._n += 1
        return self._ids[16 * k : 16 * k + 16]

    def _add(
        self,
        resource: _Resource,
        scope: str,
        name: str,
        kind: int,
        start: float,
        end: float,
        parent: str | None,
        attributes: list[dict[str, Any]] | None = None,
        events: Sequence[tuple[str, float]] = (),
        error: bool = False,
    ) -> str:
        sid = self._span_id()
        body: dict[str, Any] = {
            "traceId": self.req.trace_id,
            "spanId": sid,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": ns(start),
            "endTimeUnixNano": ns(max(start, end)),
            "attributes": attributes or [],
            "status": {"code": 2} if error else {},
        }
        if parent is not None:
            body["parentSpanId"] = parent
        if events:
            body["events"] = [{"timeUnixNano": ns(t), "name": n} for n, t in events]
        self.spans.append(_Span(resource, scope, body))
        return sid

    def build(self) -> list[_Span]:
        r = self.req
        bounds = {s: (a, b) for s, a, b in r.stages}
        error = r.status != "ok"
        ingress_end = bounds.get("ingress", (r.arrival, r.arrival))[1]
        root = self._ingress_span(ingress_end, error)
        parent = self._add(
            self.gateway,
            _SCOPES["istio-ingressgateway"],
            f"router {UPSTREAM_CLUSTER} egress",
            _KIND_CLIENT,
            ingress_end,
            r.finish,
            root,
            self._envoy_tags(upstream=True),
            error=error,
        )
        # the hops between the gateway and the pod, in the order the request met them
        for stage, start, end in r.stages:
            if stage == "pending":
                parent = self._activator(start, end, parent)
            elif stage == "gateway_queue":
                parent = self._queue_proxy(start, end, parent)
        if "api_server" in bounds or "engine_queue" in bounds or r.first_token is not None:
            self._engine(bounds, parent, error)
        return self.spans

    def _envoy_tags(self, upstream: bool) -> list[dict[str, Any]]:
        r = self.req
        ok = r.status == "ok"
        tags = [
            *_ENVOY_CONST,
            _str("guid:x-request-id", self._request_uuid),
            _str("http.status_code", str(r.http_status)),
            _str("response_flags", "-" if ok else "UO" if r.http_status == 503 else "UT"),
        ]
        if upstream:
            ip = f"10.0.2.{octet(r.replica)}"
            tags += [_str("peer.address", ip), _str("upstream_address", f"{ip}:{SERVICE_PORT}")]
        else:
            tags += [
                *_ENVOY_DOWNSTREAM,
                _str("request_size", str(200 + 4 * (r.prompt_tokens or 0))),
                _str("response_size", str(150 + 6 * (r.output_tokens or 0))),
            ]
        if not ok:
            tags.append(_str("error", "true"))
        return tags

    def _ingress_span(self, ingress_end: float, error: bool) -> str:
        r = self.req
        # the simulated ingress (network, TLS on new connections) is spent receiving the
        # request: its last byte arrives when the gateway forwards it (no upstream pool wait)
        events: list[tuple[str, float]] = [
            ("last_downstream_rx_byte_received", ingress_end),
            ("first_upstream_tx_byte_sent", ingress_end),
        ]
        if r.first_token is not None:
            events.append(("first_upstream_rx_byte_received", r.first_token))
            events.append(("first_downstream_tx_byte_sent", r.first_token))
        events.append(("last_downstream_tx_byte_sent", r.finish))
        return self._add(
            self.gateway,
            _SCOPES["istio-ingressgateway"],
            f"{SERVICE_HOST}:{SERVICE_PORT}/*",  # Istio names the span after the route decorator
            _KIND_SERVER,
            r.arrival,
            r.finish,
            None,
            self._envoy_tags(upstream=False),
            events=events,
            error=error,
        )

    def _activator(self, start: float, end: float, parent: str) -> str:
        scope = _SCOPES["activator"]
        self._add(self.activator, scope, "throttler_try", _KIND_INTERNAL, start, end, parent)
        return self._add(
            self.activator, scope, "activator_proxy", _KIND_INTERNAL, end, self.req.finish, parent
        )

    def _queue_proxy(self, start: float, end: float, parent: str) -> str:
        scope = _SCOPES["queue-proxy"]
        qp = self._add(
            self.queue_proxy, scope, "queue_proxy", _KIND_INTERNAL, start, self.req.finish, parent
        )
        self._add(self.queue_proxy, scope, "queue_wait", _KIND_INTERNAL, start, end, qp)
        return qp

    def _engine(self, bounds: Mapping[str, tuple[float, float]], parent: str, error: bool) -> None:
        r = self.req
        api_start, api_end = bounds.get("api_server", (None, None)) or (None, None)
        q = bounds.get("engine_queue")
        pf = bounds.get("prefill")
        dec = bounds.get("decode")
        llm_start = q[0] if q else (pf[0] if pf else (api_end or r.finish))
        http_start = api_start if api_start is not None else llm_start
        http = self._add(
            self.pod,
            _SCOPES["vllm-http"],
            f"POST {ROUTE}",
            _KIND_SERVER,
            http_start,
            r.finish,
            parent,
            [*_HTTP_CONST, _int("http.response.status_code", r.http_status)],
            error=r.http_status >= 500,
        )
        if r.first_token is None:
            return  # the engine never produced a token: vLLM writes no llm_request
        in_queue = (q[1] - q[0]) if q else 0.0
        prefill = (pf[1] - pf[0]) if pf else 0.0
        decode = (dec[1] - dec[0]) if dec else max(0.0, r.finish - r.first_token)
        attributes = [
            _str("gen_ai.request.id", f"chatcmpl-{r.trace_id[:32]}"),
            *_GENAI_PARAMS,
            _dbl("gen_ai.latency.time_in_queue", in_queue),
            _dbl("gen_ai.latency.time_in_model_prefill", prefill),
            _dbl("gen_ai.latency.time_in_model_decode", decode),
            _dbl("gen_ai.latency.time_in_model_inference", prefill + decode),
            _dbl("gen_ai.latency.time_to_first_token", r.first_token - llm_start),
            _dbl("gen_ai.latency.e2e", r.finish - llm_start),
        ]
        if r.output_tokens:
            attributes.append(_int("gen_ai.request.max_tokens", r.output_tokens))
        if r.prompt_tokens is not None:
            attributes.append(_int("gen_ai.usage.prompt_tokens", r.prompt_tokens))
        if r.output_tokens is not None:
            attributes.append(_int("gen_ai.usage.completion_tokens", r.output_tokens))
        self._add(
            self.pod,
            _SCOPES["vllm"],
            "llm_request",
            _KIND_SERVER,
            llm_start,
            r.finish,
            http,
            attributes,
            error=error,
        )


# -- traces file ------------------------------------------------------------------------
def _requests(capture: Capture) -> list[_Req]:
    stages: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    st = capture.stages.to_pydict()
    for rid, stage, start, dur in zip(
        st["request_id"], st["stage"], st["start"], st["duration"], strict=True
    ):
        stages[rid].append((stage, start, start + dur))
    rq = capture.requests.to_pydict()
    out = []
    for i, rid in enumerate(rq["request_id"]):
        arrival = rq["arrival"][i]
        finish = rq["finish"][i]
        first = rq["first_token"][i]
        if finish is None:
            finish = first if first is not None else arrival
        status = rq["status"][i] or "ok"
        http_status = rq["http_status"][i] or (200 if status == "ok" else 503)
        trace_id = rq["trace_id"][i] or hex_id(f"request/{rid}", 16)
        out.append(
            _Req(
                request_id=rid,
                trace_id=trace_id.lower(),
                arrival=arrival,
                first_token=first,
                finish=finish,
                prompt_tokens=rq["prompt_tokens"][i],
                output_tokens=rq["output_tokens"][i],
                status=status,
                http_status=int(http_status),
                replica=rq["replica"][i],
                node=rq["node"][i],
                stages=tuple(sorted(stages.get(rid, ()), key=lambda s: (s[1], s[2]))),
            )
        )
    return out


def _export_request(spans: Iterable[_Span]) -> dict[str, Any]:
    """Group spans by resource and scope, as one ExportTraceServiceRequest."""
    grouped: dict[_Resource, dict[str, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for s in spans:
        grouped[s.resource][s.scope].append(s.body)
    return {
        "resourceSpans": [
            {
                "resource": res.to_otlp(),
                "scopeSpans": [
                    {"scope": {"name": scope}, "spans": bodies} for scope, bodies in scopes.items()
                ],
            }
            for res, scopes in grouped.items()
        ]
    }


def write_traces(capture: Capture, path: Path) -> int:
    reqs = _requests(capture)
    with open(path, "wb") as fh:
        for i in range(0, len(reqs), REQUESTS_PER_LINE):
            spans: list[_Span] = []
            for r in reqs[i : i + REQUESTS_PER_LINE]:
                spans.extend(_TraceBuilder(r).build())
            fh.write(orjson.dumps(_export_request(spans)))
            fh.write(b"\n")
    return len(reqs)
