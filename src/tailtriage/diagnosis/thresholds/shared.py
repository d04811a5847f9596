"""Thresholds several rules read: the evidence facts (stages, ranking, imbalance, engine
limits, Envoy pool, start-ups), the signals gathering and the telemetry-gap findings."""

from __future__ import annotations

from typing import Final

# -- load imbalance (diagnosis.imbalance) ---------------------------------------------------

#: significance level of the imbalance tests: several signals and replicas are tested per
#: capture, and a false "routing is uneven" sends the user after the wrong fix
IMBALANCE_ALPHA: Final = 0.001
#: queue lengths are over-dispersed against Poisson (an M/M/1 queue at 75 % load has
#: variance/mean = 1/(1 - 0.75) = 4), so a queue's dispersion index is divided by this
QUEUE_OVERDISPERSION: Final = 4.0
#: a replica with this share of the fullest replica's gauge samples served the whole window;
#: fewer means it joined or left inside it, and its mean is a ramp, not a share of the load
FULL_WINDOW_SAMPLES: Final = 0.9
#: requests served by the replicas not found hot, needed to say the tail is likelier on the
#: hot ones (a relative risk against a handful of requests is noise)
MIN_IMBALANCE_COMPARISON: Final = 20
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
#: half the replicas' batches pinned at their maximum make the fleet batch-bound
#: (engine_limits.batch_at_cap)
PINNED_REPLICA_SHARE: Final = 0.5
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
#: scrapes with a request waiting on a replica, at least, before their mean KV usage says
#: what the queue met (three: one full scrape beside a roomy cache is a momentary peak)
MIN_JOINT_SAMPLES: Final = 3
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


# -- the signals read once per capture (diagnosis.signals) ----------------------------------

#: events and pod start-ups are read from this long before the incident: a rollout's surge
#: pods or a scale-up's pods decided minutes earlier still shape it
EVENT_LEAD_S: Final = 300.0
#: fewest scrapes for a gauge's trend (a line through two points fits any noise exactly)
MIN_SLOPE_SAMPLES: Final = 3
#: fewest prompts and decoding requests in the window for the interference comparison (the
#: per-group means below need this many to split)
MIN_INTERFERENCE_REQUESTS: Final = 50
#: a prompt this many times the median is "long": its prefill chunks stall the decode steps
#: they share (a homogeneous workload has none)
LONG_PROMPT_MEDIANS: Final = 4.0
#: ... and never shorter than this many tokens (one default chunked-prefill budget is 512-2048
#: tokens: a shorter prompt is prefilled in one step like any other)
LONG_PROMPT_MIN_TOKENS: Final = 1024.0
#: fewest long prompts for interference to be told from noise ...
MIN_LONG_PROMPTS: Final = 3
#: ... and their smallest share of the prompts (a 0.5 % minority in a large window)
MIN_LONG_PROMPT_SHARE: Final = 0.005
#: fewest requests in each group (overlapped, clean) for their mean TPOTs to be compared
MIN_INTERFERENCE_GROUP: Final = 5

# -- telemetry gaps (diagnosis.diagnose) -----------------------------------------------------

#: no finding is certain (telemetry can always miss a cause), so confidence stops short of 1
MAX_CONFIDENCE: Final = 0.99
#: findings under this confidence are dropped: weaker than a single supporting sign, they
#: would list every cause a capture cannot rule out
MIN_CONFIDENCE: Final = 0.2
#: a TTFT/e2e breach without any stage timings: nothing can be located, almost surely a gap
GAP_NO_TRACES: Final = 0.9
#: a stage with no finding to explain it is a gap when it holds this share of the tail
GAP_SHARE_MIN: Final = 0.15
#: an ITL breach with no decode finding: the GPU counters that tell its causes apart are
#: missing (or the cause is one no rule knows)
GAP_NO_GPU_COUNTERS: Final = 0.6
#: an unexplained stage's gap confidence: this plus the stage's share of the tail ...
GAP_STAGE_BASE: Final = 0.3
#: ... up to this (a rule's finding, when one exists, should still outrank the gap)
GAP_STAGE_MAX: Final = 0.8
