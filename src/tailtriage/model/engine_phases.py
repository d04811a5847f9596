"""Which engine histogram measures which request latency or stage, per engine (data).

Metrics-only triage reads these: an engine's latency histograms (TTFT, e2e, ITL) give the
percentiles, its phase histograms (queue, prefill, decode, ...) split them into stages.  Each
:class:`EngineProfile` lists, for one engine, the families in the order to prefer them and the
label selector that picks a phase out of a shared family (SGLang's
``per_stage_req_latency_seconds{stage=...}``).  Names are as exported; the ``vllm_`` spelling
is accepted by the reader as well.  Sources of every name:

* vLLM: ``vllm-project/vllm vllm/v1/metrics/loggers.py`` (reference/telemetry-conventions.md
  1.2); ``time_per_output_token_seconds`` is the pre-0.11 name of the per-gap ITL histogram.
* SGLang: ``sgl-project/sglang python/sglang/srt/metrics/collector.py`` (telemetry-conventions
  2.1 and 10): ``queue_time_seconds`` = forward entry - wait-queue entry;
  ``per_stage_req_latency_seconds{stage}`` with the ``RequestStage`` values ``prefill_forward``,
  ``decode_loop``, ``prefill_transfer_kv_cache``, ``tokenize``.
* TensorRT-LLM: ``NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py`` (2.4), vLLM's V0 set
  with the ``trtllm_`` prefix.
* TGI: ``huggingface/text-generation-inference docs/source/reference/metrics.md`` (2.2): no TTFT;
  ``tgi_request_validation_duration`` is the API server's own time.
* NVIDIA Dynamo: ``ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs`` (2.5): the
  frontend's histograms measure from the HTTP frontend, the workers pass the engine's own
  ``vllm:*`` / ``sglang:*`` metrics through, so the difference is frontend + router + transit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: request-level latencies a profile can give: SLO metric -> what the histogram observes
LATENCIES: Final = ("ttft", "e2e", "itl", "tpot")


@dataclass(frozen=True)
class Family:
    """One histogram family, optionally narrowed to the series with the given labels."""

    name: str
    where: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        if not self.where:
            return self.name
        return self.name + "{" + ",".join(f'{k}="{v}"' for k, v in self.where) + "}"


@dataclass(frozen=True)
class EngineProfile:
    """The latency and phase histograms of one engine.

    ``latencies``: SLO metric -> candidate families, preferred first.  ``phases``: stage ->
    candidate families; ``ttft_stages`` / ``e2e_stages`` say which stages make up TTFT and e2e
    on this engine, in path order; the part of TTFT or e2e no phase covers is ``residual``."""

    engine: str
    latencies: tuple[tuple[str, tuple[Family, ...]], ...]
    phases: tuple[tuple[str, tuple[Family, ...]], ...]
    ttft_stages: tuple[str, ...]
    e2e_stages: tuple[str, ...]
    residual: str = "api_server"  # what TTFT minus its phases is on this engine
    #: measured where: "engine" (the serving process) or "frontend" (in front of the engines)
    measured_at: str = "engine"

    def latency(self, metric: str) -> tuple[Family, ...]:
        return dict(self.latencies).get(metric, ())

    def phase(self, stage: str) -> tuple[Family, ...]:
        return dict(self.phases).get(stage, ())


def _f(*names: str) -> tuple[Family, ...]:
    return tuple(Family(n) for n in names)


def _stage(family: str, *values: str) -> tuple[Family, ...]:
    return tuple(Family(family, (("stage", v),)) for v in values)


_SGL_STAGE: Final = "sglang:per_stage_req_latency_seconds"

# fmt: off
PROFILES: Final[tuple[EngineProfile, ...]] = (
    EngineProfile(
        "vllm",
        latencies=(
            ("ttft", _f("vllm:time_to_first_token_seconds")),
            ("e2e", _f("vllm:e2e_request_latency_seconds")),
            ("itl", _f("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
            ("tpot", _f("vllm:request_time_per_output_token_seconds")),
        ),
        phases=(
            ("engine_queue", _f("vllm:request_queue_time_seconds")),
            ("prefill", _f("vllm:request_prefill_time_seconds")),
            ("decode", _f("vllm:request_decode_time_seconds")),
            ("running", _f("vllm:request_inference_time_seconds")),
        ),
        ttft_stages=("engine_queue", "prefill"),
        e2e_stages=("engine_queue", "prefill", "decode"),
    ),
    EngineProfile(
        "sglang",
        latencies=(
            ("ttft", _f("sglang:time_to_first_token_seconds")),
            ("e2e", _f("sglang:e2e_request_latency_seconds")),
            ("itl", _f("sglang:inter_token_latency_seconds",
                       "sglang:time_per_output_token_seconds")),
        ),
        phases=(
            ("api_server", _stage(_SGL_STAGE, "tokenize")),
            ("engine_queue", _f("sglang:queue_time_seconds")),
            ("prefill", _stage(_SGL_STAGE, "prefill_forward")),
            ("kv_transfer", _stage(_SGL_STAGE, "prefill_transfer_kv_cache")),
            ("decode", _stage(_SGL_STAGE, "decode_loop")),
        ),
        ttft_stages=("api_server", "engine_queue", "prefill", "kv_transfer"),
        e2e_stages=("api_server", "engine_queue", "prefill", "kv_transfer", "decode"),
    ),
    EngineProfile(
        "tensorrt-llm",
        latencies=(
            ("ttft", _f("trtllm_time_to_first_token_seconds")),
            ("e2e", _f("trtllm_e2e_request_latency_seconds")),
            ("itl", _f("trtllm_time_per_output_token_seconds")),
        ),
        phases=(
            ("engine_queue", _f("trtllm_request_queue_time_seconds")),
            ("prefill", _f("trtllm_request_prefill_time_seconds")),
            ("decode", _f("trtllm_request_decode_time_seconds")),
            ("running", _f("trtllm_request_inference_time_seconds")),
        ),
        ttft_stages=("engine_queue", "prefill"),
        e2e_stages=("engine_queue", "prefill", "decode"),
    ),
    EngineProfile(
        "tgi",
        latencies=(("e2e", _f("tgi_request_duration")),
                   ("tpot", _f("tgi_request_mean_time_per_token_duration"))),
        phases=(
            ("api_server", _f("tgi_request_validation_duration")),
            ("engine_queue", _f("tgi_request_queue_duration")),
            ("running", _f("tgi_request_inference_duration")),
        ),
        ttft_stages=(),
        e2e_stages=("api_server", "engine_queue", "running"),
    ),
)

#: frontends in front of the engines: their latencies measure more of the path
FRONTENDS: Final[tuple[EngineProfile, ...]] = (
    EngineProfile(
        "dynamo",
        latencies=(
            ("ttft", _f("dynamo_frontend_time_to_first_token_seconds")),
            ("e2e", _f("dynamo_frontend_request_duration_seconds")),
            ("itl", _f("dynamo_frontend_inter_token_latency_seconds")),
        ),
        phases=(),
        ttft_stages=(),
        e2e_stages=(),
        residual="routing",  # frontend + router + transit to the worker, before the engine
        measured_at="frontend",
    ),
)
# fmt: on
