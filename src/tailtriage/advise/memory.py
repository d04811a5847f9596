"""Does a layout hold the weights and the KV cache of the workload?  With the arithmetic shown.

Sized as vLLM's memory profiler sizes it (the same constants as
:func:`tailtriage.simulator.steptime.kv_cache_blocks`): each GPU offers
``memory x gpu_memory_utilization - activation reserve``; the weights take their share; the
rest is KV cache."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from tailtriage.advise.layouts import Layout
from tailtriage.advise.workload import WorkloadShape
from tailtriage.simulator.steptime import GpuSpec, ModelShape, dtype_bytes, kv_bytes_per_token

#: vLLM's default --gpu-memory-utilization
GPU_MEMORY_UTILIZATION: Final = 0.9
#: activations, CUDA graphs and NCCL buffers per GPU (as kv_cache_blocks reserves)
ACTIVATION_RESERVE_GB: Final = 2.0


@dataclass(frozen=True, slots=True)
class MemoryFit:
    weights_gb_per_gpu: float
    usable_gb_per_gpu: float
    kv_gb_per_sequence: float  # at the workload's longest context, across the engine
    kv_room_gb: float  # per engine, after the weights (negative: the weights do not fit)
    max_sequences: int  # average-length sequences the KV room holds
    fits: bool
    arithmetic: str


def expert_split(shape: ModelShape) -> tuple[float, float]:
    """(dense billions, billions per expert) of a mixture-of-experts model: total = dense +
    E x per_expert and active = dense + k x per_expert."""
    if not shape.is_moe:
        return shape.params_b, 0.0
    per_expert = (shape.params_b - shape.active_b) / (shape.experts - shape.experts_per_token)
    return shape.active_b - shape.experts_per_token * per_expert, per_expert


def kv_replication(shape: ModelShape, layout: Layout) -> int:
    """How many GPUs of a TP group hold the same KV: TP beyond the KV heads copies them (and
    MLA's single latent is copied on every TP rank); expert parallelism keeps attention whole
    on one GPU per sequence."""
    if layout.expert_parallel:
        return 1
    if shape.kv_elems_per_layer:
        return layout.tp
    return max(1, layout.tp // shape.kv_heads)


def memory_fit(
    shape: ModelShape,
    gpu: GpuSpec,
    layout: Layout,
    workload: WorkloadShape,
    dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> MemoryFit:
    n = layout.engine_gpus
    wbytes = dtype_bytes(dtype)
    if layout.expert_parallel:  # attention copied on every GPU, experts spread over them
        dense, per_expert = expert_split(shape)
        engine_weights_gb = (dense * n + per_expert * shape.experts) * wbytes
        split = f"dense {dense:.1f}B on each GPU + {shape.experts} experts over {n} GPUs"
    else:
        engine_weights_gb = shape.params_b * wbytes
        split = f"{shape.params_b:g}B params over {n} GPU{'s' if n > 1 else ''}"
    per_gpu = engine_weights_gb / n
    usable = gpu.memory_gb * GPU_MEMORY_UTILIZATION - ACTIVATION_RESERVE_GB
    room = usable * n - engine_weights_gb
    per_token = kv_bytes_per_token(shape, kv_dtype) * kv_replication(shape, layout) / 1e9
    per_seq = per_token * workload.max_context
    fits = room >= per_seq
    seqs = math.floor(room / (per_token * workload.mean_context)) if room > 0 else 0
    arithmetic = (
        f"weights {engine_weights_gb:.1f} GB ({split}, {wbytes:g} B each) = "
        f"{per_gpu:.1f} GB/GPU; usable {gpu.memory_gb:g} GB x {GPU_MEMORY_UTILIZATION} - "
        f"{ACTIVATION_RESERVE_GB:g} GB = {usable:.1f} GB/GPU; KV "
        f"{per_token * 1e3:.3f} MB/token x {workload.max_context:,} tokens = {per_seq:.2f} GB "
        f"per sequence"
    )
    if not fits:
        arithmetic += f"; {usable:.1f} x {n} - {engine_weights_gb:.1f} = {room:.1f} GB left: " + (
            "the weights alone do not fit" if room < 0 else "not one sequence fits"
        )
    else:
        arithmetic += f"; {room:.1f} GB of KV per engine holds {seqs:,} average sequences"
    return MemoryFit(per_gpu, usable, per_seq, room, seqs, fits, arithmetic)
