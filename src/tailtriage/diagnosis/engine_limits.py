"""Which engine resource runs out, when several look stretched at once.

Long outputs, RAG-length prompts and reasoning models fill the KV cache and lengthen steps next
to a genuine compute limit, so the first signal over a threshold is not the cause.  Each
engine cause has a *discriminating* pattern that the others do not produce:

=====================  ==================================================================
cause                  discriminating pattern
=====================  ==================================================================
kv_cache_pressure      preemptions and KV usage near 1, requests waiting, compute idle
                       (the scheduler cannot admit, so SMs have room); without evictions,
                       a full cache with requests waiting and the batch below its cap
                       (long prompts: admission held back for blocks, SMs busy prefilling)
compute_saturation     running batch pinned at its cap with SM / tensor activity high
prefill_compute        prompts grew against the baseline and TTFT follows prompt length
decode_memory_bound    HBM busy, running batch grew, little long-prompt prefill in between
=====================  ==================================================================

Functions here only read the signals (and one correlation in SQL); the rules weigh them."""

from __future__ import annotations

from dataclasses import dataclass

from tailtriage.diagnosis import facts as F
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.signals import Signals


def batch_at_cap(sig: Signals) -> bool:
    """Each replica's running batch sits at its own maximum most of the window (the engine
    admits no more: ``max_num_seqs`` or the token budget), and that maximum is not lower than
    the baseline's."""
    g = sig.incident.gauge("running")
    if g is None or not g.per_replica_max:
        return False
    pinned = [
        g.per_replica_mean[k] >= T.BATCH_PINNED_FRACTION * m
        for k, m in g.per_replica_max.items()
        if m > 0 and k in g.per_replica_mean
    ]
    return bool(pinned) and sum(pinned) >= T.PINNED_REPLICA_SHARE * len(pinned)


def compute_busy(sig: Signals) -> bool:
    busy = sig.incident.gauge("gpu_busy")
    tensor = sig.incident.gauge("gpu_tensor")
    return (busy is not None and busy.mean >= T.GPU_BUSY) or (
        tensor is not None and tensor.mean >= T.TENSOR_BUSY
    )


def compute_idle(sig: Signals) -> bool:
    busy = sig.incident.gauge("gpu_busy")
    return busy is not None and busy.mean < T.GPU_IDLE


def kv_bound(sig: Signals) -> bool:
    """The discriminating KV pattern: full cache *and* evictions *and* waiting requests, while
    the compute has room (or at least the batch is not pinned at its cap)."""
    kv = sig.incident.gauge("kv_usage")
    q = sig.incident.gauge("queue_waiting")
    return (
        kv is not None
        and kv.max >= T.KV_FULL
        and F.preempting(sig)
        and (q is None or q.mean >= T.WAITING_MIN)
        and (compute_idle(sig) or not batch_at_cap(sig))
    )


def kv_limits_admission(sig: Signals) -> bool:
    """The cache may be what holds admission back, evictions or not: full at its peak while
    requests waited and the running batch stayed below its cap, and more than half full on
    average - or at KV_HIGH where requests waited (the fleet's mean is diluted by replicas
    that never queued: new ones, the quiet side of a random split).  A long-prompt engine that is
    out of blocks refuses new requests without evicting running ones (vLLM V1 admits a
    request only when its prompt's blocks fit), so :func:`kv_bound`'s preemptions need not
    show; busy SMs do not settle it either (long prefills keep them busy)."""
    kv = sig.incident.gauge("kv_usage")
    q = sig.incident.gauge("queue_waiting")
    met = sig.incident.kv_when_waiting
    return (
        kv is not None
        and kv.max >= T.KV_FULL
        and (kv.mean >= T.KV_HIGH_MEAN_ADMISSION or (met is not None and met >= T.KV_HIGH))
        and q is not None
        and q.mean >= T.WAITING_MIN
        and not batch_at_cap(sig)
    )


@dataclass(frozen=True)
class KvLimit:
    """Which KV pattern holds: what the KV rule shows as evidence, what the saturation proof
    says, and whether evictions prove it (:func:`kv_bound`) or it rests on admission alone
    (:func:`kv_limits_admission`)."""

    signal: str
    detail: str
    reason: str
    evicting: bool


_KV_BOUND = KvLimit(
    "engine.kv_bound",
    "cache full and preempting while requests wait and compute has room: the scheduler "
    "cannot admit for lack of KV blocks",
    "the KV cache is full and preempting (memory, not compute, is the limit)",
    evicting=True,
)
_KV_ADMISSION = KvLimit(
    "engine.kv_limits_admission",
    "cache full while requests waited and the running batch stayed below its cap: the "
    "scheduler admits a request only when its prompt's blocks fit",
    "the KV cache filled while requests waited and the running batch stayed below its cap "
    "(memory may be what holds admission back, not compute)",
    evicting=False,
)


def kv_limit(sig: Signals) -> KvLimit | None:
    """The KV pattern that holds, the evicting one first; None when neither does."""
    if kv_bound(sig):
        return _KV_BOUND
    if kv_limits_admission(sig):
        return _KV_ADMISSION
    return None


def compute_bound(sig: Signals) -> bool:
    """The discriminating compute pattern: batch pinned at its cap with SMs / tensor cores busy."""
    return batch_at_cap(sig) and compute_busy(sig)


_CORR_SQL = """
SELECT corr(CAST(prompt_tokens AS DOUBLE), ttft) AS r, count(*) AS n FROM requests
WHERE arrival >= ? AND arrival < ? AND prompt_tokens IS NOT NULL AND ttft IS NOT NULL
"""


def prompt_ttft_correlation(ctx: DiagnosisContext) -> float | None:
    """Pearson correlation of prompt length and TTFT over the incident's requests: near 1 when
    prefill compute sets the first token's time, near 0 when waiting does."""
    if ctx.store is None:
        return None
    lo, hi = ctx.windows.incident
    row = ctx.store.query(_CORR_SQL, [lo, hi]).to_pylist()[0]
    if row["r"] is None or int(row["n"] or 0) < T.MIN_CORRELATION_REQUESTS:
        return None
    r = float(row["r"])
    return r if r == r else None  # NaN when prompts or TTFTs are constant
