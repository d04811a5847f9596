"""What one realistic incident is made of: a frozen, nested specification.

Every knob of the mechanism model lives here, so that a fix can be re-run: ``with_overrides``
takes dotted keys (``engine.max_num_batched_tokens``, ``hpa.metric``, ``replicas`` ...) and
returns a new spec.  Hardware and model numbers follow ``reference/analysis-anchors.md`` 2.2
(dense BF16 FLOPS, HBM bandwidth) and the architectures' published configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Routing = Literal["random", "round_robin", "least_request", "hot_spot"]
Platform = Literal["istio", "knative_activator", "knative_direct", "kserve"]
HpaMetric = Literal["none", "cpu", "gpu_util", "queue", "concurrency"]


@dataclass(frozen=True)
class Gpu:
    name: str
    tflops: float  # dense BF16 TFLOPS
    mem_gb: float
    bw_tb_s: float  # HBM bandwidth
    link: Literal["nvlink", "pcie"]


@dataclass(frozen=True)
class Model:
    name: str
    params_b: float  # parameters, billions
    layers: int
    kv_heads: int
    head_dim: int
    d_model: int
    image_gb: float  # container image with the runtime
    weights_gb: float  # BF16 weights on disk

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V, every layer, BF16 (analysis-anchors 2.1)."""
        return 2.0 * self.layers * self.kv_heads * self.head_dim * 2.0


GPUS: Mapping[str, Gpu] = {
    "H100": Gpu("NVIDIA H100 80GB HBM3", 989.0, 80.0, 3.35, "nvlink"),
    "H200": Gpu("NVIDIA H200", 989.0, 141.0, 4.8, "nvlink"),
    "A100": Gpu("NVIDIA A100-SXM4-80GB", 312.0, 80.0, 2.039, "nvlink"),
    "L40S": Gpu("NVIDIA L40S", 181.0, 48.0, 0.864, "pcie"),
}

MODELS: Mapping[str, Model] = {
    "llama-8b": Model("meta-llama/Llama-3.1-8B-Instruct", 8.0, 32, 8, 128, 4096, 9.5, 16.1),
    "qwen-32b": Model("Qwen/Qwen2.5-32B-Instruct", 32.5, 64, 8, 128, 5120, 9.5, 65.5),
    "llama-70b": Model("meta-llama/Llama-3.3-70B-Instruct", 70.6, 80, 8, 128, 8192, 9.5, 141.0),
    "r1-14b": Model("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", 14.8, 48, 8, 128, 5120, 9.5, 29.5),
    "mistral-7b": Model("mistralai/Mistral-7B-Instruct-v0.3", 7.2, 32, 8, 128, 4096, 9.5, 14.5),
}


@dataclass(frozen=True)
class Phase:
    """Traffic from ``start_s`` (relative to the window start) on."""

    start_s: float
    rate: float  # requests per second at the phase start
    rate_to: float = -1.0  # linear ramp to this rate over ``ramp_s`` (-1: flat)
    ramp_s: float = 0.0
    prompt_median: float = 600.0  # tokens (log-normal)
    prompt_sigma: float = 0.6
    output_median: float = 180.0
    output_sigma: float = 0.6
    long_prompt_share: float = 0.0  # share of RAG-length prompts
    long_prompt_tokens: float = 6000.0


@dataclass(frozen=True)
class Workload:
    phases: tuple[Phase, ...]
    bursts: tuple[tuple[float, float, float], ...] = ()  # (start_s, duration_s, extra rps)
    diurnal: float = 0.0  # amplitude of a slow sine over the window
    max_prompt: int = 30000
    max_output: int = 8000


@dataclass(frozen=True)
class Gateway:
    max_connections: int = 0  # Envoy upstream pool limit (0: none)
    max_pending: int = 1_000_000  # http1MaxPendingRequests; beyond: 503 with flag UO
    proxy_ms: float = 0.4  # filter chain per request
    rtt_ms: float = 1.2  # client <-> gateway round trip
    keepalive_reuse: float = 0.97  # share of requests on a warm TLS connection
    tls_handshake_ms: float = 45.0
    connect_fail: float = 0.0  # share of upstream connects failing (UF, retried)
    retry_backoff_ms: float = 25.0
    container_concurrency: int = 0  # Knative per-pod limit (0: none)
    upstream_span: bool = True  # `router <cluster> egress` child spans
    verbose_events: bool = True  # HCM tracing.verbose span events


@dataclass(frozen=True)
class Hpa:
    metric: HpaMetric = "queue"
    target: float = 5.0  # per pod: CPU %, GPU util %, waiting requests, concurrency
    min_replicas: int = 2
    max_replicas: int = 8
    sync_s: float = 15.0
    scrape_lag_s: float = 15.0  # scrape + rate window + adapter before the HPA sees a value
    up_pods: int = 4  # scale-up policy: max(+up_pods, +100 %) per up_period_s
    up_period_s: float = 15.0
    down_stabilisation_s: float = 300.0
    tolerance: float = 0.1


@dataclass(frozen=True)
class Pods:
    image_cached: bool = True
    pull_mb_s: float = 120.0
    load_gb_s: float = 2.0  # weight loading
    warmup_s: float = 25.0  # CUDA graphs, compile, profile run
    schedule_s: float = 1.5
    node_scale_up_s: float = 0.0  # >0: no free GPU node, FailedScheduling until a node joins
    free_gpu_nodes: int = 99
    readiness_period_s: float = 10.0
    grace_s: float = 30.0


@dataclass(frozen=True)
class Engine:
    version: Literal["0.6", "0.10", "0.12", "main"] = "0.10"
    max_num_seqs: int = 128
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    gpu_memory_utilization: float = 0.9
    kv_tokens: int = 0  # >0 overrides the capacity computed from memory
    step_overhead_ms: float = 3.0  # scheduler + sampling + python per step
    mfu: float = 0.55
    mbu: float = 0.75
    spans: Literal["v1", "children", "semconv"] = "v1"


@dataclass(frozen=True)
class ApiServer:
    cpus: float = 4.0  # container CPU limit
    parse_ms: float = 1.5  # parse + chat template per request
    tokenize_us_per_token: float = 1.2
    stream_us_per_token: float = 40.0  # detokenize + SSE per output token
    http_span: bool = False  # opentelemetry-instrument FastAPI server span


@dataclass(frozen=True)
class Rollout:
    at_s: float = -1.0  # <0: none
    max_surge: int = 1
    max_unavailable: int = 0
    new_warmup_s: float = -1.0  # the new version's warm-up (-1: as Pods.warmup_s)
    image_cached: bool = False


@dataclass(frozen=True)
class Telemetry:
    sampling: float = 1.0
    skew_ms: float = 20.0  # pod clocks drawn in +-skew
    orphan_share: float = 0.002
    scrape_s: float = 15.0
    drop_families: tuple[str, ...] = ()  # metric families not exported
    traces: bool = True
    engine_spans: bool = True
    sidecar_spans: bool = True


@dataclass(frozen=True)
class Spec:
    platform: Platform = "istio"
    namespace: str = "llm"
    service: str = "vllm"
    model: str = "llama-8b"
    gpu: str = "H100"
    tp: int = 1
    interconnect: Literal["", "nvlink", "pcie", "ethernet"] = ""  # "": the GPU's own link
    replicas: int = 3
    routing: Routing = "least_request"
    hot_weight: float = 1.0  # hot_spot: the hot replica's weight against 1 for the others
    hot_from_s: float = 0.0  # hot_spot routing applies to requests from then on
    duration_s: float = 600.0
    incident_s: float = 300.0  # incident window start (baseline before it)
    workload: Workload = field(default_factory=lambda: Workload((Phase(0.0, 4.0),)))
    gateway: Gateway = field(default_factory=Gateway)
    incident_gateway: Gateway | None = None  # gateway settings from ``incident_s`` on
    hpa: Hpa = field(default_factory=Hpa)
    pods: Pods = field(default_factory=Pods)
    engine: Engine = field(default_factory=Engine)
    api: ApiServer = field(default_factory=ApiServer)
    rollout: Rollout = field(default_factory=Rollout)
    telemetry: Telemetry = field(default_factory=Telemetry)
    t0: float = 1_780_000_000.0  # wall clock of the window start (2026-05-28)


def with_overrides(spec: Spec, overrides: Mapping[str, object]) -> Spec:
    """``spec`` with dotted keys replaced: ``{"engine.max_num_seqs": 64, "replicas": 4}``."""
    out: object = spec
    for key, value in overrides.items():
        out = _replace(out, key.split("."), value, key)
    assert isinstance(out, Spec)
    return out


def _replace(obj: object, path: list[str], value: object, key: str) -> object:
    head, rest = path[0], path[1:]
    if not dataclasses.is_dataclass(obj) or head not in {f.name for f in dataclasses.fields(obj)}:
        raise KeyError(f"unknown override {key!r}")
    new = value if not rest else _replace(getattr(obj, head), rest, value, key)
    return dataclasses.replace(obj, **{head: new})  # type: ignore[type-var]
