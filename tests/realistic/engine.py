"""One engine replica: vLLM-style continuous batching with a token budget, a sequence limit and a
KV cache of fixed token capacity.

Per step the scheduler gives every decoding sequence one token, fills the rest of the budget
with prefill chunks (whole prompts only when chunked prefill is off), admits waiting requests
while the sequence limit and the free KV cache allow, and preempts the most recently admitted
sequence when the cache overflows (it recomputes prompt + generated tokens later).  The step
time is a roofline (analysis-anchors 2.1): compute over ``mfu x FLOPS`` for the step's tokens
(prefill attention included), memory over ``mbu x bandwidth`` for the weights and the KV read,
the larger of the two, plus two all-reduces per layer for tensor parallelism and a fixed
overhead.  Stretches of pure decode with nothing to admit run as one macro step up to the next
finish, the next KV overflow or the next arrival."""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from realistic.spec import GPUS, MODELS, Spec

#: all-reduce latency floor and effective bandwidth per link kind (analysis-anchors 2.4:
#: 35-65 us per NCCL all-reduce on NVLink; PCIe and cross-node Ethernet far slower)
_LINK = {"nvlink": (12e-6, 300e9), "pcie": (40e-6, 20e9), "ethernet": (70e-6, 10e9)}
#: activation and CUDA-graph memory reserved besides weights and KV cache, per GPU (bytes)
_RESERVED = 3e9
#: decode steps run as one macro step at most
_MAX_MACRO = 100_000


@dataclass(frozen=True)
class StepModel:
    """Roofline constants of one replica."""

    flops: float  # achieved FLOP/s across the TP group
    bw: float  # achieved bytes/s across the TP group
    weight_bytes: float
    kv_bytes: float  # per token
    layers: int
    d_model: int
    params: float
    comm_alpha: float  # per all-reduce latency, 0 without TP
    comm_bw: float
    tp: int
    overhead: float
    kv_capacity: int  # tokens

    @classmethod
    def of(cls, spec: Spec, interconnect: str) -> StepModel:
        gpu, model, e = GPUS[spec.gpu], MODELS[spec.model], spec.engine
        weights = model.params_b * 2e9
        free = spec.tp * (gpu.mem_gb * 1e9 * e.gpu_memory_utilization - _RESERVED) - weights
        kv_cap = e.kv_tokens or int(max(free, 1e9) / model.kv_bytes_per_token)
        alpha, link = _LINK[interconnect] if spec.tp > 1 else (0.0, 1.0)
        return cls(
            flops=e.mfu * gpu.tflops * 1e12 * spec.tp,
            bw=e.mbu * gpu.bw_tb_s * 1e12 * spec.tp,
            weight_bytes=weights,
            kv_bytes=model.kv_bytes_per_token,
            layers=model.layers,
            d_model=model.d_model,
            params=model.params_b * 1e9,
            comm_alpha=alpha,
            comm_bw=link,
            tp=spec.tp,
            overhead=e.step_overhead_ms / 1e3,
            kv_capacity=kv_cap,
        )

    def parts(self, tokens: float, attn_flops: float, kv_read: float) -> tuple[float, float, float]:
        """(compute s, memory s, communication s) of one step."""
        compute = (2.0 * self.params * tokens + attn_flops) / self.flops
        memory = (self.weight_bytes + kv_read * self.kv_bytes) / self.bw
        comm = 0.0
        if self.tp > 1:
            payload = tokens * self.d_model * 2.0 * 2.0 * (self.tp - 1) / self.tp
            comm = 2 * self.layers * (self.comm_alpha + payload / self.comm_bw)
        return compute, memory, comm


class Ledger:
    """Per-request engine timestamps, shared by every replica (indexed by request id)."""

    def __init__(self, prompt: np.ndarray, output: np.ndarray) -> None:
        n = len(prompt)
        self.prompt = prompt.tolist()
        self.output = output.tolist()
        self.queued = [np.nan] * n
        self.scheduled = [np.nan] * n
        self.first = [np.nan] * n
        self.finish = [np.nan] * n
        self.preempted = [0] * n
        self.replica = [-1] * n
        # decode slowdown: sum of step times while decoding, per request (TPOT truth)
        self.pf_rem = [0] * n
        self.decoded = [0] * n


class Replica:
    """Mutable state of one engine; ``plan`` / ``advance`` are driven by the fleet's loop."""

    def __init__(self, idx: int, spec: Spec, sm: StepModel, ledger: Ledger) -> None:
        e = spec.engine
        self.idx = idx
        self.sm = sm
        self.led = ledger
        self.max_seqs = e.max_num_seqs
        self.budget = e.max_num_batched_tokens
        self.chunked = e.chunked_prefill
        self.t = 0.0
        self.waiting: deque[int] = deque()
        self.running: list[int] = []  # admission order
        self.prefilling: list[int] = []
        self.n_dec = 0
        self.D = 0  # decode steps done
        self.kv_dec_a = 0  # sum over decoding of (context at decode start - d0)
        self.kv_pf = 0  # computed tokens of prefilling sequences
        self.d0: dict[int, int] = {}
        self.fin: list[tuple[int, int]] = []  # heap of (finish D, request)
        # plan: cumulative end times of the next steps, and what they do
        self.plan_ends: list[float] = []
        self.plan_single: tuple[list[tuple[int, int]], float, float, float, float] | None = None
        self.plan_k = 0
        self._macro = (0.0, 0.0, 0.0, 0.0, 0.0)
        # accumulated for metrics: busy, compute, memory, comm seconds; tokens
        self.acc = np.zeros(6)
        self.done: list[int] = []
        self.preempt_count = 0

    # -- state -----------------------------------------------------------------------------
    @property
    def kv_used(self) -> int:
        return self.kv_dec_a + self.n_dec * self.D + self.kv_pf

    def in_flight(self) -> int:
        return len(self.waiting) + len(self.running)

    def idle(self) -> bool:
        return not self.waiting and not self.running

    def enqueue(self, rid: int, t: float) -> None:
        self.led.queued[rid] = t
        self.led.replica[rid] = self.idx
        self.led.pf_rem[rid] = self.led.prompt[rid]
        self.waiting.append(rid)
        if not self.running and len(self.waiting) == 1:
            self.t = max(self.t, t)

    # -- planning --------------------------------------------------------------------------
    def plan(self, horizon: float) -> float:
        """Plan the next step(s) (not past ``horizon`` for macro steps); return when they end,
        or inf when there is nothing to do."""
        self.plan_ends = []
        self.plan_single = None
        self.plan_k = 1
        if self.idle():
            return float("inf")
        self._make_room()
        chunks = self._chunks()
        if chunks or self.prefilling:
            return self._plan_single(chunks)
        return self._plan_macro(horizon)

    def _make_room(self) -> None:
        """Preempt the newest sequences until one more token per decoding sequence fits."""
        while self.running and self.kv_used + self.n_dec > self.sm.kv_capacity:
            self._preempt(self.running[-1])

    def _preempt(self, rid: int) -> None:
        led = self.led
        self.running.pop()
        if rid in self.d0:
            d0 = self.d0.pop(rid)
            ctx = led.prompt[rid] + led.decoded[rid]
            self.kv_dec_a -= ctx - d0
            self.n_dec -= 1
            led.decoded[rid] += self.D - d0
        else:
            self.prefilling.remove(rid)
            self.kv_pf -= led.prompt[rid] + led.decoded[rid] - led.pf_rem[rid]
        led.pf_rem[rid] = led.prompt[rid] + led.decoded[rid]
        led.preempted[rid] += 1
        self.preempt_count += 1
        self.waiting.appendleft(rid)

    def _chunks(self) -> list[tuple[int, int]]:
        """(request, tokens) prefilled this step: running prefills first, then admissions."""
        led = self.led
        left = self.budget - self.n_dec
        free_kv = self.sm.kv_capacity - self.kv_used - self.n_dec
        out: list[tuple[int, int]] = []
        for rid in self.prefilling:
            if left <= 0:
                break
            c = min(led.pf_rem[rid], left)
            if not self.chunked and c < led.pf_rem[rid]:
                continue
            c = min(c, max(free_kv, 0))
            if c <= 0:
                break
            out.append((rid, c))
            left -= c
            free_kv -= c
        while self.waiting and left > 0 and len(self.running) < self.max_seqs:
            rid = self.waiting[0]
            need = led.pf_rem[rid]
            c = min(need, left)
            if not self.chunked and c < need and (out or self.n_dec):
                break
            # vLLM admits only when the whole prompt's blocks fit (plus a 1 % watermark)
            if need + 0.01 * self.sm.kv_capacity > free_kv:
                break
            self.waiting.popleft()
            self.running.append(rid)
            self.prefilling.append(rid)
            if np.isnan(led.scheduled[rid]):
                led.scheduled[rid] = self.t
            out.append((rid, c))
            left -= c
            free_kv -= c
        return out

    def _plan_single(self, chunks: list[tuple[int, int]]) -> float:
        led = self.led
        tokens = self.n_dec + sum(c for _, c in chunks)
        attn = 0.0
        for rid, c in chunks:
            done = led.prompt[rid] + led.decoded[rid] - led.pf_rem[rid]
            attn += 4.0 * self.sm.layers * self.sm.d_model * c * (done + c / 2)
        comp, mem, comm = self.sm.parts(tokens, attn, self.kv_used)
        dt = self.sm.overhead + max(comp, mem) + comm
        self.plan_single = (chunks, dt, comp, mem, comm)
        self.plan_ends = [self.t + dt]
        return self.t + dt

    def _plan_macro(self, horizon: float) -> float:
        """Pure decode up to the next finish or KV overflow.  Step i (from 0) takes
        ``c + i * delta``: the KV read grows by one token per sequence and step (the roofline's
        max() is taken at the first step; the memory term dominates decode)."""
        k = _MAX_MACRO
        while self.fin and self.fin[0][0] - self.D <= 0:  # stale entries
            heapq.heappop(self.fin)
        if self.fin:
            k = min(k, self.fin[0][0] - self.D)
        if self.n_dec:
            k = min(k, max(1, (self.sm.kv_capacity - self.kv_used) // self.n_dec))
        comp, mem0, comm = self.sm.parts(self.n_dec, 0.0, self.kv_used)
        delta = self.n_dec * self.sm.kv_bytes / self.sm.bw
        self._macro = (comp, mem0, comm, self.sm.overhead + comm + max(comp, mem0), delta)
        self.plan_k = k
        if horizon < math.inf:
            self.plan_k = min(k, self._steps_until(horizon))
        self.plan_ends = [self._macro_end(self.plan_k)]
        return self.plan_ends[0]

    def _macro_end(self, j: int) -> float:
        c, delta = self._macro[3], self._macro[4]
        return self.t + j * c + delta * j * (j - 1) / 2

    def _steps_until(self, t: float) -> int:
        """Fewest steps whose end is at or after ``t`` (at least one)."""
        c, delta = self._macro[3], self._macro[4]
        x = t - self.t
        if x <= 0:
            return 1
        if delta <= 0:
            return max(1, math.ceil(x / c))
        b = c - delta / 2
        j = math.ceil((-b + math.sqrt(b * b + 2 * delta * x)) / delta)
        return max(1, j)

    def truncate(self, t: float) -> float:
        """Shorten a macro plan to the first step boundary at or after ``t``."""
        if self.plan_single is None and self.plan_ends:
            j = min(self.plan_k, self._steps_until(t))
            if j < self.plan_k:
                self.plan_k = j
                self.plan_ends = [self._macro_end(j)]
        return self.plan_ends[-1] if self.plan_ends else float("inf")

    # -- applying --------------------------------------------------------------------------
    def advance(self) -> list[int]:
        """Apply the planned step(s); return the requests that finished."""
        if not self.plan_ends:
            return []
        self.done = []
        if self.plan_single is not None:
            self._apply_single()
        else:
            self._apply_macro()
        self.plan_ends = []
        self.plan_single = None
        return self.done

    def _account(
        self, dt: float, comp: float, mem: float, comm: float, tokens: float, decode: float
    ) -> None:
        a = self.acc
        a[0] += dt
        a[1] += comp
        a[2] += mem
        a[3] += comm
        a[4] += tokens
        a[5] += decode

    def _apply_macro(self) -> None:
        k = self.plan_k
        dt = self.plan_ends[-1] - self.t
        comp, mem0, comm = self._macro[:3]
        mem = k * mem0 + self.n_dec * self.sm.kv_bytes / self.sm.bw * k * (k - 1) / 2
        self._account(dt, comp * k, mem, comm * k, self.n_dec * k, self.n_dec * k)
        self.t = self.plan_ends[-1]
        self.D += k
        self._finish_due()

    def _finish_due(self) -> None:
        led = self.led
        while self.fin and self.fin[0][0] <= self.D:
            d, rid = heapq.heappop(self.fin)
            if rid not in self.d0 or self.d0[rid] + led.output[rid] - led.decoded[rid] != d:
                continue  # stale (preempted since)
            d0 = self.d0.pop(rid)
            self.kv_dec_a -= led.prompt[rid] + led.decoded[rid] - d0
            self.n_dec -= 1
            led.decoded[rid] = led.output[rid]
            led.finish[rid] = self.t
            self.running.remove(rid)
            self.done.append(rid)

    def _apply_single(self) -> None:
        assert self.plan_single is not None
        chunks, dt, comp, mem, comm = self.plan_single
        led = self.led
        self._account(dt, comp, mem, comm, self.n_dec + sum(c for _, c in chunks), self.n_dec)
        self.t += dt
        self.D += 1
        self._finish_due()
        for rid, c in chunks:
            led.pf_rem[rid] -= c
            self.kv_pf += c
            if led.pf_rem[rid] > 0:
                continue
            self.prefilling.remove(rid)
            ctx = led.prompt[rid] + led.decoded[rid]
            self.kv_pf -= ctx
            if np.isnan(led.first[rid]):
                led.first[rid] = self.t
            led.decoded[rid] += 1
            if led.decoded[rid] >= led.output[rid]:
                led.finish[rid] = self.t
                self.running.remove(rid)
                self.done.append(rid)
                continue
            self.d0[rid] = self.D
            self.kv_dec_a += ctx + 1 - self.D
            self.n_dec += 1
            heapq.heappush(self.fin, (self.D + led.output[rid] - led.decoded[rid], rid))
