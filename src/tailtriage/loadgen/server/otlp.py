"""Server spans in vLLM's conventions, written as OTLP/JSON lines (Collector file-exporter
shape): an HTTP ``POST /v1/...`` SERVER span for the API server, parented on the incoming
``traceparent``, its child ``llm_request`` with the ``gen_ai.latency.*`` attributes of vLLM's
V1 engine, and that span's children ``vllm.request.queue`` / ``.prefill`` / ``.decode``
(newest vLLM main)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """(trace_id, parent span id) of a valid W3C traceparent, else None."""
    if not value:
        return None
    m = _TRACEPARENT.match(value.strip().lower())
    if m is None or m.group(1) == "0" * 32 or m.group(2) == "0" * 16:
        return None
    return m.group(1), m.group(2)


@dataclass(frozen=True)
class ServedRequest:
    """The timeline of one request through the simulated server (unix seconds)."""

    request_id: str
    traceparent: str | None
    path: str
    model: str
    http_start: float  # request received
    arrival: float  # handed to the engine (after the API server's own time)
    scheduled: float
    first_token: float
    finish: float
    prompt_tokens: int
    completion_tokens: int
    max_tokens: int
    status_code: int = 200
    finish_reason: str = "length"


def _kv(key: str, v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        val: dict[str, Any] = {"boolValue": v}
    elif isinstance(v, int):
        val = {"intValue": str(v)}
    elif isinstance(v, float):
        val = {"doubleValue": v}
    else:
        val = {"stringValue": str(v)}
    return {"key": key, "value": val}


def _ns(t: float) -> str:
    return str(int(t * 1e9))


class OtlpSpanWriter:
    """Buffers spans and appends one OTLP/JSON line per flush."""

    def __init__(self, path: Path, service_name: str = "vllm", seed: int = 0) -> None:
        self._fh: IO[bytes] = open(path, "ab")  # noqa: SIM115
        # its own stream, so ids never repeat the load generator's (both default to seed 0)
        self._rng = random.Random(f"tailtriage.serve-sim/{seed}")
        self._buf: list[dict[str, Any]] = []
        self.resource = {"attributes": [_kv("service.name", service_name)]}

    def _id(self, bits: int) -> str:
        return f"{self._rng.getrandbits(bits) or 1:0{bits // 4}x}"

    def add(self, r: ServedRequest) -> None:
        ctx = parse_traceparent(r.traceparent)
        trace_id, parent = ctx if ctx is not None else (self._id(128), None)
        http_id, llm_id = self._id(64), self._id(64)
        http: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": http_id,
            "name": f"POST {r.path}",
            "kind": 2,
            "startTimeUnixNano": _ns(r.http_start),
            "endTimeUnixNano": _ns(r.finish),
            "attributes": [
                _kv("http.request.method", "POST"),
                _kv("url.path", r.path),
                _kv("url.scheme", "http"),
                _kv("http.route", r.path),
                _kv("http.response.status_code", r.status_code),
            ],
            "status": {"code": 2 if r.status_code >= 500 else 0},
        }
        if parent is not None:
            http["parentSpanId"] = parent
        attrs = [
            _kv("gen_ai.request.id", r.request_id),
            _kv("gen_ai.response.model", r.model),
            _kv("gen_ai.request.max_tokens", r.max_tokens),
            _kv("gen_ai.usage.prompt_tokens", r.prompt_tokens),
            _kv("gen_ai.usage.completion_tokens", r.completion_tokens),
            _kv("gen_ai.latency.time_in_queue", r.scheduled - r.arrival),
            _kv("gen_ai.latency.time_to_first_token", r.first_token - r.arrival),
            _kv("gen_ai.latency.e2e", r.finish - r.arrival),
            _kv("gen_ai.latency.time_in_model_prefill", r.first_token - r.scheduled),
            _kv("gen_ai.latency.time_in_model_decode", r.finish - r.first_token),
            _kv("gen_ai.latency.time_in_model_inference", r.finish - r.scheduled),
        ]
        llm = {
            "traceId": trace_id,
            "spanId": llm_id,
            "parentSpanId": http_id,
            "name": "llm_request",
            "kind": 2,
            "startTimeUnixNano": _ns(r.arrival),
            "endTimeUnixNano": _ns(r.finish),
            "attributes": attrs,
            "status": {"code": 0},
        }
        spans = [http, llm]
        for name, a, b in (
            ("vllm.request.queue", r.arrival, r.scheduled),
            ("vllm.request.prefill", r.scheduled, r.first_token),
            ("vllm.request.decode", r.first_token, r.finish),
        ):
            spans.append({
                "traceId": trace_id, "spanId": self._id(64), "parentSpanId": llm_id,
                "name": name, "kind": 1, "startTimeUnixNano": _ns(a), "endTimeUnixNano": _ns(b),
            })  # fmt: skip
        self._buf.extend(spans)

    def flush(self) -> None:
        if not self._buf:
            return
        doc = {
            "resourceSpans": [
                {
                    "resource": self.resource,
                    "scopeSpans": [{"scope": {"name": "vllm.llm_engine"}, "spans": self._buf}],
                }
            ]
        }
        self._fh.write(orjson.dumps(doc) + b"\n")
        self._fh.flush()
        self._buf = []

    def close(self) -> None:
        self.flush()
        self._fh.close()
