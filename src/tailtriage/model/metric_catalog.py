"""The built-in catalog of the metrics that matter for LLM serving latency.

Each :class:`MetricSpec` names one *concept* (``kv_cache_usage``, ``ttft``, ...) and every
exported spelling of it across engines and engine versions that has the same meaning and
unit.  Spellings with another unit get their own entry (Triton's cumulative microsecond
counters are not TTFT histograms).  Names and units follow
``reference/telemetry-conventions.md`` sections 1.2, 2, 5.6, 6 and 7.

Lookups accept what pipelines do to names: ``vllm_`` for ``vllm:`` (and the other colon
prefixes), ``trtllm:`` for ``trtllm_``, counters with or without ``_total``, and histogram
parts ``_bucket``/``_sum``/``_count``::

    >>> canonical_metric("vllm:gpu_cache_usage_perc")
    'kv_cache_usage'
    >>> lookup("vllm_time_to_first_token_seconds_bucket").part
    'bucket'

The diagnosis reads *signals* (``queue_waiting``, ``kv_usage``, ...): :data:`SIGNAL_METRICS`
names the spellings that carry each and :func:`resolve` finds the one a capture has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Final, Literal

Kind = Literal["gauge", "counter", "histogram", "summary"]
Part = Literal["", "bucket", "sum", "count"]


@dataclass(frozen=True)
class MetricSpec:
    """One concept and its exported spellings (preferred, newest spelling first)."""

    canonical: str
    kind: Kind
    unit: str  # seconds, milliseconds, microseconds, ratio, percent, requests, tokens, ...
    meaning: str
    names: tuple[str, ...]

    @property
    def selector(self) -> str:
        """PromQL selector matching every spelling (and histogram parts) of this metric."""
        return '{__name__=~"' + "|".join(_regex_names(self)) + '"}'


@dataclass(frozen=True)
class MetricMatch:
    """A series name resolved against the catalog."""

    spec: MetricSpec
    name: str  # the catalog spelling it matched
    part: Part  # histogram/summary part, "" for the value itself


def _m(canonical: str, kind: Kind, unit: str, meaning: str, *names: str) -> MetricSpec:
    return MetricSpec(canonical, kind, unit, meaning, names)


_H: Final = "histogram"
_G: Final = "gauge"
_C: Final = "counter"

#: the catalog; diagnosis looks metrics up through :func:`spec` / :func:`lookup`
# fmt: off
CATALOG: Final[tuple[MetricSpec, ...]] = (
    # -- engine scheduler state ------------------------------------------------------------
    _m("requests_running", _G, "requests", "requests in the engine's running batch",
       "vllm:num_requests_running", "sglang:num_running_reqs", "trtllm_num_requests_running",
       "tgi_batch_current_size"),
    _m("requests_waiting", _G, "requests", "requests waiting in the engine's scheduler queue",
       "vllm:num_requests_waiting", "sglang:num_queue_reqs", "trtllm_num_requests_waiting",
       "tgi_queue_size", "nv_inference_pending_request_count"),
    _m("requests_swapped", _G, "requests", "requests swapped to CPU (vLLM V0 only)",
       "vllm:num_requests_swapped"),
    _m("kv_cache_usage", _G, "ratio", "KV-cache (token pool) usage, 1 = full",
       "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
       "trtllm_kv_cache_utilization"),
    _m("cpu_kv_cache_usage", _G, "ratio", "CPU KV-cache usage (vLLM V0 only)",
       "vllm:cpu_cache_usage_perc"),
    _m("preemptions", _C, "preemptions", "cumulative preemptions (KV cache ran out)",
       "vllm:num_preemptions_total", "vllm:num_preemptions"),
    _m("retracted_requests", _G, "requests", "SGLang requests retracted (its preemption)",
       "sglang:num_retracted_reqs"),
    _m("prefix_cache_queries", _C, "tokens",
       "prefix-cache lookups (tokens; blocks in early V1 under the gpu_ name)",
       "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    _m("prefix_cache_hits", _C, "tokens",
       "prefix-cache hits (tokens; blocks in early V1 under the gpu_ name)",
       "vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    _m("prefix_cache_hit_rate", _G, "ratio", "prefix-cache hit rate",
       "sglang:cache_hit_rate", "vllm:gpu_prefix_cache_hit_rate", "trtllm_kv_cache_hit_rate",
       "dynamo_frontend_kv_hit_rate"),
    _m("gen_throughput", _G, "tokens_per_second", "generation throughput",
       "sglang:gen_throughput"),
    # -- disaggregated serving, cache-aware routing, admission (telemetry-conventions 10) ----
    _m("requests_waiting_by_reason", _G, "requests",
       "vLLM waiting requests by reason (label reason: capacity | deferred)",
       "vllm:num_requests_waiting_by_reason"),
    _m("prompt_tokens_by_source", _C, "tokens",
       "vLLM prompt tokens by source (label source: local_compute | local_cache_hit | "
       "external_kv_transfer)", "vllm:prompt_tokens_by_source"),
    _m("external_prefix_cache_queries", _C, "tokens", "KV-connector cross-instance lookups",
       "vllm:external_prefix_cache_queries_total"),
    _m("external_prefix_cache_hits", _C, "tokens", "KV-connector cross-instance hits",
       "vllm:external_prefix_cache_hits_total"),
    _m("kv_transfer_latency", _G, "milliseconds", "SGLang PD: KV transfer latency",
       "sglang:kv_transfer_latency_ms"),
    _m("kv_transfer_speed", _G, "gigabytes_per_second", "SGLang PD: KV transfer speed",
       "sglang:kv_transfer_speed_gb_s"),
    _m("kv_transfer_failures", _C, "requests", "SGLang PD: failed KV transfers / bootstraps",
       "sglang:num_transfer_failed_reqs_total", "sglang:num_bootstrap_failed_reqs_total"),
    _m("kv_transfer_queue", _G, "requests", "SGLang PD: requests waiting for their KV cache",
       "sglang:num_decode_transfer_queue_reqs"),
    _m("epp_index_lookup_hits", _C, "lookups", "llm-d EPP: KV-cache index lookups that hit",
       "llm_d_epp_kv_cache_index_lookup_hits_total"),
    _m("requests_aborted", _C, "requests", "aborted requests (admission, client, timeout)",
       "sglang:num_aborted_requests_total"),
    _m("kv_block_lifetime", _H, "seconds", "vLLM KV block residency (--kv-cache-metrics)",
       "vllm:kv_block_lifetime_seconds"),
    _m("kv_block_idle_before_evict", _H, "seconds", "vLLM KV block idle time before eviction",
       "vllm:kv_block_idle_before_evict_seconds"),
    _m("kv_block_reuse_gap", _H, "seconds", "vLLM KV block time between reuses",
       "vllm:kv_block_reuse_gap_seconds"),
    # -- request latency histograms --------------------------------------------------------
    _m("ttft", _H, "seconds", "time to first token, from the engine frontend's arrival",
       "vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds",
       "trtllm_time_to_first_token_seconds", "dynamo_frontend_time_to_first_token_seconds"),
    _m("itl", _H, "seconds", "inter-token latency, one observation per gap",
       "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
       "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds",
       "trtllm_time_per_output_token_seconds", "dynamo_frontend_inter_token_latency_seconds"),
    _m("tpot", _H, "seconds", "per-request mean time per output token",
       "vllm:request_time_per_output_token_seconds", "tgi_request_mean_time_per_token_duration"),
    _m("e2e_latency", _H, "seconds", "request end to end, arrival to last token",
       "vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds",
       "trtllm_e2e_request_latency_seconds", "tgi_request_duration",
       "dynamo_frontend_request_duration_seconds"),
    _m("queue_time", _H, "seconds", "time waiting in the engine's scheduler queue",
       "vllm:request_queue_time_seconds", "sglang:queue_time_seconds",
       "trtllm_request_queue_time_seconds", "tgi_request_queue_duration"),
    _m("prefill_time", _H, "seconds", "prefill phase: scheduled to first token",
       "vllm:request_prefill_time_seconds", "trtllm_request_prefill_time_seconds"),
    _m("decode_time", _H, "seconds", "decode phase: first to last token",
       "vllm:request_decode_time_seconds", "trtllm_request_decode_time_seconds"),
    _m("inference_time", _H, "seconds", "running phase: prefill plus decode",
       "vllm:request_inference_time_seconds", "trtllm_request_inference_time_seconds",
       "tgi_request_inference_duration"),
    _m("validation_time", _H, "seconds", "API server validation before the engine",
       "tgi_request_validation_duration"),
    _m("stage_latency", _H, "seconds", "SGLang per-stage request latency (label stage)",
       "sglang:per_stage_req_latency_seconds"),
    _m("batch_forward_time", _H, "seconds", "TGI forward pass time (label method)",
       "tgi_batch_forward_duration"),
    _m("iteration_tokens", _H, "tokens", "prompt plus generation tokens per engine step",
       "vllm:iteration_tokens_total"),
    _m("request_prompt_tokens", _H, "tokens", "prompt tokens per request",
       "vllm:request_prompt_tokens", "sglang:prompt_tokens_histogram", "tgi_request_input_length",
       "dynamo_frontend_input_sequence_tokens"),
    _m("request_generation_tokens", _H, "tokens", "generated tokens per request",
       "vllm:request_generation_tokens", "sglang:generation_tokens_histogram",
       "tgi_request_generated_tokens", "dynamo_frontend_output_sequence_tokens"),
    # -- token and request counters --------------------------------------------------------
    _m("prompt_tokens", _C, "tokens", "prefill tokens processed",
       "vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "trtllm_prompt_tokens_total"),
    _m("generation_tokens", _C, "tokens", "tokens generated",
       "vllm:generation_tokens_total", "sglang:generation_tokens_total",
       "trtllm_generation_tokens_total", "dynamo_frontend_output_tokens_total"),
    _m("request_success", _C, "requests", "finished requests (label finished_reason)",
       "vllm:request_success_total", "trtllm_request_success_total", "tgi_request_success",
       "nv_inference_request_success"),
    _m("engine_startup_time", _G, "seconds", "engine start-up time (cold start)",
       "sglang:engine_startup_time"),
    _m("weight_load_time", _G, "seconds", "model weight loading time (cold start)",
       "sglang:engine_load_weights_time"),
    # -- Triton (cumulative microsecond counters; average = delta / delta(success)) -----------
    _m("triton_request_duration", _C, "microseconds", "cumulative request time",
       "nv_inference_request_duration_us"),
    _m("triton_queue_duration", _C, "microseconds", "cumulative queue time",
       "nv_inference_queue_duration_us"),
    _m("triton_compute_infer_duration", _C, "microseconds", "cumulative inference compute time",
       "nv_inference_compute_infer_duration_us"),
    _m("triton_inference_count", _C, "inferences", "inferences performed (batch items)",
       "nv_inference_count"),
    _m("triton_exec_count", _C, "executions", "model executions (batches)",
       "nv_inference_exec_count"),
    _m("triton_first_response", _H, "milliseconds", "time to first response (opt-in)",
       "nv_inference_first_response_histogram_ms"),
    _m("triton_request_failure", _C, "requests", "failed inference requests",
       "nv_inference_request_failure"),
    _m("triton_compute_input_duration", _C, "microseconds", "cumulative input processing time",
       "nv_inference_compute_input_duration_us"),
    _m("triton_compute_output_duration", _C, "microseconds",
       "cumulative output processing time", "nv_inference_compute_output_duration_us"),
    # Triton's TensorRT-LLM backend (triton-inference-server/tensorrtllm_backend, custom
    # metrics reporter): gauges split by a label, not by name
    _m("trtllm_backend_requests", _G, "requests",
       "TRT-LLM backend requests (label request_type: active | max | scheduled | context | "
       "waiting)", "nv_trt_llm_request_metrics"),
    _m("trtllm_backend_kv_blocks", _G, "blocks",
       "TRT-LLM backend KV-cache blocks (label kv_cache_block_type: max | free | used | "
       "tokens_per | fraction)", "nv_trt_llm_kv_cache_block_metrics"),
    _m("trtllm_backend_inflight_batcher", _G, "value",
       "TRT-LLM backend in-flight batcher state (label inflight_batcher_specific_metric)",
       "nv_trt_llm_inflight_batcher_metrics"),
    # -- gateway / frontend queues ---------------------------------------------------------
    _m("gateway_queue_size", _G, "requests", "requests queued at the gateway or frontend",
       "inference_pool_average_queue_size", "inference_pool_per_pod_queue_size",
       "dynamo_frontend_queued_requests", "llm_d_epp_flow_control_queue_size"),
    # -- GPU (DCGM exporter) ---------------------------------------------------------------
    _m("gpu_util", _G, "percent", "any kernel running (coarse; misleading for LLMs)",
       "DCGM_FI_DEV_GPU_UTIL"),
    _m("gpu_util_ratio", _G, "ratio", "GPU utilisation reported by Triton",
       "nv_gpu_utilization"),
    _m("sm_active", _G, "ratio", "SMs with at least one warp resident", "DCGM_FI_PROF_SM_ACTIVE"),
    _m("sm_occupancy", _G, "ratio", "warps resident / maximum", "DCGM_FI_PROF_SM_OCCUPANCY"),
    _m("gr_engine_active", _G, "ratio", "graphics engine busy", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    _m("tensor_active", _G, "ratio", "tensor pipe busy (prefill compute-bound signal)",
       "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    _m("dram_active", _G, "ratio", "HBM interface busy (decode memory-bound signal)",
       "DCGM_FI_PROF_DRAM_ACTIVE"),
    _m("nvlink_tx_bytes", _G, "bytes_per_second", "NVLink transmit (TP all-reduce traffic)",
       "DCGM_FI_PROF_NVLINK_TX_BYTES"),
    _m("nvlink_rx_bytes", _G, "bytes_per_second", "NVLink receive (TP all-reduce traffic)",
       "DCGM_FI_PROF_NVLINK_RX_BYTES"),
    _m("nvlink_bandwidth_total", _C, "counter", "NVLink bandwidth, all lanes",
       "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"),
    _m("mem_copy_util", _G, "percent", "memory controller busy", "DCGM_FI_DEV_MEM_COPY_UTIL"),
    _m("fb_used", _G, "mebibytes", "GPU framebuffer memory used", "DCGM_FI_DEV_FB_USED"),
    _m("sm_clock", _G, "megahertz", "SM clock (throttling indicator)", "DCGM_FI_DEV_SM_CLOCK"),
    _m("gpu_power", _G, "watts", "GPU power draw", "DCGM_FI_DEV_POWER_USAGE"),
    # -- autoscaling (kube-state-metrics HPA) -------------------------------------------------
    _m("hpa_current_replicas", _G, "replicas", "HPA current replicas",
       "kube_horizontalpodautoscaler_status_current_replicas"),
    _m("hpa_desired_replicas", _G, "replicas", "HPA desired replicas (> current = lag)",
       "kube_horizontalpodautoscaler_status_desired_replicas"),
    _m("hpa_min_replicas", _G, "replicas", "HPA minimum replicas",
       "kube_horizontalpodautoscaler_spec_min_replicas"),
    _m("hpa_max_replicas", _G, "replicas", "HPA maximum replicas",
       "kube_horizontalpodautoscaler_spec_max_replicas"),
    _m("hpa_target_metric", _G, "value", "HPA target (labels metric_name, metric_target_type)",
       "kube_horizontalpodautoscaler_spec_target_metric"),
    _m("hpa_current_metric", _G, "value", "HPA metric current value",
       "kube_horizontalpodautoscaler_status_target_metric"),
    _m("hpa_condition", _G, "bool", "HPA conditions (AbleToScale, ScalingActive, ScalingLimited)",
       "kube_horizontalpodautoscaler_status_condition"),
    _m("deployment_replicas_available", _G, "replicas", "available replicas of a Deployment",
       "kube_deployment_status_replicas_available"),
    _m("deployment_replicas_desired", _G, "replicas", "desired replicas of a Deployment",
       "kube_deployment_spec_replicas"),
    # -- pod lifecycle (kube-state-metrics; unix-second gauges) -------------------------------
    _m("pod_created_time", _G, "unix_seconds", "pod creation time", "kube_pod_created"),
    _m("pod_scheduled_time", _G, "unix_seconds", "pod scheduled time",
       "kube_pod_status_scheduled_time"),
    _m("pod_start_time", _G, "unix_seconds", "pod start time", "kube_pod_start_time"),
    _m("pod_initialized_time", _G, "unix_seconds", "pod initialized time",
       "kube_pod_status_initialized_time"),
    _m("pod_container_ready_time", _G, "unix_seconds", "pod containers ready time",
       "kube_pod_status_container_ready_time"),
    _m("pod_ready_time", _G, "unix_seconds", "pod ready time", "kube_pod_status_ready_time"),
    _m("pod_phase", _G, "bool", "pod phase (label phase)", "kube_pod_status_phase"),
    _m("pod_unschedulable", _G, "bool", "pod cannot be scheduled",
       "kube_pod_status_unschedulable"),
    _m("pod_waiting_reason", _G, "bool", "container waiting reason (label reason)",
       "kube_pod_container_status_waiting_reason"),
    _m("container_restarts", _C, "restarts", "container restarts",
       "kube_pod_container_status_restarts_total"),
    # -- container resources (cAdvisor) ----------------------------------------------------
    _m("container_cpu", _C, "cpu_seconds", "container CPU time (what CPU-based HPAs scale on)",
       "container_cpu_usage_seconds_total"),
    _m("container_memory", _G, "bytes", "container working-set memory",
       "container_memory_working_set_bytes"),
)
# fmt: on

#: colon prefixes that some pipelines rewrite to an underscore (and back)
_PREFIX_SWAPS: Final = (("vllm:", "vllm_"), ("sglang:", "sglang_"), ("trtllm_", "trtllm:"))
_PARTS: Final[tuple[tuple[str, Part], ...]] = (
    ("_bucket", "bucket"),
    ("_sum", "sum"),
    ("_count", "count"),
)


def _spellings(name: str) -> Iterable[str]:
    """A catalog name and its prefix-swapped twin."""
    yield name
    for a, b in _PREFIX_SWAPS:
        if name.startswith(a):
            yield b + name[len(a) :]


def _regex_names(spec: MetricSpec) -> list[str]:
    out: list[str] = []
    for name in spec.names:
        for spelled in _spellings(name):
            out.append(spelled)
            if spec.kind in ("histogram", "summary"):
                out.extend(spelled + suffix for suffix, _ in _PARTS)
            elif spec.kind == "counter" and not spelled.endswith("_total"):
                out.append(spelled + "_total")
    return out


@cache
def _index() -> Mapping[str, MetricMatch]:
    """Every accepted spelling -> its match (built once)."""
    index: dict[str, MetricMatch] = {}
    for spec in CATALOG:
        for name in spec.names:
            for spelled in _spellings(name):
                index.setdefault(spelled, MetricMatch(spec, name, ""))
                if spec.kind in ("histogram", "summary"):
                    for suffix, part in _PARTS:
                        index.setdefault(spelled + suffix, MetricMatch(spec, name, part))
                elif spec.kind == "counter":
                    # prometheus_client appends _total on exposition; OpenMetrics families drop it
                    if spelled.endswith("_total"):
                        index.setdefault(spelled[: -len("_total")], MetricMatch(spec, name, ""))
                    else:
                        index.setdefault(spelled + "_total", MetricMatch(spec, name, ""))
    return index


def lookup(name: str) -> MetricMatch | None:
    """Resolve an exported series name (any accepted spelling, any histogram part)."""
    return _index().get(name)


def canonical_metric(name: str) -> str | None:
    """The catalog concept an exported series name belongs to, else None."""
    match = lookup(name)
    return match.spec.canonical if match else None


@cache
def _by_canonical() -> Mapping[str, MetricSpec]:
    return {s.canonical: s for s in CATALOG}


def spec(canonical: str) -> MetricSpec:
    """The catalog entry of a concept; KeyError names the known ones."""
    try:
        return _by_canonical()[canonical]
    except KeyError:
        known = ", ".join(sorted(_by_canonical()))
        raise KeyError(f"unknown metric concept {canonical!r}; known: {known}") from None


def names_for(canonical: str) -> tuple[str, ...]:
    """Every exported spelling of a concept, preferred first."""
    return spec(canonical).names


def live_queries(specs: Iterable[MetricSpec] = CATALOG) -> tuple[tuple[str, str], ...]:
    """``(canonical, PromQL)`` pairs the live reader runs: raw selectors, so the series come
    back as exported (histograms as ``_bucket``/``_sum``/``_count``) and analyses compute
    rates themselves."""
    return tuple((s.canonical, s.selector) for s in specs)


# -- the signals the diagnosis rules read ------------------------------------------------
#
# Engines and exporters spell the same signal differently (``vllm:kv_cache_usage_perc`` vs the
# deprecated ``vllm:gpu_cache_usage_perc``, SGLang's ``sglang:token_usage``, ...).  The rules
# ask for a *signal* ("queue_waiting") and this table says which names may carry it, most
# specific first; the concepts above match any other spelling of those names.

#: signal -> metric names that carry it (first match present in the capture wins)
SIGNAL_METRICS: Final[Mapping[str, tuple[str, ...]]] = {
    # engine scheduler
    "queue_waiting": (
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "tgi_queue_size",
        "dynamo_frontend_queued_requests",
        "trtllm_num_requests_waiting",
    ),
    "running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "tgi_batch_current_size",
        "trtllm_num_requests_running",
    ),
    "kv_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "trtllm_kv_cache_utilization",
    ),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "prompt_tokens_counter": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens_counter": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
    ),
    # GPU (DCGM); ratios 0..1 except GPU_UTIL (percent, normalised when read)
    "gpu_busy": (
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_GPU_UTIL",
    ),
    "gpu_tensor": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",),
    "gpu_dram": ("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_MEM_COPY_UTIL"),
    "nvlink_bytes": (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    ),
    # autoscaler (kube-state-metrics)
    # (Knative's KPA reports the same as autoscaler_desired_pods / autoscaler_actual_pods)
    "hpa_desired": (
        "kube_horizontalpodautoscaler_status_desired_replicas",
        "autoscaler_desired_pods",
    ),
    "hpa_current": (
        "kube_horizontalpodautoscaler_status_current_replicas",
        "autoscaler_actual_pods",
    ),
    "hpa_max": ("kube_horizontalpodautoscaler_spec_max_replicas",),
    "hpa_min": ("kube_horizontalpodautoscaler_spec_min_replicas",),
    "hpa_target_metric": ("kube_horizontalpodautoscaler_spec_target_metric",),
    # serving container CPU (cAdvisor counter, cores = rate)
    "container_cpu": ("container_cpu_usage_seconds_total",),
    # requests finished at full rate (the queue's throughput, for Little's law): the gateway
    # cluster's upstream requests, else the engines' finished requests
    "requests_done": (
        "envoy_cluster_upstream_rq_total",
        "vllm:request_success_total",
        "sglang:num_requests_total",
        "trtllm_request_success_total",
        "tgi_request_success",
        "nv_inference_request_success",
    ),
    # gateway / endpoint picker queues
    "gateway_queue": (
        "inference_pool_average_queue_size",
        "envoy_cluster_upstream_rq_pending_active",
        "activator_request_concurrency",
    ),
}

#: signals whose metrics are counters (read as increase or rate, never as a level)
COUNTER_SIGNALS: Final[frozenset[str]] = frozenset(
    {
        "preemptions",
        "prompt_tokens_counter",
        "generation_tokens_counter",
        "container_cpu",
        "requests_done",
    }
)

#: exported names whose value is a percentage (0..100) and is read as a ratio
PERCENT_METRICS: Final[frozenset[str]] = frozenset(
    {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"}
)


def _canonical(name: str) -> str:
    """The catalog's concept when it knows the name, else the name."""
    return canonical_metric(name) or name


def resolve(signal: str, present: Iterable[str]) -> str | None:
    """The exported metric name carrying ``signal`` among ``present`` names, else None."""
    names = set(present)
    for candidate in SIGNAL_METRICS.get(signal, ()):
        if candidate in names:
            return candidate
    wanted = {_canonical(c) for c in SIGNAL_METRICS.get(signal, ())}
    for name in sorted(names):
        if _canonical(name) in wanted:
            return name
    return None
