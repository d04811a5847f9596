"""Capacity rules: scaling lag, cold start, rollout (``rules_capacity``) and their
metrics-only forms (``rules_metrics``)."""

from __future__ import annotations

from typing import Final

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
#: arrivals per serving replica at this multiple of the baseline's: the fleet carries clearly
#: more load per replica (an engine limit reached this way is load, not the engine's setting)
LOAD_PER_REPLICA_GREW: Final = 1.4

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
#: a new pod's engine TTFT in its first minute after Ready this many times its later p95 is
#: a warm-up penalty worth naming (run-to-run noise of a p95 stays well under it)
WARMUP_SLOWDOWN: Final = 1.5
#: a slow warm-up takes capacity only when it makes this share of the incident's tail band
#: (requests at or above its p95): below half, most of the tail is slow for another reason
WARMUP_TAIL_SHARE: Final = 0.5
#: the tail band a warm-up is weighed against: requests at or above the incident's p95
TAIL_BAND_QUANTILE: Final = 0.95
#: requests in the incident from which its tail band (top 5 %) holds a few requests
TAIL_BAND_MIN_REQUESTS: Final = 60
#: confidence kept by a rollout that took no capacity away (surge: ready replicas never below
#: the desired count, no slow warm-up): a benign deploy aligned with a breach it did not cause
ROLLOUT_KEEP_NO_CAPACITY_LOST: Final = 0.3

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
#: ... when Envoy's own gauges show its upstream pool queueing in the incident: gateway
#: evidence that the wait is before the engine, which only gateway spans can measure
TRACES_MISSING_POOL_QUEUED: Final = 0.75

#: the engine-side percentile grew by less than this share over its baseline: the engine did
#: not change, so the breach users see is not the engine's (histogram buckets blur ~10 %)
ENGINE_FLAT_GROWTH: Final = 0.15
#: evidence strength of "the engine did not change": stronger than a rule reading a stage's
#: size without growth, weaker than a rule seeing the stage grow
ENGINE_FLAT_CONFIDENCE: Final = 0.75
