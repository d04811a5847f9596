"""Predict each layout's TTFT, TPOT and throughput per GPU, and rank them under the SLO.

Per layout, on the roofline of :mod:`tailtriage.simulator.steptime`:

* **TTFT** is the idle time to first token of a mean-length prompt, prefilled in chunks of
  the engine's token budget; queueing comes on top.  Pipeline stages run in series for it.
* **TPOT** is one decode step of a single sequence (the latency floor), and ``tpot_at_batch``
  the step at the operating batch.
* **Throughput per GPU** is output tokens/s per GPU at the largest batch whose TPOT still
  meets the SLO and whose KV cache fits.  Each step carries the prefill of the requests that
  replace the finished ones (``batch x prompt / output`` tokens), as chunked prefill mixes
  them.  With ``pp`` stages the batch runs as ``pp`` micro-batches in flight, so every stage
  works; a token of one sequence still waits for all stages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from tailtriage.advise.catalog import CatalogModel
from tailtriage.advise.layouts import Cluster, Layout, Placement, enumerate_layouts, place
from tailtriage.advise.memory import MemoryFit, expert_split, memory_fit
from tailtriage.advise.workload import WorkloadShape
from tailtriage.analyses.results import SloSpec
from tailtriage.errors import ConfigError
from tailtriage.simulator.steptime import (
    ACTIVATION_BYTES,
    GpuSpec,
    ModelShape,
    RooflineStepTime,
    link,
)

#: vLLM's default --max-num-seqs: sequences one scheduler runs at once
MAX_NUM_SEQS: Final = 256
#: vLLM's default chunked-prefill token budget for online serving
MAX_NUM_BATCHED_TOKENS: Final = 2048
#: the SLO metrics that bound the time between tokens of one sequence
TPOT_METRICS: Final = ("tpot", "itl")


@dataclass(frozen=True, slots=True)
class LayoutPrediction:
    layout: Layout
    placement: Placement
    memory: MemoryFit
    ttft_s: float | None  # None where the layout does not fit
    tpot_s: float | None
    batch: int  # the operating batch per engine (0: none meets the SLO)
    tpot_at_batch_s: float | None
    throughput_per_gpu: float  # output tokens/s per GPU at that batch
    meets_slo: bool
    why: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v * 1e3, 3)

        return {
            "layout": self.layout.label,
            "tp": self.layout.tp,
            "pp": self.layout.pp,
            "replicas": self.layout.replicas,
            "expert_parallel": self.layout.expert_parallel,
            "fits": self.memory.fits,
            "meets_slo": self.meets_slo,
            "ttft_ms": ms(self.ttft_s),
            "tpot_ms": ms(self.tpot_s),
            "batch": self.batch,
            "tpot_at_batch_ms": ms(self.tpot_at_batch_s),
            "throughput_per_gpu": round(self.throughput_per_gpu, 2),
            "weights_gb_per_gpu": round(self.memory.weights_gb_per_gpu, 2),
            "tp_link": self.placement.tp_link,
            "pp_links": list(self.placement.pp_links),
            "why": list(self.why),
        }


@dataclass(frozen=True, slots=True)
class ParallelismAdvice:
    model: CatalogModel
    gpu: GpuSpec
    cluster: Cluster
    workload: WorkloadShape
    slos: tuple[SloSpec, ...]
    dtype: str
    layouts: tuple[LayoutPrediction, ...]  # best first

    @property
    def best(self) -> LayoutPrediction | None:
        top = self.layouts[0] if self.layouts else None
        return top if top is not None and top.memory.fits else None

    def to_dict(self) -> dict[str, Any]:
        s = self.model.shape
        return {
            "model": {"name": s.name, "source": self.model.source, "params_b": s.params_b,
                      "layers": s.layers, "hidden": s.hidden, "heads": s.heads,
                      "kv_heads": s.kv_heads, "experts": s.experts,
                      "experts_per_token": s.experts_per_token, "dtype": self.dtype},
            "gpu": {"name": self.gpu.name, "memory_gb": self.gpu.memory_gb,
                    "bandwidth_tb_s": self.gpu.bandwidth_tb_s,
                    "bf16_tflops": self.gpu.bf16_tflops},
            "cluster": {"gpus": self.cluster.gpus, "nodes": self.cluster.nodes,
                        "intra_node": self.cluster.intra, "inter_node": self.cluster.inter},
            "workload": {"prompt_tokens": self.workload.prompt_tokens,
                         "output_tokens": self.workload.output_tokens,
                         "max_context": self.workload.max_context,
                         "source": self.workload.source},
            "slos": [str(x) for x in self.slos],
            "layouts": [p.to_dict() for p in self.layouts],
        }  # fmt: skip


# -- step times ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Engine:
    """One engine of a layout: the step time of a (micro-)batch on it."""

    shape: ModelShape
    gpu: GpuSpec
    layout: Layout
    placement: Placement
    dtype: str
    kv_dtype: str

    def _model(self, shape: ModelShape, tp: int) -> RooflineStepTime:
        p = self.placement
        return RooflineStepTime(shape, self.gpu, tp, self.layout.pp, p.tp_link, self.dtype,
                                self.kv_dtype, pp_links=p.pp_links)  # fmt: skip

    def _read_shape(self, tokens: float, share: float) -> ModelShape:
        """The model as one step reads it: a MoE step reads only the experts its tokens were
        routed to (each expert is hit with probability 1 - (1 - k/E)^tokens)."""
        s = self.shape
        if not s.is_moe:
            return s
        dense, per_expert = expert_split(s)
        hit = 1.0 - (1.0 - s.experts_per_token / s.experts) ** max(tokens, 1.0)
        return replace(s, params_b=dense + s.experts * hit * per_expert * share)

    def step(self, prefill: float, decode: float, context: float) -> float:
        tokens = prefill + decode
        if not self.layout.expert_parallel:
            model = self._model(self._read_shape(tokens, 1.0), self.layout.tp)
            return model.step_time(math.ceil(prefill), math.ceil(decode), math.ceil(context))
        # expert parallel with data-parallel attention: each GPU runs 1/ep of the sequences
        # through a full copy of attention and its 1/ep of the experts, then two all-to-alls
        # per MoE layer move the routed tokens (dispatch) and back (combine)
        ep = self.layout.tp
        per_gpu = self._read_shape(tokens, 1.0 / ep)
        model = self._model(per_gpu, 1)
        t = model.step_time(math.ceil(prefill / ep), math.ceil(decode / ep),
                            math.ceil(context / ep))  # fmt: skip
        fabric = link(self.placement.tp_link)
        moved = tokens / ep * self.shape.experts_per_token * self.shape.hidden * ACTIVATION_BYTES
        one = fabric.floor_s + (ep - 1) * fabric.hop_s
        one += moved * (ep - 1) / ep / fabric.bandwidth(self.gpu)
        return t + 2 * self.shape.layers * one

    def comm_s(self) -> tuple[float, float]:
        """(TP all-reduces, PP hand-offs) seconds of a one-sequence decode step."""
        payload = ACTIVATION_BYTES * self.shape.hidden
        tp = self.layout.tp
        reduces = 0.0
        if tp > 1 and not self.layout.expert_parallel:
            reduces = (
                2
                * self.shape.layers
                * link(self.placement.tp_link).all_reduce_s(tp, payload, self.gpu)
            )
        hand = sum(link(n).send_s(payload, self.gpu) for n in self.placement.pp_links)
        return reduces, hand


def _ttft(engine: _Engine, prompt: float) -> float:
    """Idle prefill of one prompt in chunks of the token budget (each chunk one step)."""
    done, total = 0.0, 0.0
    while done < prompt:
        chunk = min(MAX_NUM_BATCHED_TOKENS, prompt - done)
        done += chunk
        total += engine.step(chunk, 0, done)
    return total


def _decode(engine: _Engine, batch: int, w: WorkloadShape) -> float:
    """TPOT of a steady batch: ``pp`` micro-batches in flight, each carrying its share of the
    prefill of the requests that replace finished ones."""
    b = batch / engine.layout.pp if batch >= engine.layout.pp else float(batch)
    return engine.step(b * w.prompt_tokens / w.output_tokens, b, b * w.mean_context)


def _slo(slos: Sequence[SloSpec], metrics: Sequence[str]) -> float | None:
    limits = [s.threshold for s in slos if s.metric in metrics]
    return min(limits) if limits else None


# -- one layout ----------------------------------------------------------------------------


def predict_layout(
    model: CatalogModel,
    gpu: GpuSpec,
    cluster: Cluster,
    layout: Layout,
    workload: WorkloadShape,
    slos: Sequence[SloSpec] = (),
    dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> LayoutPrediction:
    shape = model.shape
    placement = place(layout, cluster)
    mem = memory_fit(shape, gpu, layout, workload, dtype, kv_dtype)
    why = [f"memory: {mem.arithmetic}"]
    if not mem.fits:
        return LayoutPrediction(layout, placement, mem, None, None, 0, None, 0.0, False,
                                tuple(why))  # fmt: skip
    engine = _Engine(shape, gpu, layout, placement, dtype, kv_dtype)
    ttft = _ttft(engine, workload.prompt_tokens)
    tpot = _decode(engine, 1, workload)
    cap = min(mem.max_sequences, MAX_NUM_SEQS * layout.pp)
    tpot_limit = _slo(slos, TPOT_METRICS)
    ttft_limit = _slo(slos, ("ttft",))
    e2e_limit = _slo(slos, ("e2e",))

    def ok(batch: int) -> bool:
        t = _decode(engine, batch, workload)
        if tpot_limit is not None and t > tpot_limit:
            return False
        return e2e_limit is None or ttft + workload.output_tokens * t <= e2e_limit

    batch = 0
    if cap >= 1 and ok(1):  # the largest batch that still meets the SLO (TPOT grows with it)
        lo, hi = 1, cap
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
        batch = lo
    at_batch = _decode(engine, batch, workload) if batch else None
    per_gpu = batch / at_batch / layout.engine_gpus if at_batch else 0.0
    meets = batch > 0 and (ttft_limit is None or ttft <= ttft_limit)
    why.extend(_reasons(engine, layout, placement, cluster, batch, cap, mem))
    why.append(_slo_reason(slos, ttft, tpot, batch, ttft_limit, meets))
    return LayoutPrediction(layout, placement, mem, ttft, tpot, batch, at_batch, per_gpu, meets,
                            tuple(why))  # fmt: skip


def _reasons(
    engine: _Engine,
    layout: Layout,
    placement: Placement,
    cluster: Cluster,
    batch: int,
    cap: int,
    mem: MemoryFit,
) -> list[str]:
    out: list[str] = []
    reduces, hand = engine.comm_s()
    layers = engine.shape.layers
    if layout.expert_parallel:
        out.append(
            f"expert parallel: {engine.shape.experts} experts spread over {layout.tp} GPUs, "
            f"attention data-parallel (a full copy per GPU); 2 all-to-alls per layer over "
            f"{placement.tp_link}; expert load imbalance is not modelled (it slows the "
            "busiest GPU)"
        )
    elif layout.tp > 1:
        where = "across nodes" if placement.tp_crosses_nodes else "inside a node"
        out.append(
            f"tensor parallel: {2 * layers} all-reduces per step over {placement.tp_link} "
            f"({where}), {reduces * 1e3:.2f} ms of a one-sequence step"
        )
    if layout.pp > 1:
        crossing = placement.pp_cross_node_boundaries
        across = f", {crossing} across nodes over {cluster.inter}" if crossing else ""
        out.append(
            f"pipeline: {layout.pp} stages in series, so one token waits for every stage "
            f"(no latency gain); {layout.pp - 1} activation hand-off(s){across}, "
            f"{hand * 1e3:.2f} ms per step; throughput needs {layout.pp} micro-batches in "
            f"flight (batch {batch} = {layout.pp} x {batch / layout.pp:.0f}), else "
            f"{(layout.pp - 1) / layout.pp:.0%} of each GPU idles in the bubble"
        )
    if layout.replicas > 1:
        out.append(
            f"{layout.replicas} data-parallel replicas behind a router: throughput adds up, "
            "latency is one engine's, each replica holds its own weights"
        )
    if batch and batch == cap:
        limit = "KV cache" if cap == mem.max_sequences else f"max_num_seqs {MAX_NUM_SEQS}"
        out.append(f"batch capped at {cap} by the {limit}, not by the SLO")
    return out


def _slo_reason(
    slos: Sequence[SloSpec],
    ttft: float,
    tpot: float,
    batch: int,
    ttft_limit: float | None,
    meets: bool,
) -> str:
    if not slos:
        return f"no SLO given: ranked at the largest batch that fits ({batch})"
    if meets:
        return f"meets {', '.join(map(str, slos))} up to batch {batch} per engine"
    if ttft_limit is not None and ttft > ttft_limit:
        return f"idle TTFT {ttft * 1e3:.1f} ms already exceeds {ttft_limit * 1e3:g} ms"
    return f"TPOT {tpot * 1e3:.1f} ms at batch 1 already breaches {', '.join(map(str, slos))}"


# -- ranking -------------------------------------------------------------------------------


def _rank_key(p: LayoutPrediction) -> tuple[int, float, float]:
    if not p.memory.fits:
        return (3, p.memory.weights_gb_per_gpu, 0.0)
    if not p.meets_slo:
        return (2, p.tpot_s or math.inf, p.ttft_s or math.inf)
    return (1, -p.throughput_per_gpu, p.tpot_s or math.inf)


def advise_parallelism(
    model: CatalogModel,
    gpu: GpuSpec,
    cluster: Cluster,
    workload: WorkloadShape,
    slos: Sequence[SloSpec] = (),
    dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> ParallelismAdvice:
    """Every layout of ``cluster`` for ``model``, best first: those meeting the SLO by
    throughput per GPU (then TPOT), then those that fit but miss it by TPOT, then those that
    do not fit."""
    layouts = enumerate_layouts(model.shape, cluster)
    if not layouts:
        raise ConfigError(
            f"no layout of {cluster.gpus} GPUs on {cluster.nodes} node(s) divides "
            f"{model.shape.name}'s {model.shape.heads} heads"
        )
    preds = [
        predict_layout(model, gpu, cluster, lay, workload, slos, dtype, kv_dtype) for lay in layouts
    ]
    preds.sort(key=_rank_key)
    return ParallelismAdvice(model, gpu, cluster, workload, tuple(slos), dtype, tuple(preds))
