"""What each engine exports: the queue gauge an autoscaler reads and the histograms that
separate queueing from execution (telemetry-conventions.md sections 1.2, 2.1, 2.5)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class EngineMetrics:
    name: str
    queue_gauge: str  # requests waiting in the engine: what the HPA/KEDA scale on
    group_by: str  # label that keeps models apart in the rules
    #: stage -> histogram (None: the engine has no such histogram)
    stages: Mapping[str, str | None]
    #: SLO metric -> (histogram, default bucket bounds, seconds)
    slis: Mapping[str, tuple[str, tuple[float, ...]]]


_VLLM_TTFT: Final = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                     5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
_VLLM_ITL: Final = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
                    5.0, 7.5, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
_VLLM_PHASE: Final = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                      50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
_SGLANG_TTFT: Final = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0,
                       80.0, 100.0, 200.0, 400.0)  # fmt: skip
_SGLANG_ITL: Final = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04,
                      0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)  # fmt: skip

_VLLM_STAGES: Final = {
    "engine_queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
}

ENGINE_METRICS: Final[Mapping[str, EngineMetrics]] = {
    "vllm": EngineMetrics(
        "vllm",
        "vllm:num_requests_waiting",
        "model_name",
        _VLLM_STAGES,
        {
            "ttft": ("vllm:time_to_first_token_seconds", _VLLM_TTFT),
            "itl": ("vllm:inter_token_latency_seconds", _VLLM_ITL),
            "tpot": ("vllm:request_time_per_output_token_seconds", _VLLM_ITL),
            "e2e": ("vllm:e2e_request_latency_seconds", _VLLM_PHASE),
        },
    ),
    "sglang": EngineMetrics(
        "sglang",
        "sglang:num_queue_reqs",
        "model_name",
        # SGLang has a queue histogram but no per-request prefill/decode histograms
        {"engine_queue": "sglang:queue_time_seconds", "prefill": None, "decode": None},
        {
            "ttft": ("sglang:time_to_first_token_seconds", _SGLANG_TTFT),
            "itl": ("sglang:inter_token_latency_seconds", _SGLANG_ITL),
            "e2e": ("sglang:e2e_request_latency_seconds", ()),
        },
    ),
    "dynamo": EngineMetrics(
        "dynamo",
        "dynamo_frontend_queued_requests",
        "model",
        # the workers pass their engine's (vLLM's) phase histograms through
        _VLLM_STAGES,
        {
            "ttft": ("dynamo_frontend_time_to_first_token_seconds", ()),
            "itl": ("dynamo_frontend_inter_token_latency_seconds", ()),
            "e2e": ("dynamo_frontend_request_duration_seconds", ()),
        },
    ),
}
