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
#: ... and this many times their share of the requests (else the tail is fleet-wide)
TAIL_LIFT_MIN: Final = 1.5

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

# -- stages ---------------------------------------------------------------------------------

#: a stage matters when it grew by this fraction of the SLO threshold ...
STAGE_GROWTH_OF_THRESHOLD: Final = 0.1
#: ... but never less than this (a few ms is measurement noise at any SLO)
STAGE_GROWTH_MIN_S: Final = 0.015
