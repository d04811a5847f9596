"""The names of the files ``tailtriage instrument`` writes (doctor's fixes point at them).

One place, so a fix line never names a file the command does not write."""

from __future__ import annotations

from typing import Final, Literal

Gateway = Literal["istio", "envoy", "knative", "nginx"]
Engine = Literal["vllm", "sglang", "dynamo"]
Exporter = Literal["file", "clickhouse", "tempo", "jaeger"]

GATEWAYS: Final[tuple[Gateway, ...]] = ("istio", "envoy", "knative", "nginx")
ENGINES: Final[tuple[Engine, ...]] = ("vllm", "sglang", "dynamo")
EXPORTERS: Final[tuple[Exporter, ...]] = ("file", "clickhouse", "tempo", "jaeger")

COLLECTOR: Final = "otel-collector.yaml"
PROMETHEUS: Final = "prometheus.yaml"
RECORDING_RULES: Final = "recording-rules.yaml"
ALERT_RULES: Final = "alert-rules.yaml"
HPA: Final = "hpa.yaml"
KEDA: Final = "keda-scaledobject.yaml"
GUIDE: Final = "README.md"


def gateway_file(gateway: str) -> str:
    """The gateway's tracing config: NGINX's is nginx.conf text, the others are YAML."""
    return "gateway-nginx.conf" if gateway == "nginx" else f"gateway-{gateway}.yaml"


def engine_file(engine: str) -> str:
    return f"engine-{engine}.yaml"


def command(gateway: str | None, engine: str | None, out: str = "instrument/") -> str:
    """The `tailtriage instrument` command line for this stack (istio/vllm when unknown)."""
    return (
        f"tailtriage instrument --gateway {gateway or 'istio'} --engine {engine or 'vllm'} "
        f"--out {out}"
    )
