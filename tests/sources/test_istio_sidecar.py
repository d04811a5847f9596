"""The Istio sidecar's inbound span runs in the engine's pod: the time it holds the request
before the engine's span starts is the serving process's HTTP handling (the API server), not
network.  The trace is shaped as Istio 1.24 and vLLM export it (the ingress gateway's SERVER
span and router egress span, the sidecar's inbound span with ``upstream_cluster``
``inbound|<port>||<host>``, vLLM's ``llm_request`` span)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tailtriage.store.input import load_capture

T0 = 1_780_000_000.0


def _attrs(**kv: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for k, v in kv.items():
        key = k.replace("__", ".")
        if isinstance(v, float):
            out.append({"key": key, "value": {"doubleValue": v}})
        elif isinstance(v, int):
            out.append({"key": key, "value": {"intValue": str(v)}})
        else:
            out.append({"key": key, "value": {"stringValue": str(v)}})
    return out


def _span(
    sid: str, parent: str, name: str, kind: int, start: float, end: float, **kv: object
) -> dict[str, object]:
    return {
        "traceId": "f5cd18cdd193adfab9886cc352e6d769",
        "spanId": sid,
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(int((T0 + start) * 1e9)),
        "endTimeUnixNano": str(int((T0 + end) * 1e9)),
        "attributes": _attrs(**kv),
        "status": {},
    }


def _resource(service: str, spans: list[dict[str, object]]) -> dict[str, object]:
    return {
        "resource": {
            "attributes": _attrs(service__name=service, k8s__pod__name="vllm-7d9c8-nh5kb")
        },
        "scopeSpans": [{"scope": {}, "spans": spans}],
    }


def _trace(api_s: float) -> dict[str, object]:
    """Gateway at 0, sidecar inbound at 8 ms, the engine's span ``api_s`` later."""
    engine_start = 0.0085 + api_s
    return {
        "resourceSpans": [
            _resource(
                "istio-ingressgateway.istio-system",
                [
                    _span(
                        "110a3a56b5cce3af",
                        "",
                        "vllm.llm.svc.cluster.local:8000/*",
                        2,
                        0.0,
                        3.4,
                        component="proxy",
                        http__url="https://api.llm.example.com/v1/chat/completions",
                        http__method="POST",
                        upstream_cluster="outbound|8000||vllm.llm.svc.cluster.local",
                        http__status_code="200",
                        response_flags="-",
                    ),
                    _span(
                        "53e8406e81d20ba5",
                        "110a3a56b5cce3af",
                        "router outbound|8000||vllm.llm.svc.cluster.local egress",
                        3,
                        0.001,
                        3.399,
                        component="proxy",
                        upstream_cluster="outbound|8000||vllm.llm.svc.cluster.local",
                        response_flags="-",
                    ),
                ],
            ),
            _resource(
                "vllm.llm",
                [
                    _span(
                        "4d6867218eac1a6a",
                        "53e8406e81d20ba5",
                        "vllm.llm.svc.cluster.local:8000/*",
                        2,
                        0.0085,
                        3.398,
                        component="proxy",
                        http__url="http://vllm.llm.svc.cluster.local:8000/v1/chat/completions",
                        upstream_cluster="inbound|8000||vllm.llm.svc.cluster.local",
                        response_flags="-",
                    )
                ],
            ),
            _resource(
                "vllm",
                [
                    _span(
                        "20e18035d28fc21e",
                        "4d6867218eac1a6a",
                        "llm_request",
                        2,
                        engine_start,
                        3.397,
                        gen_ai__request__id="chatcmpl-7",
                        gen_ai__usage__prompt_tokens=1303,
                        gen_ai__usage__completion_tokens=119,
                        gen_ai__latency__time_to_first_token=0.26,
                        gen_ai__latency__e2e=3.397 - engine_start,
                        gen_ai__latency__time_in_queue=0.0,
                        gen_ai__latency__time_in_model_prefill=0.26,
                        gen_ai__latency__time_in_model_decode=3.05,
                    )
                ],
            ),
        ]
    }


@pytest.mark.parametrize("api_s", [0.02, 0.2])
def test_sidecar_time_before_the_engine_is_the_api_server(tmp_path: Path, api_s: float) -> None:
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(_trace(api_s)))
    cap = load_capture(path)
    stages: dict[str, float] = {}
    for row in cap.stages.to_pylist():
        stages[row["stage"]] = stages.get(row["stage"], 0.0) + row["duration"]
    # the gateway's 8.5 ms to the pod is the edge; the sidecar's hold before the engine is not
    assert stages.get("ingress", 0.0) == pytest.approx(0.0085, abs=0.003)
    assert stages["api_server"] == pytest.approx(api_s, abs=0.003)
