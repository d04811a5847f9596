"""Which exported metric names carry each signal the rules read.

Engines and exporters spell the same signal differently (``vllm:kv_cache_usage_perc`` vs the
deprecated ``vllm:gpu_cache_usage_perc``, SGLang's ``sglang:token_usage``, ...).  The rules ask
for a *signal* ("queue_waiting") and this table says which names may carry it, most specific
first.  When the sources' metric catalog is available its canonical names are used as well, so a
spelling it knows is found even if this table does not list it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

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
    }
)

#: exported names whose value is a percentage (0..100) and is read as a ratio
PERCENT_METRICS: Final[frozenset[str]] = frozenset(
    {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"}
)


def _canonical(name: str) -> str:
    """The sources' canonical spelling when its catalog knows the name, else the name."""
    try:
        from tailtriage.model.metric_catalog import canonical_metric
    except ImportError:  # the catalog is optional: this table alone still works
        return name
    try:
        return str(canonical_metric(name) or name)
    except (KeyError, ValueError):
        return name


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
