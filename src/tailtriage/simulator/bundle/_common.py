"""Helpers shared by the bundle writers: ids, OTLP attribute encoding, RFC 3339 times and the
names of the (fictional but realistically named) deployment the bundle describes."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

NAMESPACE = "llm"
SERVICE_HOST = "vllm.llm.svc.cluster.local"
SERVICE_PORT = 8000
UPSTREAM_CLUSTER = f"outbound|{SERVICE_PORT}||{SERVICE_HOST}"
ROUTE = "/v1/chat/completions"
GATEWAY_POD = "istio-ingressgateway-6d8f7c9b4-x2xkq"
GATEWAY_NODE = "ip-10-0-1-17.ec2.internal"
ACTIVATOR_POD = "activator-5c8d9b7f6d-q7wtn"
IMAGE = "vllm/vllm-openai:v0.11.0"
DEPLOYMENT = "vllm"


def hex_id(seed: str, nbytes: int) -> str:
    return hashlib.blake2b(seed.encode(), digest_size=nbytes).hexdigest()


def ns(t: float) -> str:
    """OTLP/JSON writes 64-bit integers as decimal strings."""
    return str(round(t * 1e9))


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    else:
        v = {"stringValue": str(value)}
    return {"key": key, "value": v}


def attrs(d: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [attr(k, v) for k, v in d.items() if v is not None]


def rfc3339(t: float, micro: bool = False) -> str:
    dt = datetime.fromtimestamp(t, tz=UTC)
    if micro:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")  # Kubernetes Time has second precision


def uuid(trace_id: str) -> str:
    h = hex_id(trace_id + "/x-request-id", 16)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


@functools.lru_cache(maxsize=4096)
def octet(name: str | None) -> int:
    return 2 + int(hex_id(name or "-", 1), 16) % 250
