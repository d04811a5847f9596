"""Traces as the OpenTelemetry Collector's file exporter writes them: OTLP/JSON, one
``ExportTraceServiceRequest`` per line (a batch of at most 512 spans, grouped by resource),
hex ids, integer enums, nanosecond times as decimal strings (telemetry-conventions 5.1).

Span shapes per hop (telemetry-conventions 1.1, 4.1, 4.2, 4.4): the Istio ingress gateway's
HCM span (named by the route decorator ``<host>:<port>/*``, Envoy's legacy tags, verbose
events, response flags), Envoy's ``router <cluster> egress`` upstream span per try, the pod's
inbound sidecar span, Knative's ``throttler_try`` / ``activator_proxy`` and
``queue_proxy`` / ``queue_wait``, the FastAPI server span of ``opentelemetry-instrument``, and
vLLM's ``llm_request`` (V1 attributes; with ``vllm.request.*`` children on newest main; named
``chat <model>`` with the GenAI opt-in).  Head sampling keeps or drops whole traces; every pod
has its own clock offset; a few engine spans lose their parent (orphans)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from realistic.outcome import Outcome
from realistic.spec import MODELS

#: spans per exported batch (the batch processor's default send_batch_size)
BATCH = 512
_SERVER, _CLIENT, _INTERNAL = 2, 3, 1


@dataclass(frozen=True)
class TraceOptions:
    sampling: float
    skew_ms: float
    orphan_share: float
    engine_spans: bool
    sidecar_spans: bool
    gateway_events: bool


def _kv(key: str, value: object) -> dict[str, Any]:
    t = type(value)
    if t is str:
        return {"key": key, "value": {"stringValue": value}}
    if t is float:
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, (int, np.integer)):
        return {"key": key, "value": {"intValue": str(int(value))}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


@functools.lru_cache(maxsize=4096)
def _c(key: str, value: str | int | bool) -> dict[str, Any]:
    """A constant attribute, built once (orjson writes shared objects as often as needed)."""
    return _kv(key, value)


class _Ids:
    """Random hex ids, drawn from the seeded generator in blocks."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.buf = ""
        self.pos = 0

    def _take(self, n: int) -> str:
        if self.pos + n > len(self.buf):
            self.buf, self.pos = self.rng.bytes(1 << 16).hex(), 0
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def span(self) -> str:
        return self._take(16)

    def trace(self) -> str:
        return self._take(32)


class _Spans:
    """Spans of one bundle, grouped by resource."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.by_res: dict[tuple[tuple[str, str], ...], list[dict[str, Any]]] = {}
        self.order: list[tuple[float, tuple[tuple[str, str], ...], dict[str, Any]]] = []

    def ns(self, t: float, skew: float) -> str:
        return str(round((self.t0 + t + skew) * 1e9))

    def add(self, res: tuple[tuple[str, str], ...], span: dict[str, Any], end: float) -> None:
        self.order.append((end, res, span))


def write_traces(o: Outcome, folder: Path, opts: TraceOptions, seed: int) -> dict[str, int]:
    """Write ``traces-*.json``; return counts (requests sampled, spans, orphans)."""
    rng = np.random.default_rng([seed, 7])
    ids = _Ids(rng)
    s = o.spec
    pod_skew = rng.uniform(-opts.skew_ms, opts.skew_ms, len(o.pods) + 1) / 1e3
    gw_skew = float(pod_skew[-1])
    keep = rng.uniform(size=len(o.gw_in)) < opts.sampling
    orphan = rng.uniform(size=len(o.gw_in)) < opts.orphan_share
    spans = _Spans(s.t0)
    gw_res = _gateway_resource(s)
    counts = {"sampled_requests": 0, "spans": 0, "orphans": 0}
    for rid in np.flatnonzero(keep):
        if np.isnan(o.dispatch[rid]) or (o.status[rid] == 200 and np.isnan(o.finish[rid])):
            continue  # still in flight when the traces were collected: nothing exported yet
        counts["sampled_requests"] += 1
        _request(o, int(rid), spans, ids, gw_res, gw_skew, pod_skew, opts, bool(orphan[rid]))
        counts["orphans"] += int(orphan[rid])
    counts["spans"] = len(spans.order)
    _dump(spans, folder)
    return counts


def _gateway_resource(s: Any) -> tuple[tuple[str, str], ...]:
    return (
        ("service.name", "istio-ingressgateway.istio-system"),
        ("k8s.namespace.name", "istio-system"),
        ("k8s.pod.name", "istio-ingressgateway-5f8c7d9b6-x2x7q"),
        ("service.version", "1.24.2"),
    )


def _pod_resource(o: Outcome, pod: int, service: str) -> tuple[tuple[str, str], ...]:
    p = o.pods[pod]
    return (
        ("service.name", service),
        ("k8s.namespace.name", o.spec.namespace),
        ("k8s.pod.name", p.name),
        ("k8s.node.name", p.node),
        ("k8s.deployment.name", o.spec.service),
    )


def _span(
    tid: str,
    sid: str,
    parent: str,
    name: str,
    kind: int,
    start: str,
    end: str,
    attrs: list[dict[str, Any]],
    events: list[dict[str, Any]] | None = None,
    error: bool = False,
) -> dict[str, Any]:
    sp: dict[str, Any] = {
        "traceId": tid,
        "spanId": sid,
        "parentSpanId": parent,
        "flags": 257,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": start,
        "endTimeUnixNano": end,
        "attributes": attrs,
        "status": {"code": 2} if error else {},
    }
    if events:
        sp["events"] = events
    return sp


def _request(
    o: Outcome,
    rid: int,
    spans: _Spans,
    ids: _Ids,
    gw_res: tuple[tuple[str, str], ...],
    gw_skew: float,
    pod_skew: np.ndarray,
    opts: TraceOptions,
    orphan: bool,
) -> None:
    s = o.spec
    host = f"{s.service}.{s.namespace}.svc.cluster.local"
    cluster = f"outbound|8000||{host}"
    tid, ns = ids.trace(), spans.ns
    failed = o.status[rid] != 200
    pod = int(o.pod[rid])
    end = o.edge_end[rid] if not failed else o.dispatch[rid] + 0.0004
    gw_id = ids.span()
    flags = "UO" if failed else ("URX" if o.retries[rid] and False else "-")
    attrs = [
        _c("component", "proxy"),
        _c(
            "node_id",
            "router~10.8.1.17~istio-ingressgateway-5f8c7d9b6-x2x7q.istio-system~istio-system.svc.cluster.local",
        ),
        _c("zone", "us-central1-a"),
        _kv("guid:x-request-id", f"{rid:032x}"),
        _kv("http.url", f"https://api.{s.namespace}.example.com/v1/chat/completions"),
        _c("http.method", "POST"),
        _c("http.protocol", "HTTP/1.1"),
        _c("downstream_cluster", "-"),
        _c("user_agent", "OpenAI/Python 1.58.1"),
        _kv("request_size", str(int(o.req.prompt[rid]) * 4 + 220)),
        _kv("response_size", str(0 if failed else int(o.req.output[rid]) * 38)),
        _c("upstream_cluster", cluster),
        _c("upstream_cluster.name", cluster),
        _kv("http.status_code", str(int(o.status[rid]))),
        _kv("response_flags", flags),
        _c("peer.address", "10.8.0.1"),
        _c("istio.canonical_revision", "latest"),
        _c("istio.canonical_service", "istio-ingressgateway"),
        _c("istio.mesh_id", "cluster.local"),
        _c("istio.namespace", "istio-system"),
    ]
    if pod >= 0 and not failed:
        attrs.append(_kv("upstream_address", f"{o.pods[pod].ip}:8000"))
    if o.retries[rid]:
        attrs.append(_c("retry.count", "1"))
    events = None
    if opts.gateway_events and not failed:
        g = gw_skew
        marks = [
            ("last_downstream_rx_byte_received", o.rx_done[rid]),
            ("first_upstream_tx_byte_sent", o.up_tx[rid]),
            ("last_upstream_tx_byte_sent", o.up_tx[rid] + 0.0001),
            ("first_upstream_rx_byte_received", o.edge_first[rid] - 0.0003),
            ("first_downstream_tx_byte_sent", o.edge_first[rid]),
            ("last_upstream_rx_byte_received", o.edge_end[rid] - 0.0003),
            ("last_downstream_tx_byte_sent", o.edge_end[rid]),
        ]
        events = [{"timeUnixNano": ns(t, g), "name": n, "attributes": []} for n, t in marks]
    name = f"{host}:8000/*"
    if s.platform != "istio":
        name = f"{s.service}.{s.namespace}.example.com:80/*"
    gw = _span(
        tid,
        gw_id,
        "",
        name,
        _SERVER,
        ns(o.gw_in[rid], gw_skew),
        ns(end, gw_skew),
        attrs,
        events,
        error=failed,
    )
    spans.add(gw_res, gw, end)
    if failed or pod < 0:
        return
    parent = gw_id
    if s.platform in ("knative_activator", "kserve"):
        parent = _activator(o, rid, spans, ids, tid, gw_id, gw_skew)
    elif s.gateway.upstream_span:
        parent = _upstream(o, rid, spans, ids, tid, gw_id, gw_skew, cluster)
    _pod_side(o, rid, spans, ids, tid, parent, float(pod_skew[pod]), opts, orphan, host)


def _upstream(
    o: Outcome, rid: int, spans: _Spans, ids: _Ids, tid: str, parent: str, skew: float, cluster: str
) -> str:
    ns = spans.ns
    res = _gateway_resource(o.spec)
    start = o.dispatch[rid]
    name = f"router {cluster} egress"
    base = [
        _c("component", "proxy"),
        _c("upstream_cluster", cluster),
        _c("http.method", "POST"),
        _c("http.protocol", "HTTP/1.1"),
    ]
    if o.retries[rid]:
        fail_end = start + 0.018
        sp = _span(
            tid,
            ids.span(),
            parent,
            name,
            _CLIENT,
            ns(start, skew),
            ns(fail_end, skew),
            [*base, _c("response_flags", "UF"), _c("error", "true")],
            error=True,
        )
        spans.add(res, sp, fail_end)
        start = o.up_tx[rid] - 0.0002
        base.append(_c("retry.count", "1"))
    sid = ids.span()
    sp = _span(
        tid,
        sid,
        parent,
        name,
        _CLIENT,
        ns(start, skew),
        ns(o.edge_end[rid] - 0.0002, skew),
        [
            *base,
            _c("http.status_code", "200"),
            _c("response_flags", "-"),
            _kv("upstream_address", f"{o.pods[int(o.pod[rid])].ip}:8000"),
        ],
    )
    spans.add(res, sp, o.edge_end[rid])
    return sid


def _activator(
    o: Outcome, rid: int, spans: _Spans, ids: _Ids, tid: str, parent: str, skew: float
) -> str:
    ns = spans.ns
    res = (
        ("service.name", "activator"),
        ("k8s.namespace.name", "knative-serving"),
        ("k8s.pod.name", "activator-6f8d8c6d4-q8k2m"),
    )
    a = [_c("http.method", "POST"), _c("http.url", "/v1/chat/completions")]
    thr = _span(
        tid,
        ids.span(),
        parent,
        "throttler_try",
        _INTERNAL,
        ns(o.pool_in[rid], skew),
        ns(o.dispatch[rid], skew),
        a,
    )
    spans.add(res, thr, o.dispatch[rid])
    sid = ids.span()
    prox = _span(
        tid,
        sid,
        parent,
        "activator_proxy",
        _CLIENT,
        ns(o.dispatch[rid], skew),
        ns(o.edge_end[rid] - 0.0002, skew),
        a,
    )
    spans.add(res, prox, o.edge_end[rid])
    return sid


def _pod_side(
    o: Outcome,
    rid: int,
    spans: _Spans,
    ids: _Ids,
    tid: str,
    parent: str,
    skew: float,
    opts: TraceOptions,
    orphan: bool,
    host: str,
) -> None:
    s, ns, pod = o.spec, spans.ns, int(o.pod[rid])
    fin = o.finish[rid]
    if s.platform == "istio":
        if opts.sidecar_spans:
            res = _pod_resource(o, pod, f"{s.service}.{s.namespace}")
            sid = ids.span()
            attrs = [
                _c("component", "proxy"),
                _c("http.method", "POST"),
                _kv("http.url", f"http://{host}:8000/v1/chat/completions"),
                _c("http.status_code", "200"),
                _c("response_flags", "-"),
                _kv("upstream_cluster", f"inbound|8000||{host}"),
                _kv("istio.canonical_service", s.service),
                _kv("istio.namespace", s.namespace),
            ]
            sp = _span(
                tid,
                sid,
                parent,
                f"{host}:8000/*",
                _SERVER,
                ns(o.pod_in[rid] - 0.0003, skew),
                ns(fin + 0.0004, skew),
                attrs,
            )
            spans.add(res, sp, fin)
            parent = sid
    else:
        res = _pod_resource(o, pod, "queue-proxy")
        sid = ids.span()
        qp = _span(
            tid,
            sid,
            parent,
            "queue_proxy",
            _SERVER,
            ns(o.pod_in[rid], skew),
            ns(fin + 0.0003, skew),
            [_c("http.method", "POST")],
        )
        spans.add(res, qp, fin)
        wait = _span(
            tid,
            ids.span(),
            sid,
            "queue_wait",
            _INTERNAL,
            ns(o.pod_in[rid], skew),
            ns(o.qp_done[rid], skew),
            [],
        )
        spans.add(res, wait, o.qp_done[rid])
        parent = sid
    if not opts.engine_spans:
        return
    res = _pod_resource(o, pod, "vllm")
    if orphan:
        parent = ids.span()  # the hop that carried the context was never exported
    if s.api.http_span:
        sid = ids.span()
        attrs = [
            _c("http.method", "POST"),
            _c("http.route", "/v1/chat/completions"),
            _c("http.scheme", "http"),
            _kv("http.status_code", 200),
            _kv("net.host.port", 8000),
        ]
        sp = _span(
            tid,
            sid,
            parent,
            "POST /v1/chat/completions",
            _SERVER,
            ns(o.qp_done[rid], skew),
            ns(fin + 0.0002, skew),
            attrs,
        )
        spans.add(res, sp, fin)
        parent = sid
    _engine(o, rid, spans, ids, tid, parent, skew, res)


def _engine(
    o: Outcome,
    rid: int,
    spans: _Spans,
    ids: _Ids,
    tid: str,
    parent: str,
    skew: float,
    res: tuple[tuple[str, str], ...],
) -> None:
    s, ns = o.spec, spans.ns
    st, q, sc, f, fin = (
        o.llm_start[rid],
        o.queued[rid],
        o.scheduled[rid],
        o.first[rid],
        o.finish[rid],
    )
    model = MODELS[s.model].name
    attrs = [
        _kv("gen_ai.request.id", f"chatcmpl-{rid:08x}"),
        _kv("gen_ai.usage.prompt_tokens", int(o.req.prompt[rid])),
        _kv("gen_ai.usage.completion_tokens", int(o.req.output[rid])),
        _kv("gen_ai.request.max_tokens", int(max(o.req.output[rid], 256))),
        _kv("gen_ai.request.temperature", 0.7),
        _kv("gen_ai.latency.time_to_first_token", float(f - st)),
        _kv("gen_ai.latency.e2e", float(fin - st)),
        _kv("gen_ai.latency.time_in_queue", float(sc - q)),
        _kv("gen_ai.latency.time_in_model_prefill", float(f - sc)),
        _kv("gen_ai.latency.time_in_model_decode", float(fin - f)),
        _kv("gen_ai.latency.time_in_model_inference", float(fin - sc)),
    ]
    if s.engine.version == "0.6":
        attrs.append(_kv("gen_ai.response.model", model))
    name = "llm_request"
    if s.engine.spans == "semconv":
        name = f"chat {model}"
        attrs += [_c("gen_ai.operation.name", "chat"), _kv("gen_ai.request.model", model)]
    sid = ids.span()
    spans.add(res, _span(tid, sid, parent, name, _SERVER, ns(st, skew), ns(fin, skew), attrs), fin)
    if s.engine.spans == "children":
        pre = o.preempted[rid] > 0
        for n, a, b in (
            ("vllm.request.queue", q, sc),
            ("vllm.request.prefill", sc, f),
            ("vllm.request.decode", f, fin),
        ):
            extra = [_kv("preempted", True)] if pre and n != "vllm.request.queue" else []
            spans.add(
                res, _span(tid, ids.span(), sid, n, _INTERNAL, ns(a, skew), ns(b, skew), extra), b
            )


def _dump(spans: _Spans, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    order = sorted(spans.order, key=lambda x: x[0])
    lines: list[bytes] = []
    for i in range(0, len(order), BATCH):
        groups: dict[tuple[tuple[str, str], ...], list[dict[str, Any]]] = {}
        for _, res, sp in order[i : i + BATCH]:
            groups.setdefault(res, []).append(sp)
        doc = {
            "resourceSpans": [
                {
                    "resource": {"attributes": [_kv(k, v) for k, v in res]},
                    "scopeSpans": [{"scope": _scope(dict(res)["service.name"]), "spans": sps}],
                }
                for res, sps in groups.items()
            ]
        }
        lines.append(orjson.dumps(doc))
    per_file = 40
    for j in range(0, max(len(lines), 1), per_file):
        part = lines[j : j + per_file]
        (folder / f"traces-{j // per_file:03d}.json").write_bytes(b"\n".join(part) + b"\n")


def _scope(service: str) -> dict[str, str]:
    if service == "vllm":
        return {"name": "vllm.tracing", "version": ""}
    if service in ("activator", "queue-proxy"):
        return {"name": "knative.dev/serving", "version": ""}
    return {"name": "envoy", "version": ""}
