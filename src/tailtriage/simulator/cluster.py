"""Pods, nodes and the per-pod engine state of the simulated Kubernetes deployment."""

from __future__ import annotations

import bisect
import contextlib
import math
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tailtriage.errors import ConfigError
from tailtriage.simulator.batching import BatchLimits, ContinuousBatcher, StepPlan
from tailtriage.simulator.config import GpuConfig, ModelConfig, ScenarioConfig, StepTimeConfig
from tailtriage.simulator.steptime import (
    GPUS,
    FittedStepTime,
    RescaledStepTime,
    RooflineStepTime,
    StepTimeModel,
    kv_cache_blocks,
    weight_bytes,
)

# vLLM V1 default buckets (telemetry-conventions.md 1.2)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)  # fmt: skip
PHASE_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip

ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
#: ``vllm:request_prompt_tokens`` / ``vllm:request_generation_tokens``: vLLM's 1-2-5 series
#: up to ``max_model_len`` (``build_1_2_5_buckets``), here up to a 128k context
TOKEN_BUCKETS = tuple(m * 10**e for e in range(6) for m in (1, 2, 5) if m * 10**e <= 131072)

# pod states
CREATED, SCHEDULED, STARTING, READY, TERMINATING, GONE = range(6)


@dataclass(frozen=True)
class Template:
    """A pod template version (a rollout creates a new one)."""

    version: int
    hash: str  # replica-set hash in pod names
    model_name: str
    step_model: StepTimeModel
    limits: BatchLimits
    kv_blocks: int
    gpus: int
    load_s: float  # weights / load bandwidth + warm-up
    prefix_caching: bool
    warm_s: float = 0.0  # seconds after Ready with slower engine steps
    warm_factor: float = 1.0  # how much slower


def _roofline(model: ModelConfig, gpu: GpuConfig, st: StepTimeConfig) -> RooflineStepTime:
    return RooflineStepTime(
        model.shape, GPUS[gpu.type], gpu.tp, gpu.pp, gpu.interconnect,
        model.dtype, model.kv_dtype, st.mfu, st.mbu, st.overhead_s,
    )  # fmt: skip


def memory_blocks(cfg: ScenarioConfig) -> int:
    """The KV-cache blocks that fit beside the weights of ``cfg``'s model on its GPUs."""
    e = cfg.engine
    return kv_cache_blocks(
        cfg.model.shape, GPUS[cfg.gpu.type], gpus=cfg.gpu.tp * cfg.gpu.pp, dtype=cfg.model.dtype,
        kv_dtype=cfg.model.kv_dtype, gpu_memory_utilization=e.gpu_memory_utilization,
        block_size=e.block_size,
    )  # fmt: skip


def resized_cache(before: ScenarioConfig, after: ScenarioConfig) -> ScenarioConfig:
    """``after`` (``before`` changed) with the KV cache ``before`` pinned
    (``engine.num_gpu_blocks``, as a calibration reads it off the usage gauge) resized by what
    the change does to the memory beside the weights: an fp8 cache holds twice the tokens, fp8
    weights or more GPUs free room for blocks.  The telemetry gives the size, the memory
    model the ratio.  Unchanged when the change sets the blocks itself, moves nothing the
    cache is sized from, or leaves a model that does not fit."""
    pinned = before.engine.num_gpu_blocks
    if not pinned or after.engine.num_gpu_blocks != pinned:
        return after
    try:
        old, new = memory_blocks(before), memory_blocks(after)
    except (ConfigError, KeyError):  # a model that no longer fits, a GPU outside the catalog
        return after
    if old <= 0 or new == old:
        return after
    blocks = max(1, round(pinned * new / old))
    return replace(after, engine=replace(after.engine, num_gpu_blocks=blocks))


def make_template(cfg: ScenarioConfig, version: int, rng: np.random.Generator) -> Template:
    shape = cfg.model.shape
    st = cfg.step_time
    model: StepTimeModel
    if st.mode == "fitted":
        c = st.coefficients
        model = FittedStepTime(c.c0, c.prefill, c.decode, c.context, c.batch, c.compute)
        ref = st.fitted_on
        if ref is not None and (ref.model, ref.gpu) != (cfg.model, cfg.gpu):
            # hardware outside the catalog: the line as it is
            with contextlib.suppress(ConfigError, KeyError):
                model = RescaledStepTime(
                    model, _roofline(cfg.model, cfg.gpu, st), _roofline(ref.model, ref.gpu, st)
                )
    else:
        model = _roofline(cfg.model, cfg.gpu, st)
    e = cfg.engine
    gpus = cfg.gpu.tp * cfg.gpu.pp
    blocks = e.num_gpu_blocks or memory_blocks(cfg)
    limits = BatchLimits(e.max_num_batched_tokens, e.max_num_seqs, e.chunked_prefill, e.block_size)
    load_s = weight_bytes(shape, cfg.model.dtype) / 1e9 / cfg.pods.load_gb_s + cfg.pods.warmup_s
    warm_s = max(cfg.pods.ready_warmup_s, 0.0)
    if cfg.pods.ready_warmup_gated:  # the gate holds traffic until the warm-up is done
        load_s += warm_s
        warm_s = 0.0
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    rs_hash = "".join(alphabet[i] for i in rng.integers(0, len(alphabet), 10))
    return Template(version, rs_hash, cfg.model.name, model, limits, blocks, gpus, load_s,
                    e.prefix_caching, warm_s, cfg.pods.ready_warmup_factor)  # fmt: skip


class Node:
    __slots__ = ("gpus", "gpus_free", "image_cached", "name", "ready_at")

    def __init__(self, name: str, gpus: int, ready_at: float) -> None:
        self.name = name
        self.gpus = gpus
        self.gpus_free = gpus
        self.image_cached = False
        self.ready_at = ready_at


class Pod:
    """A serving pod: lifecycle, routing counters and its engine replica."""

    __slots__ = (
        "api_free",
        "backlog",
        "batcher",
        "busy_s",
        "context_sum",
        "cpu_s",
        "created",
        "e2e_hist",
        "index",
        "inflight",
        "iter_hist",
        "itl_hist",
        "name",
        "node",
        "phase_hists",
        "plan",
        "prefixes",
        "queue_hist",
        "ready_at",
        "requests_done",
        "run",
        "scheduled_at",
        "started_at",
        "state",
        "step_ends",
        "step_time",
        "steps",
        "template",
        "terminate_at",
        "token_hists",
        "tokens_sum",
        "ttft_hist",
        "waiting_since",
        "warm_until",
    )

    def __init__(self, name: str, index: int, template: Template, created: float, workers: int):
        self.name = name
        self.index = index
        self.template = template
        self.created = created
        self.state = CREATED
        self.node: Node | None = None
        self.ready_at = float("nan")
        self.scheduled_at = float("nan")
        self.started_at = float("nan")
        self.terminate_at = float("nan")
        self.warm_until = -math.inf  # steps starting before this run template.warm_factor slower
        self.inflight = 0
        self.backlog: deque[int] = deque()  # requests waiting in this pod's queue-proxy
        self.batcher = ContinuousBatcher(
            template.limits, template.kv_blocks, reuse_freed=template.prefix_caching
        )
        self.plan: StepPlan | None = None
        #: the decode-only stretch in flight instead of ``plan``'s single step (fastforward)
        self.run: Any = None
        self.step_time = template.step_model.step_time  # bound once: called every step
        self.step_ends: list[float] = []
        self.api_free = [0.0] * max(workers, 1)  # heap of worker free times
        self.busy_s = 0.0
        self.steps = 0
        self.tokens_sum = 0
        self.context_sum = 0
        self.cpu_s = 0.0  # CPU seconds from requests and tokens (base load added on export)
        self.requests_done = 0
        self.prefixes: set[int] = set()
        self.waiting_since = 0.0
        # per-bucket counts (last = +Inf) and the running sum, vLLM's histograms
        self.ttft_hist = [0.0] * (len(TTFT_BUCKETS) + 2)
        self.itl_hist = [0.0] * (len(ITL_BUCKETS) + 2)
        self.e2e_hist = [0.0] * (len(PHASE_BUCKETS) + 2)
        self.queue_hist = [0.0] * (len(PHASE_BUCKETS) + 2)
        self.iter_hist = [0.0] * (len(ITERATION_BUCKETS) + 2)
        # vLLM's request-phase histograms: prefill, decode, inference (= prefill + decode)
        self.phase_hists = {
            k: [0.0] * (len(PHASE_BUCKETS) + 2) for k in ("prefill", "decode", "inference")
        }
        # ... and its per-request token counts, observed when a request finishes
        self.token_hists = {k: [0.0] * (len(TOKEN_BUCKETS) + 2) for k in ("prompt", "output")}

    def count_step(self, tokens: int, decode: int, context: int, dt: float) -> None:
        """A step of ``dt`` seconds starts: the totals behind DCGM's activity ratios (the
        roofline split is linear in them), ``vllm:iteration_tokens_total`` (the realised token
        budget) and the inter-token histogram (every decode in the step sees one gap of ``dt``)."""
        self.steps += 1
        self.tokens_sum += tokens
        it = self.iter_hist
        it[bisect.bisect_left(ITERATION_BUCKETS, tokens)] += 1
        it[-1] += tokens
        self.context_sum += context
        self.busy_s += dt
        if decode:
            hist = self.itl_hist
            hist[bisect.bisect_left(ITL_BUCKETS, dt)] += decode
            hist[-1] += dt * decode

    @property
    def routable(self) -> bool:
        return self.state == READY

    @property
    def alive(self) -> bool:
        return self.state in (READY, TERMINATING)
