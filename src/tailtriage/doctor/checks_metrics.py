"""Metric checks: engine metrics (present, of a current version), DCGM, and a scrape interval
fine enough for the incident."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tailtriage.doctor.check import register
from tailtriage.doctor.facts import Facts
from tailtriage.doctor.fixes import fix
from tailtriage.doctor.gap import Gap
from tailtriage.instrument import files

ENGINE_PREFIXES: Final = ("vllm:", "sglang:", "dynamo_", "trtllm", "tgi_", "nv_inference_")
#: names renamed or retired by newer engines -> the current name (telemetry-conventions 1.2)
RENAMED: Final = {
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
    "vllm:gpu_prefix_cache_queries_total": "vllm:prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_hits_total": "vllm:prefix_cache_hits_total",
    "vllm:cpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
}
#: the engine-queue histogram: queueing apart from execution in the engine (1.2)
QUEUE_HISTOGRAMS: Final = ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds")
#: Prometheus' rule of thumb: a rate() window spans at least 4 scrapes (survives one miss), so
#: an incident shorter than 4 scrape intervals leaves no rate to read
SCRAPES_PER_INCIDENT: Final = 4
#: incidents are judged at least this long: a breach shorter than a minute is below what the
#: short window of burn-rate alerting (5 m) acts on, and a detector bin can be 15 s
MIN_INCIDENT_S: Final = 60.0
DCGM_PREFIXES: Final = ("DCGM_FI_", "nv_gpu_utilization")


def _base(name: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


@register("engine_metrics", group="metrics")
def engine_metrics(facts: Facts) -> Iterator[Gap]:
    m = facts.metrics
    if m.any_prefix(*ENGINE_PREFIXES):
        return
    yield Gap(
        check="engine_metrics",
        what="no engine metrics (queue depth, KV-cache usage, TTFT/ITL histograms)",
        undecidable=(
            "compute_saturation",
            "kv_cache_pressure",
            "load_imbalance",
            "decode_memory_bound",
            "prefill_interference",
        ),
        fix=fix(facts, files.PROMETHEUS, "scrape the engine's /metrics"),
        cost="one scrape per pod per interval",
        metrics=frozenset({"ttft", "itl", "tpot", "e2e"}),
    )


@register("engine_metric_version", group="metrics")
def engine_metric_version(facts: Facts) -> Iterator[Gap]:
    names = {_base(n) for n in facts.metrics.names}
    old = sorted(n for n, new in RENAMED.items() if n in names and new not in names)
    engine = {n for n in names if n.startswith(("vllm:", "sglang:"))}
    no_queue = engine and not any(q in names for q in QUEUE_HISTOGRAMS)
    if not old and not no_queue:
        return
    parts = []
    if old:
        parts.append(
            "metric names of an older engine: " + ", ".join(f"{n} (now {RENAMED[n]})" for n in old)
        )
    if no_queue:
        parts.append("no engine queue-time histogram (vllm:request_queue_time_seconds)")
    yield Gap(
        check="engine_metric_version",
        what="; ".join(parts),
        # renamed metrics are read as aliases; only a missing queue histogram hides a stage
        undecidable=("engine_queue", "compute_saturation") if no_queue else (),
        fix=fix(
            facts,
            files.RECORDING_RULES,
            "upgrade the engine (vLLM 0.11 or newer) and use its current names",
        ),
        cost="an engine upgrade; dashboards and alerts on the old names must move too",
        metrics=frozenset({"ttft", "e2e"}) if no_queue else frozenset(),
    )


@register("dcgm", group="metrics")
def dcgm(facts: Facts) -> Iterator[Gap]:
    if facts.metrics.any_prefix(*DCGM_PREFIXES):
        return
    yield Gap(
        check="dcgm",
        what="no GPU metrics (DCGM exporter DCGM_FI_*): tensor-core and memory activity "
        "are unknown",
        undecidable=(
            "compute_saturation",
            "prefill_compute",
            "decode_memory_bound",
            "tensor_parallel_overhead",
        ),
        fix=fix(
            facts, files.PROMETHEUS, "run NVIDIA's dcgm-exporter and scrape it (job dcgm-exporter)"
        ),
        cost="one DaemonSet on GPU nodes; profiling fields (DCGM_FI_PROF_*) sample the GPU",
        metrics=frozenset({"ttft", "itl", "tpot", "e2e"}),
    )


@register("scrape_interval", group="metrics")
def scrape_interval(facts: Facts) -> Iterator[Gap]:
    m = facts.metrics
    if m.scrape_interval_s is None or facts.incident is None:
        return
    length = max(facts.incident[1] - facts.incident[0], MIN_INCIDENT_S)
    if m.scrape_interval_s * SCRAPES_PER_INCIDENT <= length:
        return
    yield Gap(
        check="scrape_interval",
        what=(
            f"scrape interval {m.scrape_interval_s:g} s is too coarse for a "
            f"{length:.0f} s incident (fewer than {SCRAPES_PER_INCIDENT} samples of "
            f"{m.scrape_interval_of})"
        ),
        undecidable=("compute_saturation", "kv_cache_pressure", "scaling_lag"),
        fix=fix(
            facts,
            files.PROMETHEUS,
            f"scrape every {max(1, int(length // SCRAPES_PER_INCIDENT))} s or less",
        ),
        cost="more samples stored (linear in the scrape rate)",
        metrics=frozenset({"ttft", "itl", "tpot", "e2e"}),
    )
