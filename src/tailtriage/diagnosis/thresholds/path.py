"""Rules on the request path in front of the engine (``rules_path``) and for disaggregated and
cache-aware serving (``rules_disagg``)."""

from __future__ import annotations

from typing import Final

# -- ingress and TLS (diagnosis.rules_path.IngressNetwork) -----------------------------------

#: client/ingress must hold this share of the tail (above STAGE_SHARE_MIN): every request
#: crosses the edge, so a small share is normal network time
EDGE_SHARE_MIN: Final = 0.15
#: ingress grown by more than this (20 ms) is a TLS handshake or a slower network, beyond
#: the jitter of a reused connection
INGRESS_GREW_S: Final = 0.02
#: an edge stage that matters
W_EDGE: Final = 0.5
#: ... and that grew by INGRESS_GREW_S
W_INGRESS_GREW: Final = 0.3
#: the edge's share of the tail counts up to this
W_EDGE_SHARE_MAX: Final = 0.5

# -- gateway queue (diagnosis.rules_path.GatewayQueue) ---------------------------------------

#: a gateway-queue stage that matters: requests measured waiting for an upstream slot
W_GATEWAY_STAGE: Final = 0.55
#: the gateway's own queue gauge
W_GATEWAY_GAUGE: Final = 0.2
#: the activator held requests for a fixed fleet (pending stage, no capacity coming)
W_ACTIVATOR_HELD: Final = 0.2
#: engine queues stayed under WAITING_MIN: the engines had room
W_ENGINE_QUEUES_EMPTY: Final = 0.25
#: GPUs under GPU_IDLE: compute had room
W_GPU_HEADROOM: Final = 0.15
#: Envoy's pending queue explains the ingress growth (POOL_QUEUE_SHARE)
W_ENVOY_POOL: Final = 0.3
#: confidence kept when imbalance is proven (per-replica limits hit by an uneven spread)
GATEWAY_KEEP_IMBALANCE: Final = 0.7
#: confidence kept during a rollout (capacity was being replaced: the rollout rule owns it)
GATEWAY_KEEP_ROLLOUT: Final = 0.6

# -- API server (diagnosis.rules_path.ApiServerOverhead) -------------------------------------

#: an api_server stage that matters
W_API_STAGE: Final = 0.55
#: CPU cores busy per serving container from which the frontend is CPU-starved (its
#: tokenization and HTTP handling run on one Python event loop: one core at most)
API_CPU_BUSY_CORES: Final = 0.9
#: ... which weighs this much
W_API_CPU: Final = 0.3

# -- load imbalance (diagnosis.rules_path.LoadImbalance) -------------------------------------

#: tail risk is capped here for the weight and the text (no tail off the hot replicas makes
#: it infinite)
TAIL_RISK_CAP: Final = 99.0
#: the spread is beyond the routing's chance spread (IMBALANCE_ALPHA)
W_IMBALANCE: Final = 0.4
#: how far beyond: (hot/expected - 1) / this, so a replica at 1.8x reaches W_IMBALANCE_MAX
IMBALANCE_RATIO_SCALE: Final = 2.0
#: how strongly the tail follows the hot replicas: (risk - 1) / this, so 3x reaches the max
TAIL_RISK_SCALE: Final = 5.0
#: the cap of both graded weights
W_IMBALANCE_MAX: Final = 0.4

# -- KV transfer (diagnosis.rules_disagg.KvTransfer) -----------------------------------------

#: a KV transfer this slow (ms, SGLang's gauge) is well above NIXL/RDMA norms for one prompt
SLOW_TRANSFER_MS: Final = 50.0
#: a kv_transfer stage that matters
W_TRANSFER_STAGE: Final = 0.45
#: transfers as slow as SLOW_TRANSFER_MS
W_SLOW_TRANSFER: Final = 0.3
#: failed transfers or bootstraps (each forces a retry or a recompute)
W_TRANSFER_FAILED: Final = 0.4

# -- prefix-cache misses (diagnosis.rules_disagg.PrefixCacheMiss) ----------------------------

#: the prefix-cache hit share fell by at least this much (absolute) against the baseline
HIT_DROP: Final = 0.15
#: llm-d's index found the prefix for this share of lookups: there was reuse to route to
INDEX_HIT_SHARE: Final = 0.3
#: the hit share fell by HIT_DROP or more ...
W_HIT_DROP: Final = 0.4
#: ... plus this times the fall (a 15-point fall adds 0.225) ...
W_PER_HIT_DROP: Final = 1.5
#: ... up to this (a fall of a third or more)
W_HIT_DROP_MAX: Final = 0.5

# -- admission control (diagnosis.rules_disagg.AdmissionControl) -----------------------------

#: deferred waiting (admission policy) is the cause when it is this share of all waiting
DEFERRED_SHARE: Final = 0.3
#: requests deferred by policy (DEFERRED_SHARE of the waiting)
W_DEFERRED: Final = 0.5
#: requests aborted
W_ABORTED: Final = 0.3
