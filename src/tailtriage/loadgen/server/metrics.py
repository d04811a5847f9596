"""A vLLM-compatible ``/metrics`` (Prometheus text exposition, vLLM V1 names and default
buckets from telemetry-conventions.md 1.2), written without prometheus_client."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
PHASE_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
ITER_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


@dataclass
class Histogram:
    name: str
    help: str
    buckets: Sequence[float]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, v)] += 1
        self.total += v
        self.n += 1

    def render(self, labels: str) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cum = 0
        for le, c in zip(self.buckets, self.counts, strict=False):
            cum += c
            out.append(f'{self.name}_bucket{{{labels},le="{_num(le)}"}} {cum}')
        out.append(f'{self.name}_bucket{{{labels},le="+Inf"}} {self.n}')
        out.append(f"{self.name}_sum{{{labels}}} {self.total!r}")
        out.append(f"{self.name}_count{{{labels}}} {self.n}")
        return out


def _num(v: float) -> str:
    return str(float(v))


class VllmMetrics:
    """Counters, gauges and histograms of one simulated engine (engine index 0)."""

    def __init__(self, model_name: str) -> None:
        self.labels = f'engine="0",model_name="{_escape(model_name)}"'
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.preemptions = 0
        self.success: dict[str, int] = {}
        h = Histogram
        self.ttft = h(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS,
        )
        self.itl = h(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS,
        )
        self.tpot = h(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = h(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            PHASE_BUCKETS,
        )
        self.queue = h(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            PHASE_BUCKETS,
        )
        self.inference = h(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            PHASE_BUCKETS,
        )
        self.prefill = h(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            PHASE_BUCKETS,
        )
        self.decode = h(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            PHASE_BUCKETS,
        )
        self.prompt_len = h(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKEN_BUCKETS
        )
        self.gen_len = h(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            TOKEN_BUCKETS,
        )
        self.iter_tokens = h(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            ITER_TOKEN_BUCKETS,
        )

    def render(self) -> str:
        lb = self.labels
        out = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{lb}}} {float(self.running)}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{lb}}} {float(self.waiting)}",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{lb}}} {self.kv_usage!r}",
        ]
        for name, help_, v in (
            (
                "vllm:num_preemptions_total",
                "Cumulative number of preemption from the engine.",
                self.preemptions,
            ),
            ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", self.prompt_tokens),
            (
                "vllm:generation_tokens_total",
                "Number of generation tokens processed.",
                self.generation_tokens,
            ),
        ):
            out += [
                f"# HELP {name} {help_}",
                f"# TYPE {name} counter",
                f"{name}{{{lb}}} {float(v)}",
            ]
        out += [
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
        ]
        for reason in sorted(set(self.success) | {"stop", "length"}):
            out.append(
                f'vllm:request_success_total{{{lb},finished_reason="{reason}"}} '
                f"{float(self.success.get(reason, 0))}"
            )
        for hist in (self.ttft, self.itl, self.tpot, self.e2e, self.queue, self.inference,
                     self.prefill, self.decode, self.prompt_len, self.gen_len, self.iter_tokens):  # fmt: skip
            out += hist.render(lb)
        return "\n".join(out) + "\n"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
