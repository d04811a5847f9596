"""Engine causes read from the engines' histograms when a capture has no traces
(``rules_metrics_engine``): per-replica request counts stand in for the spans' replica
attribution, and the prompt-length histogram's shape for the spans' prompt overlap."""

from __future__ import annotations

from typing import Final

# -- load imbalance from per-replica histogram counts (MetricsLoadImbalance) -----------------

#: every replica scraped for at least this share of the incident window: the fleet was the
#: same throughout (one missed scrape at an edge is allowed), so routing alone set the spread
STABLE_FLEET_EXPOSURE: Final = 0.9
#: the busiest replicas' engine TTFT at least this many times the others' mean: the tail sits
#: where the load is (a random spread of one window's means stays within ~10 %, histogram
#: bucket interpolation adds as much again)
REPLICA_TTFT_LIFT: Final = 1.3
#: how strongly the TTFT lift points at the hot replicas: (lift - 1) / this, capped at
#: W_IMBALANCE_MAX, so a hot replica twice as slow as the rest is full evidence
REPLICA_LIFT_SCALE: Final = 1.0
#: a TTFT observation is counted when the first token comes, a TTFT after the request arrived:
#: hot replicas whose mean TTFT is this share of the window or more released a backlog that
#: arrived before it, so their counts say when a queue drained, not where requests were sent
REPLICA_BACKLOG_SHARE: Final = 0.25

# -- KV cache filling up (MetricsKvFilling) ---------------------------------------------------

#: peak KV usage within a fifth of full: with vLLM's watermark and a long prompt's blocks to
#: allocate, the scheduler starts holding requests back before 100 %
KV_FILL_PEAK: Final = 0.8
#: ... and at least this much above the baseline's peak: the cache filled during the incident
#: (a cache that always runs full is the workload's normal state, not what changed)
KV_FILL_RISE: Final = 0.25
#: the cache filled during the incident
WM_KV_FILLED: Final = 0.4
#: ... while requests waited for admission
WM_KV_WAITING: Final = 0.2

# -- prefill interference from the prompt-length histogram (MetricsPrefillInterference) ------

#: the typical prompt: the prompt-length histogram's median
PROMPT_TYPICAL_PERCENTILE: Final = 50.0
#: the long prompts: its 99th percentile (a 1-in-100 minority is enough to stall decodes
#: that share every step with it)
PROMPT_TAIL_PERCENTILE: Final = 99.0
#: the incident's p99 prompt at least this many times its median: a minority of prompts an
#: order of magnitude longer than the typical one, whose prefills fill whole engine steps
#: (a log-normal prompt mix with a realistic spread keeps p99/p50 near 3-6)
PROMPT_TAIL_RATIO: Final = 10.0
#: the p99/p50 ratio grew at least this much against the baseline: the long prompts are new
PROMPT_TAIL_GROWTH: Final = 2.0
#: a long-prompt minority next to a per-token breach
WM_PROMPT_TAIL: Final = 0.45
#: ... that was not there before the incident
WM_PROMPT_TAIL_NEW: Final = 0.3
