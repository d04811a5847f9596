"""Facts several rules test, each written once: the engine queue grew, completions fell
behind arrivals, replicas were asked for and not ready.  Their thresholds are in
``diagnosis.thresholds``."""

from __future__ import annotations

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.signals import GaugeStats, Signals, WindowSignals


def queue_grew(q: GaugeStats | None, min_mean: float) -> bool:
    """The queue rose over the window, or stood at ``min_mean`` requests or more on average."""
    return q is not None and (q.slope > 0 or q.mean >= min_mean)


def completions_lag(w: WindowSignals) -> bool:
    """Fewer requests completed than arrived (by more than the noise of a window's edges)."""
    return w.completion_rps < T.COMPLETION_LAG_RATIO * w.arrival_rps


def desired_gap(sig: Signals) -> float | None:
    """Desired minus current replicas, averaged over the incident (None without both)."""
    d, c = sig.incident.gauge("hpa_desired"), sig.incident.gauge("hpa_current")
    if d is None or c is None:
        return None
    return d.mean - c.mean


def replicas_short(sig: Signals) -> bool:
    """The autoscaler asked for more replicas than were ready, on average over the incident."""
    return (desired_gap(sig) or 0.0) >= T.DESIRED_GAP_MIN


def _tokens_per_request(w: WindowSignals) -> float | None:
    if not w.prompt_tokens_mean:
        return None
    return w.prompt_tokens_mean + (w.output_tokens_mean or 0.0)


def demand_per_request_grew(sig: Signals) -> bool | None:
    """Each request asks for more tokens (prompt + output) than in the baseline: heavier
    requests, not more of them.  None without a baseline with token counts."""
    base = sig.baseline
    if base is None:
        return None
    inc_t, base_t = _tokens_per_request(sig.incident), _tokens_per_request(base)
    if inc_t is None or base_t is None or base_t <= 0:
        return None
    return inc_t >= T.PROMPT_SHIFT * base_t


def load_per_replica_grew(sig: Signals) -> bool | None:
    """Arrivals per serving replica (``serving_replicas``) grew against the baseline by
    ``LOAD_PER_REPLICA_GREW``: the fleet got more requests than it had replicas for (load
    outgrew capacity, or capacity fell).  None without a baseline or per-replica counts."""
    base = sig.baseline
    if base is None or not base.replicas or not sig.incident.replicas or base.arrival_rps <= 0:
        return None
    inc_l = sig.incident.arrival_rps / serving_replicas(sig.incident)
    base_l = base.arrival_rps / serving_replicas(base)
    return inc_l >= T.LOAD_PER_REPLICA_GREW * base_l


def arrivals_per_replica_grew(sig: Signals) -> bool | None:
    """:func:`load_per_replica_grew`, else (no per-replica counts) :func:`load_grew`."""
    per_replica = load_per_replica_grew(sig)
    return load_grew(sig) if per_replica is None else per_replica


def outputs_grew(sig: Signals) -> bool | None:
    """Requests generate ``OUTPUT_SHIFT`` times the baseline's tokens while their prompts did
    not grow by ``PROMPT_SHIFT``: each holds its cache blocks through a longer decode, and
    nothing on the path to the first token got heavier.  None without both token means."""
    base, inc = sig.baseline, sig.incident
    if base is None or not inc.output_tokens_mean or not base.output_tokens_mean:
        return None
    if not inc.prompt_tokens_mean or not base.prompt_tokens_mean:
        return None
    longer = inc.output_tokens_mean >= T.OUTPUT_SHIFT * base.output_tokens_mean
    return longer and inc.prompt_tokens_mean < T.PROMPT_SHIFT * base.prompt_tokens_mean


def load_grew(sig: Signals) -> bool | None:
    """The fleet's arrivals grew against the baseline by ``LOAD_PER_REPLICA_GREW``: without
    per-replica request counts (a capture without request spans, whose arrivals are the
    engines' histogram counts) this stands in for :func:`load_per_replica_grew` - replicas
    added during the incident only ever lower the load per replica, so a fleet that got this
    much more traffic and ended full was short of replicas, not of cache per request.  None
    without a baseline rate."""
    base = sig.baseline
    if base is None or base.arrival_rps <= 0:
        return None
    return sig.incident.arrival_rps >= T.LOAD_PER_REPLICA_GREW * base.arrival_rps


def incident_requests(sig: Signals) -> float:
    """Requests in the incident at the full rate: the engines' finished-request counter where
    exported (sampled traces count only the sampled ones), else the traced arrivals; the
    larger where both are (a counter reset reads low)."""
    traced = sig.incident.arrival_rps * sig.incident.seconds
    return max(sig.incident.counters.get("requests_done") or 0.0, traced)


def preempting(sig: Signals) -> bool:
    """Running sequences were evicted for cache blocks often enough to hold admission back:
    at least ``PREEMPTION_SHARE_MIN`` of the incident's requests (``incident_requests``: at
    the full rate, not the sampled traces') and at least one eviction per replica exporting
    KV usage.
    A handful of evictions across a fleet is one long sequence meeting a momentarily full
    cache on one replica, which any busy engine shows."""
    pre = sig.incident.counters.get("preemptions") or 0.0
    if pre <= 0:
        return False
    kv = sig.incident.gauge("kv_usage")
    replicas = len(kv.per_replica_samples) if kv is not None else 0
    return pre >= T.PREEMPTION_SHARE_MIN * incident_requests(sig) and pre >= replicas


def serving_replicas(w: WindowSignals) -> float:
    """Replicas that took traffic, each counted for the share of the window it did (first to
    last request served): a pod that joined, or was drained by a rollout, halfway counts half."""
    served = sum(
        max(min(r.last, w.end) - max(r.first, w.start), 0.0)
        for r in w.replicas.values()
        if r.first is not None and r.last is not None
    )
    return max(served / w.seconds, 1.0) if served > 0 else float(max(len(w.replicas), 1))


def prompt_mix_shift(sig: Signals) -> float | None:
    """The typical (median) prompt against the baseline's: near 1 when only a minority of long
    prompts joined, the mean's multiple when the whole mix got longer.  None without both."""
    base = sig.baseline
    inc_m = sig.incident.prompt_tokens_median
    if base is None or not inc_m or not base.prompt_tokens_median:
        return None
    return inc_m / base.prompt_tokens_median


def prompts_overload(sig: Signals) -> bool:
    """The whole prompt mix (its median, not a long minority) grew by
    ``PROMPT_OVERLOAD_SHIFT`` while arrivals per replica (the fleet's arrivals without
    per-replica counts) did not grow: the same traffic asks for that much more prefill, and
    the engine's queue is the prompts' doing, not the fleet's size."""
    mix = prompt_mix_shift(sig)
    if mix is None or mix < T.PROMPT_OVERLOAD_SHIFT:
        return False
    return arrivals_per_replica_grew(sig) is False


def long_prompt_minority(sig: Signals) -> bool | None:
    """A minority of long prompts joined: the mean prompt grew by ``PROMPT_SHIFT`` while the
    typical (median) one did not.  Seen from prompt lengths alone, so it holds where sampled
    traces rarely catch a long prefill overlapping another request's decode."""
    base = sig.baseline
    mix = prompt_mix_shift(sig)
    if base is None or mix is None or not base.prompt_tokens_mean:
        return None
    mean_shift = (sig.incident.prompt_tokens_mean or 0.0) / base.prompt_tokens_mean
    return mean_shift >= T.PROMPT_SHIFT and mix < T.PROMPT_SHIFT
