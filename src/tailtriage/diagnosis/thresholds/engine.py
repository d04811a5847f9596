"""Engine rules: compute saturation (``rules_saturation``) and the TTFT/ITL trees inside the
engine (``rules_engine``)."""

from __future__ import annotations

from typing import Final

# -- compute saturation (diagnosis.rules_saturation) ---------------------------------------

#: an engine queue averaging this many requests has built up, whatever its trend
SATURATION_QUEUE_MEAN: Final = 4.0
#: a backlog growing by this share of the arrival rate per second is arrivals outpacing
#: completions (Little's law)
BACKLOG_GROWTH_SHARE: Final = 0.03
#: completions within this multiple of the baseline's are flat ...
FLAT_COMPLETIONS: Final = 1.05
#: ... while arrivals grew by more than this multiple
ARRIVALS_GREW: Final = 1.1
#: SM activity from which busy GPUs count as (weaker) evidence
GPU_NEARLY_BUSY: Final = 0.75
#: GPUs busy (GPU_BUSY or more) ...
W_GPU_BUSY: Final = 0.35
#: ... or nearly busy
W_GPU_NEARLY_BUSY: Final = 0.2
#: the engine queue grew
W_SATURATION_QUEUE: Final = 0.25
#: a running batch this many times the baseline's: more sequences share every step
RUNNING_GROWTH: Final = 1.5
#: ... which weighs this much
W_RUNNING_GREW: Final = 0.2
#: completions fell behind arrivals
W_COMPLETIONS_LAG: Final = 0.2
#: the running batch sits at its cap (engine_limits.compute_bound)
W_BATCH_AT_CAP: Final = 0.35
#: confidence kept when the saturation proof fails (the signs stand, the guardrail does not)
UNPROVEN_SATURATION: Final = 0.6
#: confidence kept when the KV cache is full and preempting: memory, not compute, is the limit
KV_BOUND_SATURATION: Final = 0.5


# -- which breach the ITL tree reads (diagnosis.rules_engine._itl_slo) -----------------------

#: an e2e breach is read as a per-token one when decode holds this share of its tail (else
#: the time is mostly before the first token and the TTFT rules own it)
DECODE_TAIL_SHARE: Final = 0.4

# -- prefill compute (diagnosis.rules_engine.PrefillCompute) ---------------------------------

#: prefill must hold this share of the tail (more than STAGE_SHARE_MIN): a prefill is in
#: every request, so a small share of it is normal work, not the cause
PREFILL_SHARE_MIN: Final = 0.25
#: a prefill stage that matters, before its size is counted ...
W_PREFILL_STAGE: Final = 0.4
#: ... plus this times its share of the tail (a prefill that is the whole tail adds it all)
W_PREFILL_SHARE: Final = 0.3
#: prompts grew by PROMPT_SHIFT or more: the compute per prefill grew with them
W_PROMPTS_GREW: Final = 0.35
#: TTFT follows prompt length (PROMPT_TTFT_CORRELATION): the prompt sets the time
W_TTFT_FOLLOWS_PROMPT: Final = 0.25
#: tensor cores busy (TENSOR_BUSY): the steps are matmul-bound, as prefill is
W_TENSOR_BUSY: Final = 0.2
#: KV usage peaking here makes preemption likely, and a preempted request's recompute looks
#: like a slow prefill; also the "near full" line shown beside KV-cache pressure
KV_NEAR_FULL: Final = 0.9
#: mean KV usage over the incident from which a cache that also peaked full, with requests
#: waiting and the batch below its cap, may be what holds admission back: more than half
#: full on average, so one full scrape beside an otherwise roomy cache does not count
KV_HIGH_MEAN_ADMISSION: Final = 0.5
#: confidence kept when the KV cache peaks near full while evicting or full all incident
#: (the prefill may be a recompute)
PREFILL_KEEP_KV_FULL: Final = 0.6
#: ... when prompts did not grow (the steps got slower: something else changed)
PREFILL_KEEP_PROMPTS_FLAT: Final = 0.35
#: ... when TTFT does not follow prompt length (waiting, not the prompt, sets it)
PREFILL_KEEP_TTFT_UNRELATED: Final = 0.6
#: ... when the fleet is compute- or KV-bound (long prompts next to a fuller limit)
PREFILL_KEEP_OTHER_LIMIT: Final = 0.7
#: ... when a wide TP group under-uses its HBM (communication, not prompt compute)
PREFILL_KEEP_TP_SUSPECT: Final = 0.5
#: ... when decode is slowed by overlapping prefills (the interference rule explains a
#: long-prompt minority stalling everyone)
PREFILL_KEEP_INTERFERENCE: Final = 0.5
#: share of the engine queue's growth put on long prefills (requests queue behind them; the
#: rest may be any other reason the engine is behind)
PREFILL_QUEUE_SHARE: Final = 0.5
#: the typical (median) prompt grew this much while arrivals per replica did not: the same
#: requests-per-second now cost twice the prefill compute, which overloads an engine run at
#: an ordinary utilisation - its queue is the prompts' (facts.prompts_overload)
PROMPT_OVERLOAD_SHIFT: Final = 2.0
#: a queue that prompt growth at flat arrivals explains (the overload is the evidence: the
#: prefill share of the tail is then small, the queue in front of it large)
W_PROMPT_OVERLOAD: Final = 0.35

# -- KV-cache pressure (diagnosis.rules_engine.KvCachePressure) ------------------------------

#: peak usage at KV_FULL: a new sequence's blocks no longer fit
W_KV_FULL: Final = 0.35
#: peak usage at KV_HIGH only: the scheduler starts to hold requests
W_KV_HIGH: Final = 0.2
#: preemptions counted in the incident: sequences evicted and recomputed, the cache's own sign
W_PREEMPTIONS: Final = 0.5
#: preemptions count as the cache's sign (W_PREEMPTIONS, engine_limits.kv_bound) only when at
#: least this share of the incident's requests was evicted (and one per replica, facts.preempting):
#: one in a hundred is a cache that keeps running out; fewer is a rare long sequence meeting
#: a momentary peak
PREEMPTION_SHARE_MIN: Final = 0.01
#: outputs this much longer than the baseline's hold each request's cache blocks that much
#: longer (the same step as PROMPT_SHIFT for prompts: a shift of the mix, not noise)
OUTPUT_SHIFT: Final = 1.3
#: a full cache while outputs grew and prompts did not (facts.outputs_grew): requests hold
#: blocks through longer decodes, so fewer fit, and no other engine cause lengthens the path
#: to the first token
W_KV_LONGER_OUTPUTS: Final = 0.3
#: mean usage at KV_HIGH too: pressure for the whole incident, not a peak
W_KV_HIGH_MEAN: Final = 0.2
#: the engine is KV-bound (engine_limits.kv_bound: full, preempting, compute has room)
W_KV_BOUND: Final = 0.3
#: the cache may hold admission back without evicting (engine_limits.kv_limits_admission:
#: full at its peak, half full on average, requests waiting, batch below its cap): half the
#: weight, since long prefills next to a roomy cache can look the same for a scrape or two
W_KV_ADMISSION: Final = 0.15
#: confidence kept when the fleet is compute-bound instead: a full cache is what a pinned,
#: busy batch looks like too
KV_KEEP_COMPUTE_BOUND: Final = 0.5
#: confidence kept when each request asks for no more tokens than in the baseline while
#: arrivals per replica grew: the cache fills because the fleet is short of replicas (a
#: capacity cause), and more KV per replica would only move the queue
KV_KEEP_LOAD_DRIVEN: Final = 0.5
#: mean KV usage must rise this much over the baseline's for a cache that evicts nothing,
#: under requests no heavier than before, to be what changed (a busy engine's cache peaks
#: near full in any window)
KV_ROSE: Final = 0.15
#: confidence kept when it did not: the cache was as full before the breach
KV_KEEP_UNCHANGED: Final = 0.5

# -- memory-bound decode (diagnosis.rules_engine.DecodeMemoryBound) --------------------------

#: a per-token breach alone: decode re-reads weights and KV every step, the usual ITL limit
W_DECODE_BREACH: Final = 0.25
#: HBM busy (DRAM_BUSY): the step is bandwidth-bound
W_HBM_BUSY: Final = 0.45
#: HBM activity under this is no bandwidth-bound step ...
HBM_QUIET: Final = 0.4
#: ... and a running batch grown by this multiple reads more KV per step (more sequences,
#: each its own cache); under both, the breach alone is all that is left
DECODE_BATCH_GROWTH: Final = 1.3
#: what the breach alone weighs when HBM is quiet and the batch did not grow
W_DECODE_UNSUPPORTED: Final = 0.1
#: per-request TPOT correlates with the running batch it decoded in at least this much: each
#: step's length follows the sequences it reads (a moderate r: sampling and mixed output
#: lengths add noise that no batch effect removes)
TPOT_TRACKS_BATCH: Final = 0.6
#: TPOT tracks the batch (TPOT_TRACKS_BATCH): the step is bound by what it reads per sequence
W_TPOT_TRACKS_BATCH: Final = 0.3
#: a running batch this many times the baseline's doubles the KV read per step ...
DECODE_BATCH_DOUBLED: Final = 2.0
#: ... which weighs this much
W_BATCH_DOUBLED: Final = 0.4
#: a batch grown by DECODE_BATCH_GROWTH but not doubled
W_BATCH_GREW: Final = 0.25
#: confidence kept when decode is slowed by overlapping prefills (token gaps follow others'
#: prefills, not HBM)
DECODE_KEEP_INTERFERENCE: Final = 0.6
#: HBM under this on a GPU group with interconnect traffic is half idle: it waits on
#: communication, not on memory
HBM_HALF_IDLE: Final = 0.5
#: confidence kept when HBM is half idle on a TP group (communication sets the step)
DECODE_KEEP_TP: Final = 0.5

# -- tensor-parallel overhead (diagnosis.rules_engine.TensorParallelOverhead) ----------------

#: GPUs per replica from which the all-reduce volume is large (TP4 and up moves three
#: quarters of every activation across the interconnect per layer)
TP_WIDE_GPUS: Final = 4
#: a replica spanning TP_WIDE_GPUS or more ...
W_TP_WIDE: Final = 0.3
#: ... or two to three GPUs
W_TP_NARROW: Final = 0.15
#: communication grew against the baseline (traffic per token, or HBM fell as steps slowed)
W_COMM_GREW: Final = 0.35
#: interconnect traffic measured at all
W_NVLINK_SEEN: Final = 0.15
#: HBM under TP_DRAM_IDLE: the step is not memory-bound
W_TP_HBM_IDLE: Final = 0.35

# -- prefill interference (diagnosis.rules_engine.PrefillInterference) -----------------------

#: the per-token slowdown of overlapped requests (INTERFERENCE_TPOT_RATIO or more) ...
W_INTERFERENCE: Final = 0.3
#: ... plus this times the slowdown beyond 1x (a 1.2x slowdown adds 0.3) ...
W_INTERFERENCE_PER_SLOWDOWN: Final = 1.5
#: ... up to this (a slowdown of 1.4x or more)
W_INTERFERENCE_MAX: Final = 0.6
#: confidence kept when the median prompt grew by PROMPT_SHIFT too: the whole mix got longer,
#: so every prefill is longer (prompt compute), not a minority's stalling the rest
INTERFERENCE_KEEP_MIX_SHIFT: Final = 0.5
#: a long-prompt minority joined (mean prompt up PROMPT_SHIFT, median not): what interferes
#: is there, whether or not the sampled traces caught the overlaps
W_LONG_PROMPT_MINORITY: Final = 0.35
#: overlapped requests' over-representation among the slowest 5 % shown against this (the
#: lift alone is confounded by long decodes overlapping more prefills, so it is not tested)
INTERFERENCE_TAIL_LIFT: Final = 1.3
