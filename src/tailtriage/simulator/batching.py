"""A vLLM-V1-like continuous-batching scheduler with a paged KV cache.

The scheduler owns no clock: callers pass times in (``add``, ``complete``) and decide how long a
step takes (a :class:`~tailtriage.simulator.steptime.StepTimeModel`), so the discrete-event
simulator and the real-time ``serve-sim`` server drive the same code.  Use::

    batcher = ContinuousBatcher(BatchLimits(max_num_batched_tokens=2048), kv_blocks=20_000)
    batcher.add(Sequence("r1", prompt_tokens=900, output_tokens=200), now)
    plan = batcher.schedule()                 # None when there is nothing to run
    seconds = model.step_time(plan.prefill_tokens, plan.decode_seqs, plan.context_tokens)
    outcome = batcher.complete(plan, now + seconds)

Semantics follow vLLM V1 (analysis-anchors.md 3): every step first gives each running decode
one token, then spends what is left of ``max_num_batched_tokens`` on prompt chunks, running
prefills first, then waiting requests in arrival order (chunked prefill; without it a prompt
is only admitted whole).  KV blocks are allocated as tokens are computed; when they run out
the most recently admitted running sequence is preempted by recompute (its KV is dropped and it
goes back to the head of the queue).  A sequence's cost is ``prompt + generated`` tokens of
KV, and after a recompute it re-prefills all of them - except, with prefix caching on
(``reuse_freed``), the full blocks of its own that are still cached: vLLM V1 frees a
preempted request's blocks to the tail of the free queue (its last block first) and evicts
from the head, so they survive until the blocks that were free before it have been handed out
again, and its resumed prefill hits them (analysis-anchors.md 3; ``KVCacheManager.free``).

Decoding sequences are tracked lazily so a step costs O(sequences that change), not O(batch):
a decoding sequence's progress is ``step_no - base_step`` tokens past its base, block
boundaries are counted by phase (``computed mod block_size``), and finishes come off a heap.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tailtriage.errors import ConfigError

WAITING, PREFILL, DECODE, FINISHED = 0, 1, 2, 3


class Sequence:
    """One request inside the engine.  Times are whatever clock the caller uses."""

    __slots__ = (
        "base_computed",
        "base_generated",
        "base_step",
        "blocks",
        "cached_tokens",
        "computed",
        "engine_arrival",
        "finish_time",
        "first_scheduled",
        "first_token_time",
        "freed_mark",
        "generated",
        "order",
        "output_tokens",
        "payload",
        "preemptions",
        "prompt_tokens",
        "request_id",
        "segments",
        "state",
    )

    def __init__(
        self,
        request_id: str,
        prompt_tokens: int,
        output_tokens: int,
        *,
        cached_tokens: int = 0,
        payload: Any = None,
    ) -> None:
        if prompt_tokens < 1 or output_tokens < 1:
            raise ConfigError(f"request {request_id}: prompt and output need >= 1 token")
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.cached_tokens = min(cached_tokens, prompt_tokens - 1)  # last token always computed
        self.payload = payload
        self.state = WAITING
        self.computed = 0  # KV tokens computed (valid while not DECODE)
        self.generated = 0  # output tokens produced (valid while not DECODE)
        self.blocks = 0  # KV blocks held (valid while not DECODE)
        self.base_step = 0  # DECODE: step count when it entered decode
        self.base_computed = 0
        self.base_generated = 0
        self.order = 0  # admission order; preemption takes the newest
        self.preemptions = 0
        self.engine_arrival = 0.0
        self.first_scheduled: float | None = None
        self.first_token_time: float | None = None
        self.finish_time: float | None = None
        #: (first step index, count) of the steps whose ends emitted this sequence's tokens
        self.segments: list[list[int]] = []
        #: preempted with prefix caching on: (blocks handed out by then, free blocks ahead of
        #: its own in the free queue, its full blocks); None otherwise
        self.freed_mark: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """Engine flags that shape a batch (vLLM names)."""

    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    chunked_prefill: bool = True
    block_size: int = 16

    def __post_init__(self) -> None:
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1 or self.block_size < 1:
            raise ConfigError("engine limits must be positive")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM rejects this too: every running decode must fit in one step.
            raise ConfigError(
                f"engine.max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"engine.max_num_seqs ({self.max_num_seqs})"
            )


@dataclass(slots=True)
class StepPlan:
    """What one step runs.  Pass it back to :meth:`ContinuousBatcher.complete`."""

    step_index: int
    prefill_tokens: int
    decode_seqs: int
    context_tokens: int
    #: (sequence, tokens computed for it this step) for every prompt chunk
    chunks: list[tuple[Sequence, int]]
    preempted: list[Sequence] = field(default_factory=list)
    newly_scheduled: list[Sequence] = field(default_factory=list)

    @property
    def batch_seqs(self) -> int:
        return self.decode_seqs + len(self.chunks)

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs


@dataclass(slots=True)
class StepOutcome:
    first_tokens: list[Sequence]
    finished: list[Sequence]


class ContinuousBatcher:
    """The scheduler state of one engine replica."""

    def __init__(self, limits: BatchLimits, kv_blocks: int, *, reuse_freed: bool = False) -> None:
        if kv_blocks < 1:
            raise ConfigError("the engine needs at least one KV-cache block")
        self.limits = limits
        self.total_blocks = kv_blocks
        self.free_blocks = kv_blocks
        self.reuse_freed = reuse_freed  # prefix caching: freed blocks stay cached until evicted
        self.handed_out = 0  # blocks allocated so far (each one evicts the free queue's head)
        self.step_no = 0  # steps completed
        self.waiting: deque[Sequence] = deque()
        self.prefilling: list[Sequence] = []  # running, prompt not finished, in admission order
        self.preemptions_total = 0
        self.prompt_tokens_total = 0  # prefill tokens computed (recomputes included)
        self.generation_tokens_total = 0
        self._order = 0
        self._running_order: list[Sequence] = []  # admission order, stale entries skipped
        # lazy decode set
        self._decoding: dict[int, Sequence] = {}
        self._decode_ctx0 = 0  # sum over decoding of (base_computed - base_step)
        self._phase = [0] * limits.block_size
        self._finish_heap: list[tuple[int, int, Sequence]] = []
        self._in_flight: StepPlan | None = None

    # -- queries -------------------------------------------------------------------------
    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.prefilling) + len(self._decoding)

    @property
    def kv_usage(self) -> float:
        return 1.0 - self.free_blocks / self.total_blocks

    @property
    def idle(self) -> bool:
        return not (self.waiting or self.prefilling or self._decoding)

    def decode_context_tokens(self) -> int:
        return self._decode_ctx0 + self.step_no * len(self._decoding)

    def decoding(self) -> list[Sequence]:
        """Sequences in decode now (O(batch); for callers that stream every token)."""
        return list(self._decoding.values())

    def generated(self, seq: Sequence) -> int:
        """Output tokens ``seq`` has produced so far."""
        if seq.state == DECODE:
            return seq.base_generated + self.step_no - seq.base_step
        return seq.generated

    # -- input ---------------------------------------------------------------------------
    def add(self, seq: Sequence, now: float) -> None:
        seq.engine_arrival = now
        seq.computed = self._cached(seq)
        self.waiting.append(seq)

    def _cached(self, seq: Sequence) -> int:
        bs = self.limits.block_size
        return (seq.cached_tokens // bs) * bs  # prefix cache hits are whole blocks

    # -- one step ------------------------------------------------------------------------
    def schedule(self, now: float) -> StepPlan | None:
        """Plan the step that starts at ``now``, or None when nothing can run."""
        if self._in_flight is not None:
            raise RuntimeError("complete() the previous step before scheduling the next")
        lim = self.limits
        bs = lim.block_size
        if not self.waiting and not self.prefilling:
            return self._decode_only()
        preempted: list[Sequence] = []
        # 1. one token per decoding sequence; a new block whenever it crosses a boundary
        need = self._phase[(-self.step_no) % bs] if self._decoding else 0
        while need > self.free_blocks and self._decoding:
            victim = self._newest_running()
            need -= self._decode_needs_block(victim)
            self._preempt(victim)
            preempted.append(victim)
        self.free_blocks -= need
        self.handed_out += need
        decode_seqs = len(self._decoding)
        context = self.decode_context_tokens() + decode_seqs
        budget = lim.max_num_batched_tokens - decode_seqs
        chunks: list[tuple[Sequence, int]] = []
        prefill = 0
        # 2. running prefills continue, in admission order; when blocks run out, the newest
        #    prefills are preempted (decodes already hold their slot in this step)
        i = 0
        while i < len(self.prefilling) and budget > 0:
            seq = self.prefilling[i]
            n = min(seq.prompt_tokens + seq.generated - seq.computed, budget)
            extra = -(-(seq.computed + n) // bs) - seq.blocks
            while extra > self.free_blocks and len(self.prefilling) > i:
                victim = self.prefilling[-1]
                self._preempt(victim)
                preempted.append(victim)
            if seq.state != PREFILL:
                break  # it preempted itself: nothing newer is left to run
            self.free_blocks -= extra
            self.handed_out += extra
            seq.blocks += extra
            chunks.append((seq, n))
            prefill += n
            context += seq.computed + n
            budget -= n
            i += 1
        # 3. admit waiting requests (not in a step that had to preempt, as vLLM V1)
        newly: list[Sequence] = []
        while self.waiting and not preempted and budget > 0 and self.num_running < lim.max_num_seqs:
            seq = self.waiting[0]
            computed = seq.computed
            if seq.freed_mark is not None:  # its own blocks still cached are taken back
                computed = max(computed, self._still_cached(seq) * bs)
            remaining = seq.prompt_tokens + seq.generated - computed
            if not lim.chunked_prefill and remaining > budget and (chunks or decode_seqs):
                break
            n = min(remaining, budget) if lim.chunked_prefill else remaining
            blocks = -(-(computed + n) // bs)
            if blocks > self.free_blocks:
                break
            self.waiting.popleft()
            seq.computed, seq.freed_mark = computed, None
            self.free_blocks -= blocks
            self.handed_out += blocks
            seq.blocks = blocks
            seq.state = PREFILL
            self._order += 1
            seq.order = self._order
            self._running_order.append(seq)
            self.prefilling.append(seq)
            if seq.first_scheduled is None:
                seq.first_scheduled = now
                newly.append(seq)
            chunks.append((seq, n))
            prefill += n
            context += seq.computed + n
            budget -= n
        if not chunks and decode_seqs == 0:
            return None
        plan = StepPlan(self.step_no, prefill, decode_seqs, context, chunks, preempted, newly)
        self._in_flight = plan
        return plan

    def _decode_only(self) -> StepPlan | None:
        """The common step: nothing waits and no prompt is in flight (no loops needed)."""
        n = len(self._decoding)
        if n == 0:
            return None
        bs = self.limits.block_size
        need = self._phase[(-self.step_no) % bs]
        preempted: list[Sequence] = []
        while need > self.free_blocks and self._decoding:
            victim = self._newest_running()
            need -= self._decode_needs_block(victim)
            self._preempt(victim)
            preempted.append(victim)
        self.free_blocks -= need
        self.handed_out += need
        n = len(self._decoding)
        if n == 0:
            return None  # everything was preempted; the victims wait for blocks
        plan = StepPlan(self.step_no, 0, n, self._decode_ctx0 + self.step_no * n + n, [], preempted)
        self._in_flight = plan
        return plan

    def complete(self, plan: StepPlan, end_time: float) -> StepOutcome:
        """Apply a finished step at ``end_time``."""
        if plan is not self._in_flight:
            raise RuntimeError("complete() got a plan that is not the step in flight")
        self._in_flight = None
        idx = self.step_no
        self.step_no += 1
        self.generation_tokens_total += plan.decode_seqs
        self.prompt_tokens_total += plan.prefill_tokens
        first: list[Sequence] = []
        finished: list[Sequence] = []
        # decoding sequences due to finish now
        heap = self._finish_heap
        while heap and heap[0][0] <= self.step_no:
            _, _, seq = heapq.heappop(heap)
            if (
                seq.state != DECODE
                or seq.base_step + seq.output_tokens - seq.base_generated != self.step_no
            ):
                continue  # stale entry (preempted since)
            self._leave_decode(seq)
            seq.state = FINISHED
            seq.finish_time = end_time
            self.free_blocks += seq.blocks
            seq.blocks = 0
            finished.append(seq)
        # prompt chunks
        done_prefill = False
        for seq, n in plan.chunks:
            if seq.state != PREFILL:
                continue
            seq.computed += n
            if seq.computed < seq.prompt_tokens + seq.generated:
                continue
            done_prefill = True
            seq.generated += 1
            self.generation_tokens_total += 1
            _emit(seq, idx, 1)
            if seq.first_token_time is None:
                seq.first_token_time = end_time
                first.append(seq)
            if seq.generated >= seq.output_tokens:
                seq.state = FINISHED
                seq.finish_time = end_time
                self.free_blocks += seq.blocks
                seq.blocks = 0
                finished.append(seq)
            else:
                self._enter_decode(seq)
        if done_prefill:
            self.prefilling = [s for s in self.prefilling if s.state == PREFILL]
        return StepOutcome(first, finished)

    # -- decode-only stretches ------------------------------------------------------------
    def decode_run(self, limit: int) -> int:
        """How many steps, the one in flight first, stay decode-only with no finish and no
        preemption if nothing new arrives (at most ``limit``; 0 when the step in flight is not
        a decode-only step).  Such a stretch changes no sequence's state: only the step count,
        the context and the blocks handed out move, so it can be skipped in one go
        (:meth:`complete_decode_run`)."""
        plan = self._in_flight
        if plan is None or plan.chunks or self.prefilling or not self._decoding:
            return 0
        if self.waiting and not self._admission_blocked():
            return 0
        s = plan.step_index
        # a step's completion finishes the sequences due at its new step count
        k = min(limit, self._finish_heap[0][0] - s - 1) if self._finish_heap else limit
        # the steps after this one each take the blocks of the sequences crossing a boundary:
        # every decoding sequence crosses one in any block_size steps in a row
        bs = self.limits.block_size
        free = self.free_blocks
        if k <= 1 or free >= len(self._decoding) * -(-(k - 1) // bs):
            return max(k, 0)
        phase = self._phase
        for j in range(1, k):
            free -= phase[(-(s + j)) % bs]
            if free < 0:
                return j
        return max(k, 0)

    def complete_decode_run(self, plan: StepPlan, steps: int) -> None:
        """Complete the decode-only ``plan`` in flight and the ``steps - 1`` decode-only steps
        after it, exactly as ``steps`` rounds of :meth:`complete` and :meth:`schedule` would
        (``steps`` at most :meth:`decode_run`'s answer).  Nothing is in flight afterwards."""
        s = plan.step_index
        need = self._blocks_needed(s, steps)
        due = self._finish_heap[0][0] if self._finish_heap else s + steps + 1
        if (
            plan is not self._in_flight
            or plan.chunks
            or (self.waiting and not self._admission_blocked())
            or self.prefilling
            or not 1 <= steps < due - s
            or need > self.free_blocks  # needs are >= 0: no step before the last ran short
        ):
            raise RuntimeError("complete_decode_run() needs a decode-only run in flight")
        self.free_blocks -= need
        self.handed_out += need
        self.step_no += steps
        self.generation_tokens_total += plan.decode_seqs * steps
        self._in_flight = None

    # -- internals -----------------------------------------------------------------------
    def _admission_blocked(self) -> bool:
        """No waiting request can be admitted in any decode-only step from now on (no prompt
        in flight, nothing finishing): the batch is full (``max_num_seqs``, or decodes fill
        the token budget), or the head of the queue needs more KV blocks than are free now -
        decode steps only take blocks.  A head preempted with prefix caching gets back fewer
        of its cached blocks as others are handed out, so it is judged by the fewest blocks
        it could need.  Stretches over such steps are what a queue waiting for memory runs."""
        lim = self.limits
        n = len(self._decoding)
        budget = lim.max_num_batched_tokens - n
        if budget <= 0 or n + len(self.prefilling) >= lim.max_num_seqs:
            return True
        seq = self.waiting[0]
        total = seq.prompt_tokens + seq.generated
        if not lim.chunked_prefill:
            computed = seq.computed
            if seq.freed_mark is not None:  # the remainder only grows as blocks are evicted
                computed = max(computed, self._still_cached(seq) * lim.block_size)
            if total - computed > budget and n:
                return True
            return -(-total // lim.block_size) > self.free_blocks
        # chunked: it takes min(total, computed + budget) tokens of KV, fewest when nothing
        # of its own is still cached (``seq.computed``: its prefix-cache hit alone)
        least = min(total, seq.computed + budget)
        return -(-least // lim.block_size) > self.free_blocks

    def _blocks_needed(self, s: int, steps: int) -> int:
        """Blocks the decode-only steps ``s + 1 .. s + steps - 1`` take: every decoding
        sequence crosses one block boundary in any ``block_size`` steps in a row, so whole
        cycles count ``sum(phase)`` each and only the remainder is summed step by step."""
        bs = self.limits.block_size
        phase = self._phase
        cycles, rest = divmod(steps - 1, bs)
        return cycles * sum(phase) + sum(phase[(-(s + j)) % bs] for j in range(1, rest + 1))

    def _enter_decode(self, seq: Sequence) -> None:
        seq.state = DECODE
        seq.base_step = self.step_no
        seq.base_computed = seq.computed
        seq.base_generated = seq.generated
        self._decoding[id(seq)] = seq
        offset = seq.computed - self.step_no
        self._decode_ctx0 += offset
        self._phase[offset % self.limits.block_size] += 1
        finish_step = self.step_no + seq.output_tokens - seq.generated
        heapq.heappush(self._finish_heap, (finish_step, seq.order, seq))
        _emit(seq, self.step_no, 0)  # the decode run's tokens are counted when it leaves

    def _leave_decode(self, seq: Sequence) -> None:
        """Materialise a decoding sequence's lazy progress and drop it from the decode set."""
        del self._decoding[id(seq)]
        offset = seq.base_computed - seq.base_step
        self._decode_ctx0 -= offset
        self._phase[offset % self.limits.block_size] -= 1
        steps = self.step_no - seq.base_step
        seq.computed = seq.base_computed + steps
        seq.generated = seq.base_generated + steps
        seq.blocks = -(-seq.computed // self.limits.block_size)
        seg = seq.segments[-1]
        seg[1] = self.step_no - seg[0]  # the run emitted one token per step up to now

    def _decode_needs_block(self, seq: Sequence) -> int:
        if seq.state != DECODE:
            return 0
        offset = seq.base_computed - seq.base_step
        return 1 if (offset + self.step_no) % self.limits.block_size == 0 else 0

    def _newest_running(self) -> Sequence:
        while self._running_order:
            seq = self._running_order[-1]
            if seq.state in (PREFILL, DECODE):
                return seq
            self._running_order.pop()
        raise RuntimeError("no running sequence to preempt")  # pragma: no cover

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption: drop its KV, send it to the head of the queue."""
        if seq.state == DECODE:
            self._leave_decode(seq)
        else:
            self.prefilling.remove(seq)
        if self.reuse_freed:
            # its full blocks (the last token's KV is always recomputed) go behind the free ones
            full = (
                min(seq.computed, seq.prompt_tokens + seq.generated - 1) // self.limits.block_size
            )
            seq.freed_mark = (self.handed_out, self.free_blocks, full)
        self.free_blocks += seq.blocks
        seq.blocks = 0
        seq.computed = self._cached(seq)
        seq.state = WAITING
        seq.preemptions += 1
        self.preemptions_total += 1
        _remove_last(self._running_order, seq)
        self.waiting.appendleft(seq)

    def _still_cached(self, seq: Sequence) -> int:
        """Full blocks of a preempted ``seq`` not evicted since: allocations past the blocks that
        were free before it evict its blocks from its last one back."""
        assert seq.freed_mark is not None
        handed, ahead, full = seq.freed_mark
        evicted = max(0, self.handed_out - handed - ahead)
        return max(0, full - evicted)


def _emit(seq: Sequence, step_index: int, count: int) -> None:
    segs = seq.segments
    if segs and segs[-1][0] + segs[-1][1] == step_index and segs[-1][1] >= 0:
        segs[-1][1] += count
    else:
        segs.append([step_index, count])


def _remove_last(order: list[Sequence], seq: Sequence) -> None:
    """Remove ``seq`` from ``order``, searching from the end: a victim is among the newest
    admitted, while finished sequences pile up at the front until skipped."""
    for j in range(len(order) - 1, -1, -1):
        if order[j] is seq:
            del order[j]
            return
    raise ValueError(f"sequence {seq.request_id} is not running")  # pragma: no cover
