"""Every threshold the rules decide with, each named and with why it has that value.

They are set from what the mechanisms do, not fitted to one capture: a significance level where
a statistical test decides, a physical limit (a KV cache at 95 % has no room for a new
sequence), or the smallest effect worth a user's attention.  Grouped by the rule that uses them."""

from __future__ import annotations

from typing import Final

# -- load imbalance (diagnosis.imbalance) ---------------------------------------------------

#: significance level of the imbalance tests: several signals and replicas are tested per
#: capture, and a false "routing is uneven" sends the user after the wrong fix
IMBALANCE_ALPHA: Final = 0.001
#: queue lengths are over-dispersed against Poisson (an M/M/1 queue at 75 % load has
#: variance/mean = 1/(1 - 0.75) = 4), so a queue's dispersion index is divided by this
QUEUE_OVERDISPERSION: Final = 4.0
#: a replica is hot when its Pearson residual (observed - expected) / sqrt(expected x
#: dispersion) exceeds this (one-sided 2.5 % of a normal)
HOT_REPLICA_Z: Final = 1.96
#: smallest hot/expected ratio worth reporting: with 10^5 requests a 3 % skew is "significant"
#: but explains nothing
MIN_IMBALANCE_RATIO: Final = 1.4
#: fewest requests in the window (sampled) for the count test to mean anything (5 per cell is
#: the usual chi-square validity rule, for a handful of replicas)
MIN_IMBALANCE_REQUESTS: Final = 50
#: a per-replica queue averaging under one request is no queue to compare
MIN_MEAN_QUEUE: Final = 1.0
#: the hot replicas must hold at least this share of the tail band ...
TAIL_ON_HOT_MIN: Final = 0.5
#: ... and a request on them must be this many times likelier to be in the tail than one on
#: another replica (else the tail is fleet-wide)
TAIL_RISK_MIN: Final = 2.0

# -- ranking (diagnosis.ranking) -----------------------------------------------------------

#: a cause that explains half the percentile's excess over baseline is a primary cause: its
#: confidence is not shrunk for coverage
PRIMARY_SHARE: Final = 0.5
#: confidence of a finding that explains (almost) none of the excess, relative to its evidence:
#: the evidence may be right about a secondary cause
COVERAGE_FLOOR: Final = 0.3
#: a finding's explained share counts at least this much in the rank score, so strong
#: evidence about a small stage still orders among the small ones
MIN_RANK_SHARE: Final = 0.02
#: floor of the severity factor (observed / threshold - 1): a barely breached SLO still
#: orders its findings
MIN_SEVERITY: Final = 0.05

# -- stages ---------------------------------------------------------------------------------

#: a stage matters when it grew by this fraction of the SLO threshold ...
STAGE_GROWTH_OF_THRESHOLD: Final = 0.1
#: ... but never less than this (a few ms is measurement noise at any SLO)
STAGE_GROWTH_MIN_S: Final = 0.015
#: without a baseline, a stage matters when it holds this share of the breached percentile ...
STAGE_SHARE_MIN: Final = 0.12
#: ... and at least this long (10 ms is below what a user notices at any SLO)
STAGE_MIN_S: Final = 0.01

# -- capacity: scaling lag, cold start (diagnosis.rules_capacity, diagnosis.startup) --------

#: an HPA syncs every 15 s and reads metrics up to 30 s old: a first scale-up later than this
#: after the incident began is late
LATE_SCALE_UP_S: Final = 30.0
#: desired - current replicas averaging at least this means pods were asked for and not ready
DESIRED_GAP_MIN: Final = 0.5
#: scheduled -> Ready longer than this is a slow start for a serving pod: it outlasts an HPA's
#: reaction several times over
COLD_START_SLOW_S: Final = 60.0
#: pods created this long before the incident can still be loading when it starts (an LLM
#: server takes minutes to pull and load)
STARTUP_LEAD_S: Final = 600.0
#: rollout steps this long before the incident still shape it (surge pods loading)
ROLLOUT_LEAD_S: Final = 300.0
#: an image pull longer than this dominates a start-up (a cached image is pulled in ~0 s)
IMAGE_PULL_SLOW_S: Final = 20.0
#: container start -> Ready longer than this is weight loading / warm-up, not process start
WEIGHT_LOAD_SLOW_S: Final = 30.0

# -- engine discriminators (diagnosis.engine_limits) ----------------------------------------

#: a running batch averaging this share of its window maximum is pinned at a cap (Poisson
#: arrivals into a free batch average well below its peak)
BATCH_PINNED_FRACTION: Final = 0.85
#: DCGM SM activity at which the GPU is compute-busy (NVIDIA's guidance: >= 0.8 is a busy SM)
GPU_BUSY: Final = 0.8
#: tensor-pipe activity at which matmuls dominate (prefill-heavy steps reach 0.5+)
TENSOR_BUSY: Final = 0.5
#: SM activity under this leaves clear compute headroom
GPU_IDLE: Final = 0.7
#: KV usage at which a new sequence's blocks no longer fit (vLLM preempts from here)
KV_FULL: Final = 0.95
#: requests waiting on average per fleet for "the scheduler could not admit them"
WAITING_MIN: Final = 1.0
#: fewest requests for a prompt/TTFT correlation to be read (its 95 % interval is then +-0.2)
MIN_CORRELATION_REQUESTS: Final = 100
#: TTFT follows prompt length when their correlation reaches this (a quarter of the TTFT
#: variance explained by prompt length)
PROMPT_TTFT_CORRELATION: Final = 0.5
#: prompts this much longer than the baseline's are a prompt-mix shift
PROMPT_SHIFT: Final = 1.3

# -- Envoy connection pool (diagnosis.envoy) ------------------------------------------------

#: a pending queue averaging one request means requests wait for upstream connections
ENVOY_PENDING_MIN: Final = 1.0
#: the pool wait must explain at least this share of the ingress stage's growth for that
#: time to be called a gateway queue rather than network
POOL_QUEUE_SHARE: Final = 0.5
#: KV usage from which the cache is under pressure (vLLM's scheduler starts to hold requests)
KV_HIGH: Final = 0.85
#: decoding while a long prompt is prefilled must be this much slower per token to be
#: interference (step-time noise between batches is ~10 %)
INTERFERENCE_TPOT_RATIO: Final = 1.2
#: HBM interface activity at which decode steps are memory-bound
DRAM_BUSY: Final = 0.6

# -- tensor-parallel overhead (diagnosis.rules_engine) --------------------------------------

#: HBM activity under which a TP group's decode step is not memory-bound (a TP4 decode reads
#: a quarter of the weights per GPU and idles near 0.5 while it waits on all-reduce)
TP_DRAM_IDLE: Final = 0.45
#: interconnect bytes per generated token grown by this much against the baseline (all-reduce
#: volume per token is fixed by the model and TP size, so batch noise moves it ~10 %)
TP_TRAFFIC_GROWTH: Final = 1.25

# -- facts several rules test (diagnosis.facts) ----------------------------------------------

#: completions under this share of arrivals mean the fleet fell behind (a window's edges cut
#: a few requests in flight, so a few percent is noise)
COMPLETION_LAG_RATIO: Final = 0.97

# -- scaling lag (diagnosis.rules_capacity.ScalingLag) -------------------------------------
#
# Evidence weights: how strongly one piece of evidence alone points at the cause; a finding's
# confidence combines them (``rule.combine``), so no single weaker sign decides it.

#: a scale-up up to this long before the incident began still belongs to it (the decision
#: precedes the ready pods by minutes)
SCALE_UP_LOOKBACK_S: Final = 120.0
#: a first decision this close before the incident's start counts as a reaction to it (the
#: window's edges are scrape-aligned)
DECISION_SLACK_S: Final = 5.0
#: share of the engine queue's growth counted as waiting for replicas (the rest may be the
#: replicas' own saturation)
QUEUE_CAPACITY_SHARE: Final = 0.5
#: share of the wait for capacity put on the start-up when no scale-up decision can be timed
UNTIMED_COLD_SHARE: Final = 0.5
#: an HPA on a load-blind metric (CPU of a GPU server) is the classic cause on its own
W_HPA_BLIND: Final = 0.6
#: a late first scale-up decision ...
W_LATE_DECISION: Final = 0.35
#: ... and one later than twice LATE_SCALE_UP_S
W_VERY_LATE_DECISION: Final = 0.5
#: replicas still being added during the incident: capacity on its way, not here
W_REPLICAS_GROWING: Final = 0.25
#: desired above current replicas: pods asked for and not ready
W_REPLICAS_SHORT: Final = 0.3
#: the HPA never moved while load rose and it was below its maximum
W_NEVER_SCALED: Final = 0.5
#: the engine queue grew meanwhile (supporting, not deciding)
W_QUEUE_GREW: Final = 0.15
#: an engine queue averaging this many requests has grown, whatever its trend
CAPACITY_QUEUE_MEAN: Final = 2.0
#: arrivals under this multiple of the baseline's are no load growth an HPA should follow
LOAD_GROWTH_MIN: Final = 1.2

# -- cold start (diagnosis.rules_capacity.ColdStart) ---------------------------------------

#: a slow start-up (COLD_START_SLOW_S or longer) ...
W_SLOW_START: Final = 0.35
#: ... and a start-up of any length while capacity was requested
W_ANY_START: Final = 0.1
#: a slow image pull or slow weight loading, each
W_SLOW_PULL_OR_LOAD: Final = 0.15
#: start-up more than this many times the decision's delay: the pods, not the HPA, were slow
STARTUP_OVER_DECISION: Final = 2.0
#: ... which then weighs this much
W_STARTUP_DOMINATES: Final = 0.45
#: scaled from zero: every request waited for a cold replica
W_FROM_ZERO: Final = 0.4
#: the HPA follows the load, so lag is not its metric
W_LOAD_AWARE_HPA: Final = 0.2
#: new pods waited for a GPU node
W_NODE_WAIT: Final = 0.25
#: share of the gateway queue's growth a cold start explains (requests queued at the gateway
#: while the replicas loaded; the rest is the gateway's own limit)
COLD_GATEWAY_SHARE: Final = 0.5

# -- rollout (diagnosis.rules_capacity.Rollout) --------------------------------------------

#: a ReplicaSet change ...
W_ROLLOUT: Final = 0.5
#: ... or only old-version pods killed
W_ROLLOUT_KILLS_ONLY: Final = 0.25
#: old-version pods killed beside a rollout
W_ROLLOUT_KILLS: Final = 0.3
#: capacity changed without the autoscaler asking for it
W_NO_SCALE_UP: Final = 0.2

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

# -- metrics-only captures (diagnosis.rules_metrics) ---------------------------------------
#
# Without traces the rules see the engine's side only, so each sign weighs less than with
# the pending and gateway stages measured.

#: capacity that arrives late was asked for minutes before the engine saw the backlog: how far
#: before the engine-side incident to look for scale-ups, pending pods and start-ups
METRICS_LOOKBACK_S: Final = 600.0
#: an HPA on a load-blind metric
WM_HPA_BLIND: Final = 0.5
#: a late first scale-up decision, or pods asked for and not ready, each
WM_LATE_OR_SHORT: Final = 0.35
#: replicas being added during the incident
WM_REPLICAS_GROWING: Final = 0.2
#: the HPA never moved while the engines' request rate rose
WM_NEVER_SCALED: Final = 0.4
#: a slow start-up (COLD_START_SLOW_S or longer) ...
WM_SLOW_START: Final = 0.4
#: ... a slow pending phase (as long) ...
WM_SLOW_PENDING: Final = 0.3
#: ... and new pods waiting for a GPU node
WM_NODE_WAIT: Final = 0.25
#: rollout steps seen ...
WM_ROLLOUT: Final = 0.5
#: ... or only pods killed without the autoscaler growing the fleet
WM_KILLS_ONLY: Final = 0.35
#: pods killed
WM_KILLS: Final = 0.25
#: capacity changed without the autoscaler asking for it
WM_NO_SCALE_UP: Final = 0.2
#: "traces missing" when the breach is in ITL/TPOT: traces add little to a per-gap histogram
TRACES_MISSING_TOKEN_METRIC: Final = 0.2
#: ... when TTFT/e2e is breached engine-side: the time before the engine is unmeasured
TRACES_MISSING_BREACHED: Final = 0.3
#: ... when the engine-side percentile holds: a user-seen breach must be before the engine
TRACES_MISSING_WITHIN: Final = 0.6

#: the engine-side percentile grew by less than this share over its baseline: the engine did
#: not change, so the breach users see is not the engine's (histogram buckets blur ~10 %)
ENGINE_FLAT_GROWTH: Final = 0.15
#: evidence strength of "the engine did not change": stronger than a rule reading a stage's
#: size without growth, weaker than a rule seeing the stage grow
ENGINE_FLAT_CONFIDENCE: Final = 0.75
