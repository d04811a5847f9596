"""GPU step-time models: how long one engine iteration takes for a given batch shape.

An engine step runs ``prefill_tokens`` prompt tokens (chunks of one or more prompts) and one
token for each of ``decode_seqs`` sequences, whose attention reads ``context_tokens`` cached
tokens in total.  Two models answer that question:

* :class:`RooflineStepTime` derives it from the model's shape and the GPU's peak numbers
  (analysis-anchors.md section 2): time = max(FLOPs / (MFU x peak), bytes / (MBU x bandwidth))
  per GPU, plus tensor-parallel all-reduces over the actual link (:data:`LINKS`), pipeline
  stages in series with their hand-offs, and a fixed per-step CPU overhead (BLIS PR #480:
  leaving it out biases TTFT low).
* :class:`FittedStepTime` is linear in the batch shape; calibration fits its coefficients to
  measured step or request timings.

Both are pure: no clock, no state, so the real-time ``serve-sim`` engine can share them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from tailtriage.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

#: bytes of one activation element handed between GPUs (bf16/fp16 hidden states)
ACTIVATION_BYTES: Final = 2.0


@runtime_checkable
class StepTimeModel(Protocol):
    """Seconds one engine iteration takes for a batch shape."""

    def step_time(
        self, prefill_tokens: int, decode_seqs: int, context_tokens: int, batch_seqs: int = 0
    ) -> float:
        """One step: ``batch_seqs`` counts every sequence in the step (0: ``decode_seqs`` + 1
        when there are prefill tokens)."""
        ...

    def decode_step_times(self, decode_seqs: int, context_tokens: FloatArray) -> FloatArray:
        """Decode-only steps with a fixed batch and a context total per step (vectorised): bit
        for bit ``step_time(0, decode_seqs, c, decode_seqs)`` for each ``c`` (same operations
        in the same order), so a simulation may compute a stretch of steps at once."""
        ...


# -- hardware ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """Dense peak numbers of one GPU (no sparsity; see analysis-anchors.md 2.2)."""

    name: str
    bf16_tflops: float
    memory_gb: float
    bandwidth_tb_s: float
    #: per-direction NVLink bandwidth per GPU in GB/s (0: no NVLink, PCIe only)
    nvlink_gb_s: float

    @property
    def has_nvlink(self) -> bool:
        """Its GPUs can be linked by NVLink (an L40S or L4 cannot: PCIe only)."""
        return self.nvlink_gb_s > 0


GPUS: Final[dict[str, GpuSpec]] = {
    # A100/H100/H200 from analysis-anchors.md 2.2 (NVLink bidirectional figure halved);
    # L40S and L4 from NVIDIA datasheets (dense BF16 362 / 121 TFLOPS, 864 / 300 GB/s).
    "A100": GpuSpec("A100", 312.0, 80.0, 2.039, 300.0),
    "A100-40GB": GpuSpec("A100-40GB", 312.0, 40.0, 1.555, 300.0),
    "H100": GpuSpec("H100", 989.0, 80.0, 3.35, 450.0),
    "H200": GpuSpec("H200", 989.0, 141.0, 4.8, 450.0),
    "L40S": GpuSpec("L40S", 362.0, 48.0, 0.864, 0.0),
    "L4": GpuSpec("L4", 121.0, 24.0, 0.300, 0.0),
}

Interconnect = Literal["nvlink", "pcie", "cross_node", "ib", "ethernet"]


@dataclass(frozen=True, slots=True)
class Link:
    """One kind of GPU-to-GPU link, as a collective over it costs.

    A ring all-reduce over ``n`` GPUs costs ``floor + 2(n-1) hop + 2(n-1)/n bytes / bandwidth``
    (analysis-anchors.md 2.1); a point-to-point hand-off costs ``floor + hop + bytes / bw``."""

    name: Interconnect
    floor_s: float  # fixed cost of one collective: kernel launch, NCCL protocol set-up
    hop_s: float  # added per ring step (2(n-1) steps per all-reduce)
    gb_s: float  # per-direction bandwidth per GPU (0: the GPU's own NVLink figure)
    cross_node: bool  # the link leaves the node (what a placement must know)

    def bandwidth(self, gpu: GpuSpec) -> float:
        """Bytes per second over this link for ``gpu``."""
        if self.gb_s > 0:
            return self.gb_s * 1e9
        return (gpu.nvlink_gb_s or LINKS["pcie"].gb_s) * 1e9

    def ring_latency_s(self, gpus: int) -> float:
        """The fixed part of one all-reduce over ``gpus`` (what a decode step mostly pays)."""
        return self.floor_s + 2 * (gpus - 1) * self.hop_s if gpus > 1 else 0.0

    def all_reduce_s(self, gpus: int, nbytes: float, gpu: GpuSpec) -> float:
        if gpus <= 1:
            return 0.0
        return self.ring_latency_s(gpus) + 2 * (gpus - 1) / gpus * nbytes / self.bandwidth(gpu)

    def send_s(self, nbytes: float, gpu: GpuSpec) -> float:
        return self.floor_s + self.hop_s + nbytes / self.bandwidth(gpu)


#: The links a layout can use.  NVLink behind NVSwitch is flat in the GPU count (Vidur's H100 DGX
#: all-reduces: 43 / 41 / 34 us for 2 / 4 / 8 GPUs at 1 MiB, analysis-anchors 1.1), so no hop
#: cost.  PCIe Gen4/5 x16 peer-to-peer: ~25 GB/s effective and about 1 us per ring step through the
#: host bridge (46 + 14 x 1 us keeps the 60 us an 8-GPU all-reduce had before hops were
#: modelled).  ``ib``: one 400 Gb/s NDR port per GPU (DGX H100 layout, 50 GB/s).  ``ethernet``:
#: 100 GbE with NCCL over TCP sockets (12.5 GB/s; tens of us per step).  ``cross_node`` is the
#: generic 200 Gb/s fabric earlier versions knew (kept for existing scenarios).
LINKS: Final[dict[str, Link]] = {
    "nvlink": Link("nvlink", 30e-6, 0.0, 0.0, cross_node=False),
    "pcie": Link("pcie", 46e-6, 1e-6, 25.0, cross_node=False),
    "cross_node": Link("cross_node", 120e-6, 0.0, 25.0, cross_node=True),
    "ib": Link("ib", 40e-6, 5e-6, 50.0, cross_node=True),
    "ethernet": Link("ethernet", 100e-6, 25e-6, 12.5, cross_node=True),
}


def link(name: str) -> Link:
    try:
        return LINKS[name]
    except KeyError:
        raise ConfigError(f"unknown interconnect {name!r}; known: {', '.join(LINKS)}") from None


# -- model shapes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The parts of a decoder-only transformer that set its cost."""

    name: str
    params_b: float  # billions of parameters (weights read each step)
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    #: parameters used per token, in billions (mixture of experts; 0: all of ``params_b``)
    active_params_b: float = 0.0
    experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    #: attention head size where config.json sets it apart from hidden / heads (0: derived)
    head_size: int = 0
    #: cached elements per token per layer where it is not 2 x kv_heads x head_dim (MLA's
    #: compressed latent); 0: derived
    kv_elems_per_layer: int = 0

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def active_b(self) -> float:
        """Billions of parameters each token multiplies (FLOPs per token = 2 x this)."""
        return self.active_params_b or self.params_b

    @property
    def is_moe(self) -> bool:
        return self.experts > 0


MODELS: Final[dict[str, ModelShape]] = {
    # Shapes from the models' published config.json files.
    "llama-2-7b": ModelShape("llama-2-7b", 6.74, 32, 4096, 32, 32),
    "llama-3.1-8b": ModelShape("llama-3.1-8b", 8.03, 32, 4096, 32, 8),
    "mistral-7b": ModelShape("mistral-7b", 7.24, 32, 4096, 32, 8),
    "qwen2.5-32b": ModelShape("qwen2.5-32b", 32.8, 64, 5120, 40, 8),
    "llama-2-70b": ModelShape("llama-2-70b", 69.0, 80, 8192, 64, 8),
    "llama-3.1-70b": ModelShape("llama-3.1-70b", 70.6, 80, 8192, 64, 8),
}

#: bytes per weight / per KV element for each dtype or quantization scheme.
DTYPE_BYTES: Final[dict[str, float]] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "awq": 0.5625,  # 4-bit weights plus group scales
    "gptq": 0.5625,
    "int4": 0.5,
}


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ConfigError(
            f"unknown dtype {dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}"
        ) from None


def kv_bytes_per_token(shape: ModelShape, kv_dtype: str = "bf16") -> float:
    """K and V for one token across all layers (Databricks / Vidur formula)."""
    per_layer = shape.kv_elems_per_layer or 2 * shape.kv_heads * shape.head_dim
    return float(shape.layers * per_layer) * dtype_bytes(kv_dtype)


def weight_bytes(shape: ModelShape, dtype: str = "bf16") -> float:
    return shape.params_b * 1e9 * dtype_bytes(dtype)


# -- roofline ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RooflineStepTime:
    """Step time from model shape and GPU peak numbers (a lower bound made realistic by MFU/MBU).

    ``mbu`` falls with the tensor-parallel degree (Vidur's 70B linears: 82 % at TP1, 61 % at
    TP8, about -7 points per doubling) because each GPU's matrices get smaller.

    Tensor parallelism splits every layer over ``tp`` GPUs and pays two all-reduces per layer
    over ``interconnect``.  Pipeline parallelism runs ``pp`` stages *in series*: one step (one
    token for every sequence in the batch) walks through all of them, so its latency is the sum
    of the stage times plus ``pp - 1`` activation hand-offs; it is never shorter than the same
    step on one stage's ``tp`` GPUs.  PP adds throughput only with micro-batches in flight
    (``tailtriage.advise`` models them), not per step.
    """

    shape: ModelShape
    gpu: GpuSpec
    tp: int = 1
    pp: int = 1
    interconnect: Interconnect = "nvlink"
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    mfu: float = 0.6
    mbu: float = 0.8
    overhead_s: float = 0.002  # scheduler + launch overhead per step
    #: the link each of the ``pp - 1`` stage boundaries crosses (empty: ``interconnect``)
    pp_links: tuple[Interconnect, ...] = ()

    _k: tuple[float, float, float, float, float, float] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.tp < 1 or self.pp < 1:
            raise ConfigError("tensor and pipeline parallel degrees must be >= 1")
        if not (0 < self.mfu <= 1 and 0 < self.mbu <= 1):
            raise ConfigError("mfu and mbu must be in (0, 1]")
        if self.pp_links and len(self.pp_links) != self.pp - 1:
            raise ConfigError(f"pp_links names {len(self.pp_links)} links; pp {self.pp} has "
                              f"{self.pp - 1} stage boundaries")  # fmt: skip
        tp_link = link(self.interconnect)
        stage_links = [link(n) for n in self.pp_links] or [tp_link] * (self.pp - 1)
        # Pipeline stages run one after another for a step, so a step sees one stage's TP
        # group at a time: FLOPs and bandwidth scale with tp only, never with pp.
        flops_rate = self.mfu * self.gpu.bf16_tflops * 1e12 * self.tp
        mbu = self.mbu * max(0.3, 1.0 - 0.07 * math.log2(self.tp))
        bw = mbu * self.gpu.bandwidth_tb_s * 1e12 * self.tp
        s = self.shape
        payload = ACTIVATION_BYTES * s.hidden  # one token's hidden state
        # two all-reduces per layer (after attention and after the MLP), every stage in series
        reduces = 2 * s.layers if self.tp > 1 else 0
        comm_fixed = reduces * tp_link.ring_latency_s(self.tp)
        comm_per_token = (
            reduces * 2 * (self.tp - 1) / self.tp * payload / tp_link.bandwidth(self.gpu)
        )
        for boundary in stage_links:  # activations handed from one stage to the next
            comm_fixed += boundary.send_s(0.0, self.gpu)
            comm_per_token += payload / boundary.bandwidth(self.gpu)
        k = (
            2.0 * s.active_b * 1e9 / flops_rate,  # s per token of linear FLOPs
            4.0 * s.layers * s.hidden / flops_rate,  # s per context token of attention FLOPs
            weight_bytes(s, self.dtype) / bw,  # s to read the weights once
            kv_bytes_per_token(s, self.kv_dtype) / bw,  # s per cached token read
            comm_fixed + self.overhead_s,
            comm_per_token,
        )
        object.__setattr__(self, "_k", k)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def split(
        self, prefill_tokens: int, decode_seqs: int, context_tokens: int
    ) -> tuple[float, float, float]:
        """(compute, memory, communication) seconds of one step, without the fixed overhead."""
        per_token, per_ctx_flops, weights, per_ctx_bytes, fixed, comm_tok = self._k
        tokens = prefill_tokens + decode_seqs
        compute = per_token * tokens + per_ctx_flops * context_tokens
        memory = weights + per_ctx_bytes * context_tokens
        return compute, memory, fixed - self.overhead_s + comm_tok * tokens

    def step_time(
        self, prefill_tokens: int, decode_seqs: int, context_tokens: int, batch_seqs: int = 0
    ) -> float:
        tokens = prefill_tokens + decode_seqs
        if tokens <= 0:
            return 0.0
        per_token, per_ctx_flops, weights, per_ctx_bytes, fixed, comm_tok = self._k
        compute = per_token * tokens + per_ctx_flops * context_tokens
        memory = weights + per_ctx_bytes * context_tokens
        return (compute if compute > memory else memory) + fixed + comm_tok * tokens

    def decode_step_times(self, decode_seqs: int, context_tokens: FloatArray) -> FloatArray:
        ctx = np.asarray(context_tokens, dtype=np.float64)
        if decode_seqs <= 0:
            return np.zeros_like(ctx)
        per_token, per_ctx_flops, weights, per_ctx_bytes, fixed, comm_tok = self._k
        compute = per_token * decode_seqs + per_ctx_flops * ctx
        memory = weights + per_ctx_bytes * ctx
        out: FloatArray = np.where(compute > memory, compute, memory) + fixed
        return out + comm_tok * decode_seqs

    def weights_gb(self) -> float:
        return weight_bytes(self.shape, self.dtype) / 1e9


# -- fitted --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FittedStepTime:
    """``t = c0 + prefill*P + decode*D + context*C + batch*B`` seconds (calibrated), or
    ``compute`` x the step's tokens (prefill tokens + decode sequences) when that is longer.

    The line is the memory-bound side a decode step lives on (weights and KV read, about
    flat in the tokens); ``compute`` is the compute-bound side a long prefill step crosses
    into - the roofline's ``max`` with both sides fitted instead of looked up, for a model
    or GPU outside the catalog.  ``compute`` 0: the line alone."""

    c0: float = 0.005
    prefill: float = 5e-5  # seconds per prefill token
    decode: float = 1e-4  # seconds per decode sequence
    context: float = 1e-7  # seconds per cached token read
    batch: float = 0.0  # seconds per sequence in the step
    compute: float = 0.0  # seconds per token of a compute-bound step

    def step_time(
        self, prefill_tokens: int, decode_seqs: int, context_tokens: int, batch_seqs: int = 0
    ) -> float:
        if prefill_tokens + decode_seqs <= 0:
            return 0.0
        seqs = batch_seqs or decode_seqs + (1 if prefill_tokens else 0)
        line = (
            self.c0
            + self.prefill * prefill_tokens
            + self.decode * decode_seqs
            + self.context * context_tokens
            + self.batch * seqs
        )
        return max(line, self.compute * (prefill_tokens + decode_seqs))

    def decode_step_times(self, decode_seqs: int, context_tokens: FloatArray) -> FloatArray:
        ctx = np.asarray(context_tokens, dtype=np.float64)
        if decode_seqs <= 0:
            return np.zeros_like(ctx)
        base = self.c0 + self.prefill * 0 + self.decode * decode_seqs
        out: FloatArray = base + self.context * ctx + self.batch * decode_seqs
        return np.maximum(out, self.compute * decode_seqs)


@dataclass(frozen=True, slots=True)
class RescaledStepTime:
    """A step model measured on one stack (``fitted``) moved to other hardware: each step
    takes ``fitted``'s time x the roofline's ratio ``to / measured_on`` for the same batch.
    The fit keeps what the telemetry showed (the engine's own kernels, overheads and
    efficiencies); the roofline says what the change does to them - fewer TP ranks read
    more of the weights each and all-reduce less, an fp8 cache reads half the KV bytes,
    NVLink shortens the all-reduces.  Without it, a hardware fix on a fitted line is
    predicted to change nothing."""

    fitted: StepTimeModel
    to: RooflineStepTime
    measured_on: RooflineStepTime

    def step_time(
        self, prefill_tokens: int, decode_seqs: int, context_tokens: int, batch_seqs: int = 0
    ) -> float:
        t = self.fitted.step_time(prefill_tokens, decode_seqs, context_tokens, batch_seqs)
        old = self.measured_on.step_time(prefill_tokens, decode_seqs, context_tokens)
        if old <= 0.0:
            return t
        return t * self.to.step_time(prefill_tokens, decode_seqs, context_tokens) / old

    def decode_step_times(self, decode_seqs: int, context_tokens: FloatArray) -> FloatArray:
        t = self.fitted.decode_step_times(decode_seqs, context_tokens)
        old = self.measured_on.decode_step_times(decode_seqs, context_tokens)
        new = self.to.decode_step_times(decode_seqs, context_tokens)
        out: FloatArray = np.where(old > 0.0, t * new / np.where(old > 0.0, old, 1.0), t)
        return out


def kv_cache_blocks(
    shape: ModelShape,
    gpu: GpuSpec,
    *,
    gpus: int,
    dtype: str = "bf16",
    kv_dtype: str = "bf16",
    gpu_memory_utilization: float = 0.9,
    block_size: int = 16,
    activation_reserve_gb: float = 2.0,
) -> int:
    """KV-cache blocks that fit beside the weights, as vLLM's memory profiler sizes them."""
    budget = gpu.memory_gb * 1e9 * gpu_memory_utilization * gpus
    free = budget - weight_bytes(shape, dtype) - activation_reserve_gb * 1e9 * gpus
    if free <= 0:
        raise ConfigError(
            f"{shape.name} ({dtype}) does not fit on {gpus} x {gpu.name} at "
            f"gpu_memory_utilization {gpu_memory_utilization}"
        )
    return int(free // (kv_bytes_per_token(shape, kv_dtype) * block_size))
