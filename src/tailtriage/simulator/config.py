"""Scenario configuration: frozen dataclasses, loaded from YAML and checked against their types.

The dataclass tree *is* the schema (documented key by key in ``docs/scenarios.md``): unknown
keys, wrong types and impossible values raise :class:`~tailtriage.errors.ConfigError` naming the
file and the dotted key.  :func:`apply_overrides` changes any setting by dotted key
(``{"hpa.metric": "vllm:num_requests_waiting", "engine.max_num_batched_tokens": 128}``); the
what-if and remediation code uses exactly these keys.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from tailtriage.errors import ConfigError

if typing.TYPE_CHECKING:
    from tailtriage.simulator.steptime import ModelShape


@dataclass(frozen=True)
class Dist:
    """A positive random quantity: ``constant`` (value), ``lognormal`` (median, sigma),
    ``uniform`` (low, high), ``exponential`` (mean), ``normal`` (mean, sigma); clipped to
    [min, max]."""

    kind: Literal["constant", "lognormal", "uniform", "exponential", "normal"] = "constant"
    value: float = 0.0
    median: float = 0.0
    sigma: float = 0.0
    mean: float = 0.0
    low: float = 0.0
    high: float = 0.0
    min: float = 0.0
    max: float = float("inf")


@dataclass(frozen=True)
class ModelConfig:
    name: str = "llama-3.1-8b"  # a shape from steptime.MODELS, or any name with the numbers below
    dtype: str = "bf16"  # weights: bf16, fp8, int8, awq, gptq, int4
    kv_dtype: str = "bf16"
    #: a dense model outside steptime.MODELS by its architecture numbers (its config.json, or
    #: a calibration's estimate from the name); all 0: ``name`` is a catalog shape
    params_b: float = 0.0
    layers: int = 0
    hidden: int = 0
    heads: int = 0
    kv_heads: int = 0

    @property
    def shape(self) -> ModelShape:
        """The shape the step time and KV cache are computed from."""
        from tailtriage.simulator.steptime import MODELS, ModelShape

        if self.params_b <= 0:
            return MODELS[self.name]
        return ModelShape(
            self.name, self.params_b, self.layers, self.hidden, self.heads, self.kv_heads
        )


@dataclass(frozen=True)
class GpuConfig:
    type: str = "H100"  # H100, H200, A100, A100-40GB, L40S, L4
    tp: int = 1
    pp: int = 1
    interconnect: Literal["nvlink", "pcie", "cross_node", "ib", "ethernet"] = "nvlink"


@dataclass(frozen=True)
class Coefficients:
    c0: float = 0.005
    prefill: float = 5e-5
    decode: float = 1e-4
    context: float = 1e-7
    batch: float = 0.0
    #: seconds per token of a compute-bound step (0: none): a step takes the longer of the
    #: line and ``compute`` x its tokens - a roofline's ridge, fitted (see FittedStepTime)
    compute: float = 0.0


@dataclass(frozen=True)
class FittedOn:
    """The model and GPUs a fitted step line was measured on."""

    model: ModelConfig = field(default_factory=ModelConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)


@dataclass(frozen=True)
class StepTimeConfig:
    mode: Literal["roofline", "fitted"] = "roofline"
    mfu: float = 0.6
    mbu: float = 0.8
    overhead_s: float = 0.002
    coefficients: Coefficients = field(default_factory=Coefficients)
    #: fitted: the hardware the line was measured on; on other hardware (another TP degree,
    #: interconnect, GPU, dtype or model) each step is the line times the roofline's ratio
    #: for that step (``steptime.RescaledStepTime``).  None: the line as it is, anywhere
    fitted_on: FittedOn | None = None


@dataclass(frozen=True)
class EngineConfig:
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    chunked_prefill: bool = True
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    num_gpu_blocks: int = 0  # 0: sized from GPU memory
    prefix_caching: bool = True


@dataclass(frozen=True)
class IngressConfig:
    latency_ms: Dist = field(default_factory=lambda: Dist("lognormal", median=5.0, sigma=0.3))
    tls_handshake_ms: float = 10.0  # extra on a new connection
    keepalive_reuse: float = 0.95  # share of requests that reuse a connection


@dataclass(frozen=True)
class GatewayConfig:
    #: least_request: Envoy's LEAST_REQUEST (Istio's DestinationRule), the fewer in flight of
    #: two pods drawn at random ("power of two choices"); least_outstanding: the fewest of all
    routing: Literal[
        "random", "round_robin", "least_request", "least_outstanding", "prefix_aware", "weighted"
    ] = "least_outstanding"
    #: weighted: each pod's relative share of the requests, in pod order (pods beyond the
    #: list weigh 1), blind to load - a consistent hash on a hot key, sticky sessions, a
    #: skewed ring; it applies from ``weighted_from_s``, ``routing_before`` until then
    weights: tuple[float, ...] = ()
    weighted_from_s: float = 0.0
    routing_before: Literal["random", "round_robin", "least_request", "least_outstanding"] = (
        "least_outstanding"
    )
    concurrency_limit: int = 0  # in-flight requests per replica; 0 = unlimited
    queue_limit: int = 0  # requests buffered at the gateway; 0 = unlimited (503 beyond)
    #: prefix_aware: leave the preferred replica when it has this many more in flight than
    #: the least loaded one
    imbalance_threshold: int = 1_000_000


@dataclass(frozen=True)
class ApiServerConfig:
    base_ms: Dist = field(default_factory=lambda: Dist("lognormal", median=3.0, sigma=0.3))
    per_prompt_token_us: float = 1.0  # tokenization cost
    workers: int = 8  # concurrent requests the frontend processes per replica


@dataclass(frozen=True)
class ScalePolicy:
    stabilization_s: float = 0.0
    pods: int = 4  # at most this many pods per period ...
    percent: float = 100.0  # ... or this percent, whichever is larger
    period_s: float = 15.0


@dataclass(frozen=True)
class HpaConfig:
    enabled: bool = True
    #: cpu | vllm:num_requests_waiting | vllm:kv_cache_usage_perc | vllm:num_requests_running |
    #: DCGM_FI_DEV_GPU_UTIL (GPU busy percent); any other name needs ``signal_weights``
    metric: str = "cpu"
    #: a metric the simulator does not produce (a custom queue gauge, an External metric),
    #: modelled per pod as ``w . (waiting, running, kv_usage, gpu_util_pct, 1)`` - the weights
    #: a calibration fits to the metric's recorded series (empty: ``metric`` is a known one)
    signal_weights: tuple[float, ...] = ()
    target: float = 0.8  # cpu: utilisation of the request (0.8 = 80 %); others: per-pod value
    min_replicas: int = 1
    max_replicas: int = 10
    sync_period_s: float = 15.0
    tolerance: float = 0.1
    scrape_interval_s: float = 15.0
    scrape_lag_s: float = 15.0  # scrape + adapter polling delay
    cpu_window_s: float = 60.0  # rate() window of the CPU usage counter
    #: the metric averaged over this window before each decision (Knative's KPA: its 60 s
    #: stable window); 0: the last scraped value, as an HPA reading an instant gauge does
    metric_window_s: float = 0.0
    #: Knative KPA's panic mode: when the metric over this shorter window asks for
    #: ``panic_threshold`` x the ready pods, scale on it at once and never in until it has
    #: stayed below for ``metric_window_s``; 0: no panic mode (an HPA)
    panic_window_s: float = 0.0
    panic_threshold: float = 2.0
    activation: float = 0.0  # KEDA: scale from zero only above this total metric value
    scale_up: ScalePolicy = field(default_factory=ScalePolicy)
    scale_down: ScalePolicy = field(
        default_factory=lambda: ScalePolicy(stabilization_s=300.0, pods=0, percent=100.0)
    )


@dataclass(frozen=True)
class PodsConfig:
    initial_replicas: int = 1
    scheduling_delay_s: float = 2.0
    gpus_per_node: int = 8
    nodes: int = 2
    max_nodes: int = 8
    node_provision_s: float = 240.0
    image_pull_s: float = 60.0
    image_cached: bool = True  # nodes that pulled once skip the pull
    #: nodes that join during the run boot with the image (baked into the node image, or a
    #: secondary boot disk): a pod on a new node skips the pull too
    node_image_cached: bool = False
    load_gb_s: float = 2.0  # weight-loading bandwidth
    warmup_s: float = 20.0  # CUDA graphs, compile, readiness probe
    #: after Ready, a new pod's engine steps take ``ready_warmup_factor`` x longer for
    #: ``ready_warmup_s`` (lazy graph capture, cold allocator and caches under the first
    #: traffic); 0 s / 1.0 = full speed at once
    ready_warmup_s: float = 0.0
    ready_warmup_factor: float = 1.0
    #: a readiness gate on a warm-up completion: that warm-up runs before Ready, without
    #: traffic (Ready moves ``ready_warmup_s`` later, the pod then serves at full speed)
    ready_warmup_gated: bool = False
    drain_s: float = 30.0  # graceful termination limit
    cpu_request_cores: float = 4.0
    #: pods already starting when the run begins (created before it, Ready inside it): each
    #: becomes Ready this many seconds after the start, beside the ``initial_replicas``
    starting_ready_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class CpuConfig:
    """CPU the serving container burns (what a CPU-based HPA sees)."""

    base_cores: float = 0.5
    per_request_core_s: float = 0.01
    per_token_core_s: float = 2e-5


@dataclass(frozen=True)
class Rollout:
    """A rolling update at ``at_s``: new pods get ``set`` applied (model swap, engine flags)."""

    at_s: float = 0.0
    max_surge: int = 1
    max_unavailable: int = 0
    set: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Arrivals:
    process: Literal["poisson", "gamma", "constant", "diurnal"] = "poisson"
    rate: float = 1.0  # requests per second (at the phase start)
    rate_to: float = -1.0  # ramp linearly to this rate by the phase end; <0 = constant
    cv: float = 1.0  # gamma: coefficient of variation of gaps (burstiness; 1 = Poisson)
    period_s: float = 3600.0  # diurnal
    amplitude: float = 0.5  # diurnal: rate * (1 + amplitude * sin(2 pi t / period))


@dataclass(frozen=True)
class Prefix:
    groups: int = 0  # distinct shared prefixes (system prompts / tenants); 0 = none
    shared_tokens: int = 0
    hot_share: float = 0.0  # share of requests using group 0


@dataclass(frozen=True)
class Phase:
    name: str = "steady"
    duration_s: float = 60.0
    arrivals: Arrivals = field(default_factory=Arrivals)
    prompt_tokens: Dist = field(default_factory=lambda: Dist("lognormal", median=500, sigma=0.6))
    output_tokens: Dist = field(default_factory=lambda: Dist("lognormal", median=200, sigma=0.6))
    prefix: Prefix = field(default_factory=Prefix)
    #: settings that change for requests arriving in this phase (ingress.*, api_server.*)
    set: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Replay:
    """Replay a trace file (Azure LLM inference trace CSV: TIMESTAMP, ContextTokens,
    GeneratedTokens) instead of the phases' arrival processes."""

    path: str = ""
    time_scale: float = 1.0  # >1 slows the trace down
    start_s: float = 0.0
    max_requests: int = 0


@dataclass(frozen=True)
class OutputConfig:
    token_times: Literal["auto", "on", "off"] = "auto"  # auto: on below 20k requests
    sample_interval_s: float = 15.0
    engine_sample_interval_s: float = 5.0
    namespace: str = "llm"
    deployment: str = "vllm"
    drain_limit_s: float = 600.0  # unfinished after duration + this -> status timeout
    #: False: no scraped series in the capture (the autoscaler still reads its own scrapes);
    #: the what-if replays read only requests and stages, and the series are a third of a run
    metrics: bool = True
    #: seconds after the start: the run ends as soon as every request that arrived by then
    #: has finished (the what-if measures a window's requests, and what comes after them
    #: cannot change them); None runs to the end
    stop_after_arrivals_s: float | None = None


@dataclass(frozen=True)
class ScenarioConfig:
    name: str = "scenario"
    description: str = ""
    root_cause: str = ""  # ground truth: a category of design 3.2 ("" = healthy)
    seed: int = 0
    start_unix_s: float = 1_767_261_600.0  # 2026-01-01T10:00:00Z
    model: ModelConfig = field(default_factory=ModelConfig)
    gpu: GpuConfig = field(default_factory=GpuConfig)
    step_time: StepTimeConfig = field(default_factory=StepTimeConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    ingress: IngressConfig = field(default_factory=IngressConfig)
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    api_server: ApiServerConfig = field(default_factory=ApiServerConfig)
    hpa: HpaConfig = field(default_factory=HpaConfig)
    pods: PodsConfig = field(default_factory=PodsConfig)
    cpu: CpuConfig = field(default_factory=CpuConfig)
    workload: tuple[Phase, ...] = (Phase(),)
    replay: Replay | None = None
    rollouts: tuple[Rollout, ...] = ()
    #: [start, end] seconds after the start: ground truth of the incident ([] = the phase
    #: named "incident", if any)
    incident_s: tuple[float, ...] = ()
    output: OutputConfig = field(default_factory=OutputConfig)

    @property
    def duration_s(self) -> float:
        return sum(p.duration_s for p in self.workload)

    def to_dict(self) -> dict[str, Any]:
        return _to_plain(self)  # type: ignore[no-any-return]


# -- loading and validation ------------------------------------------------------------------

_HPA_METRICS = (
    "cpu",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_requests_running",
    "DCGM_FI_DEV_GPU_UTIL",
)
#: the per-pod signals ``hpa.signal_weights`` weigh, in order (the last is a constant 1)
HPA_SIGNALS = (
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "DCGM_FI_DEV_GPU_UTIL",
    "1",
)


def load_scenario(path: str | Path) -> ScenarioConfig:
    """Read and validate a scenario YAML file."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read scenario ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "?"
        raise ConfigError(f"{p}:{where}: invalid YAML ({exc})") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"{p}: a scenario is a YAML mapping at the top level")
    return from_dict(data, source=str(p))


def from_dict(data: Mapping[str, Any], source: str = "scenario") -> ScenarioConfig:
    cfg = _build(ScenarioConfig, data, source, "")
    _check(cfg, source)
    return cfg  # type: ignore[no-any-return]


def apply_overrides(config: ScenarioConfig, overrides: Mapping[str, Any]) -> ScenarioConfig:
    """A new config with dotted keys replaced, e.g. ``{"engine.max_num_batched_tokens": 128}``.

    List items are addressed by index (``workload.1.arrivals.rate``); every phase's field at
    once by ``workload.*.<field>``.  The result is validated like a loaded file.
    """
    data = config.to_dict()
    for key, value in overrides.items():
        parts = key.split(".")
        _set_path(data, parts, value, key)
    return from_dict(data, source="--set")


def parse_override(text: str) -> tuple[str, Any]:
    """``key=value`` from the command line; the value is read as YAML (``128`` -> int)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects key=value, got {text!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _set_path(node: Any, parts: list[str], value: Any, key: str) -> None:
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        targets = range(len(node)) if head == "*" else [_index(head, len(node), key)]
        for i in targets:
            if rest:
                _set_path(node[i], rest, value, key)
            else:
                node[i] = value
        return
    if not isinstance(node, dict):
        raise ConfigError(f"--set {key}: {head!r} is not a setting (its parent is a value)")
    if head not in node:
        known = ", ".join(k for k in node if not k.startswith("_"))
        raise ConfigError(f"--set {key}: unknown key {head!r} (known here: {known})")
    if rest:
        if node[head] is None:
            node[head] = {}
        _set_path(node[head], rest, value, key)
    else:
        node[head] = value


def _index(text: str, n: int, key: str) -> int:
    try:
        i = int(text)
    except ValueError:
        raise ConfigError(f"--set {key}: {text!r} is not a list index") from None
    if not -n <= i < n:
        raise ConfigError(f"--set {key}: index {i} out of range (0..{n - 1})")
    return i


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _to_plain(v) for k, v in value.items()}
    return value


def _build(tp: Any, data: Any, source: str, key: str) -> Any:
    """Convert plain YAML data to ``tp``, raising ConfigError at the first mismatch."""
    where = key or "(top level)"
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: {where}: expected a mapping, got {_kind(data)}")
        hints, names = _fields(typing.cast(type, tp))
        for k in data:
            if k not in names:
                raise ConfigError(
                    f"{source}: {_join(key, str(k))}: unknown key (known: {', '.join(sorted(names))})"
                )
        kwargs = {k: _build(hints[k], v, source, _join(key, k)) for k, v in data.items()}
        try:
            return tp(**kwargs)  # type: ignore[operator]
        except ConfigError as exc:
            raise ConfigError(f"{source}: {where}: {exc}") from exc
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], data, source, key)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if data not in allowed:
            raise ConfigError(
                f"{source}: {where}: {data!r} is not one of {', '.join(map(str, allowed))}"
            )
        return data
    if origin is tuple:
        if not isinstance(data, list | tuple):
            raise ConfigError(f"{source}: {where}: expected a list, got {_kind(data)}")
        (item,) = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return tuple(_build(item, v, source, f"{key}.{i}") for i, v in enumerate(data))
    if origin in (Mapping, dict) or tp is Mapping:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: {where}: expected a mapping, got {_kind(data)}")
        return dict(data)
    return _scalar(tp, data, source, where)


@functools.cache
def _fields(tp: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A config dataclass's resolved field types and names: resolving the string annotations
    compiles each one, and every override (each what-if run) rebuilds the whole config."""
    return typing.get_type_hints(tp), frozenset(f.name for f in dataclasses.fields(tp))


def _scalar(tp: Any, data: Any, source: str, where: str) -> Any:
    if tp is Any:
        return data
    if tp is bool:
        if not isinstance(data, bool):
            raise ConfigError(f"{source}: {where}: expected true/false, got {data!r}")
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            if isinstance(data, float) and data.is_integer():
                return int(data)
            raise ConfigError(f"{source}: {where}: expected an integer, got {data!r}")
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            if isinstance(data, str) and data.strip().lower() in ("inf", ".inf", "infinity"):
                return float("inf")
            raise ConfigError(f"{source}: {where}: expected a number, got {data!r}")
        return float(data)
    if tp is str:
        if not isinstance(data, str):
            raise ConfigError(f"{source}: {where}: expected a string, got {data!r}")
        return data
    raise ConfigError(f"{source}: {where}: unsupported setting type {tp!r}")  # pragma: no cover


def _kind(data: Any) -> str:
    return "nothing" if data is None else type(data).__name__


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _check(cfg: ScenarioConfig, source: str) -> None:
    """Cross-field rules the types cannot express."""
    from tailtriage.simulator.steptime import GPUS, LINKS, MODELS

    def bad(key: str, why: str) -> ConfigError:
        return ConfigError(f"{source}: {key}: {why}")

    m = cfg.model
    if m.params_b > 0:
        if min(m.layers, m.hidden, m.heads, m.kv_heads) <= 0:
            raise bad("model.layers", "params_b needs layers, hidden, heads and kv_heads > 0")
        if m.hidden % m.heads or m.heads % m.kv_heads:
            raise bad("model.heads", "heads must divide hidden and be a multiple of kv_heads")
    elif m.name not in MODELS:
        raise bad(
            "model.name",
            f"unknown model {m.name!r}; known: {', '.join(MODELS)} (or give model.params_b, "
            "layers, hidden, heads, kv_heads)",
        )
    if cfg.gpu.type not in GPUS:
        raise bad("gpu.type", f"unknown GPU {cfg.gpu.type!r}; known: {', '.join(GPUS)}")
    if cfg.hpa.signal_weights:
        if len(cfg.hpa.signal_weights) != len(HPA_SIGNALS):
            raise bad(
                "hpa.signal_weights",
                f"needs {len(HPA_SIGNALS)} weights, one per {', '.join(HPA_SIGNALS)}",
            )
    elif cfg.hpa.metric not in _HPA_METRICS:
        raise bad(
            "hpa.metric",
            f"{cfg.hpa.metric!r} is not one of {', '.join(_HPA_METRICS)} "
            "(or give hpa.signal_weights to model it from the simulator's own signals)",
        )
    e = cfg.engine
    if e.max_num_batched_tokens < e.max_num_seqs:
        raise bad(
            "engine.max_num_batched_tokens",
            f"{e.max_num_batched_tokens} must be >= engine.max_num_seqs ({e.max_num_seqs})",
        )
    h = cfg.hpa
    if not 0 <= h.min_replicas <= h.max_replicas or h.max_replicas < 1:
        raise bad("hpa.min_replicas", "need 0 <= min_replicas <= max_replicas, max >= 1")
    if h.target <= 0:
        raise bad("hpa.target", "must be > 0")
    if cfg.pods.initial_replicas < 0:
        raise bad("pods.initial_replicas", "must be >= 0")
    w = cfg.gateway.weights
    if not all(math.isfinite(x) and x >= 0 for x in w) or (w and sum(w) <= 0):
        raise bad("gateway.weights", "relative shares, each >= 0, not all 0")
    if not all(math.isfinite(x) and x >= 0 for x in cfg.pods.starting_ready_s):
        raise bad("pods.starting_ready_s", "seconds after the start, each >= 0")
    if cfg.pods.ready_warmup_s < 0:
        raise bad("pods.ready_warmup_s", "must be >= 0")
    if cfg.pods.ready_warmup_factor <= 0:
        raise bad("pods.ready_warmup_factor", "must be > 0 (1.0 = full speed)")
    spans_nodes = cfg.gpu.tp * cfg.gpu.pp > cfg.pods.gpus_per_node
    if spans_nodes and not LINKS[cfg.gpu.interconnect].cross_node:
        raise bad("gpu.tp", "tp x pp exceeds gpus_per_node; set gpu.interconnect: ib or ethernet")
    if not cfg.workload:
        raise bad("workload", "needs at least one phase")
    for i, ph in enumerate(cfg.workload):
        if ph.duration_s <= 0:
            raise bad(f"workload.{i}.duration_s", "must be > 0")
        if ph.arrivals.rate < 0:
            raise bad(f"workload.{i}.arrivals.rate", "must be >= 0")
        for k in ph.set:
            if not k.startswith(("ingress.", "api_server.")):
                raise bad(
                    f"workload.{i}.set.{k}", "phases may only change ingress.* and api_server.*"
                )
    if cfg.incident_s and len(cfg.incident_s) != 2:
        raise bad("incident_s", "expected [start, end]")
