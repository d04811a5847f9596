"""A routing skew the capture shows, as the simulator's ``weighted`` routing (so a what-if can
replay it and try a load-aware policy instead).

A consistent hash on a hot key, sticky sessions or a ring with uneven tokens send one pod
several shares of the requests, whatever its queue: the replay with a balanced policy then
spreads the load the real fleet piled on one replica, and misses the tail it caused.

Read from each pod's request counter (``vllm:request_success_total``: full rate, whatever the
trace sampling), summed over its series per scrape interval; the traced requests' replicas
when no pod-labelled counter exists.  One change point - the split of the scrape intervals in
two that the per-pod shares fit best, each side with its own shares (a multinomial change
point) - and the skew is the later side's, kept when the busiest pod takes at least
``SKEW_MIN`` fair shares and a fair split is ruled out (G-test, ``SKEW_P``).  Counters count
requests when they finish, so the change is placed one typical request earlier (the mean
end-to-end latency before it).  On a fixed fleet only: while pods come and go, their shares
say how long each was serving, not how the gateway weighed them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from tailtriage.model import Capture
from tailtriage.remediation.calibrate.sampling import counter_series, increases

#: the counters that count each pod's requests (vLLM names; any engine's equivalent with a
#: ``pod`` label reads the same)
COUNTERS = ("vllm:request_success_total", "vllm:e2e_request_latency_seconds_count")
#: the busiest pod's share, in fair shares, from which a skew is modelled: least-request and
#: random routing over a few hundred requests per pod stay well inside it
SKEW_MIN = 1.5
#: the chance, under fair routing, of a split at least this uneven (G-test): the skew must be
#: the gateway's, not the draw's
SKEW_P = 1e-6
#: the fewest scrape intervals on either side of the change (a minute at 15 s scrapes)
MIN_BINS = 4
#: a pod whose counts start or end this many intervals inside the capture joined or left it
EDGE_BINS = 2
#: bin width for the traced requests' replicas when no counter has pods
TRACE_BIN_S = 15.0
TRACES = "traced requests' replica (arrivals)"


@dataclass(frozen=True)
class PodCounts:
    """Requests per pod per interval: ``counts[pod, bin]``, bins starting at ``starts``."""

    pods: tuple[str, ...]
    starts: np.ndarray
    width: float
    counts: np.ndarray
    source: str


def fit_routing_skew(
    capture: Capture, t0: float, before: str = "least_outstanding"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``gateway.routing: weighted`` settings for the skew the capture shows (empty when it
    shows none), and the evidence.  ``t0``: the replay's start (unix seconds);
    ``before``: the routing until the skew began."""
    pc_ = _counter_counts(capture) or _trace_counts(capture)
    if pc_ is None:
        return {}, {"note": "no per-pod request counts (counter with a pod label, or traces)"}
    part: dict[str, Any] = {"source": pc_.source, "pods": len(pc_.pods)}
    if len(pc_.pods) < 2:
        return {}, {**part, "note": "fewer than two pods"}
    if not _fixed_fleet(pc_):
        return {}, {**part, "note": "pods joined or left during the capture"}
    s = _change_point(pc_.counts)
    after = pc_.counts[:, s:].sum(axis=1)
    n = float(after.sum())
    if n <= 0:
        return {}, {**part, "note": "no requests counted"}
    shares = after / n
    k = len(pc_.pods)
    expected = n / k
    nz = after > 0
    g = float(2.0 * np.sum(after[nz] * np.log(after[nz] / expected)))
    p = float(stats.chi2.sf(g, k - 1))
    top = float(shares.max() * k)
    part.update(busiest_fair_shares=round(top, 2), g_test_p=p, counted=round(n))
    if top < SKEW_MIN or p > SKEW_P:
        return {}, {**part, "note": "the requests spread as fair routing spreads them"}
    counted_at_finish = pc_.source != TRACES
    lag = _typical_e2e(capture, float(pc_.starts[s])) if s > 0 and counted_at_finish else 0.0
    start = float(pc_.starts[s]) - lag if s > 0 else t0
    weights = tuple(round(float(x), 3) for x in sorted(shares * k, reverse=True))
    part.update(from_unix=round(start, 1), finish_lag_s=round(lag, 1), weights=list(weights))
    settings = {
        "gateway.routing": "weighted",
        "gateway.weights": weights,
        "gateway.weighted_from_s": round(max(0.0, start - t0), 1),
        "gateway.routing_before": before,
    }
    return settings, part


def _change_point(counts: np.ndarray) -> int:
    """The first bin of the later side of the split that fits best (0: no split)."""
    bins = counts.shape[1]
    total = counts.sum(axis=1)
    best, best_ll = 0, _ll(total)
    before = np.cumsum(counts, axis=1)  # linear in the bins: captures may span days
    for s in range(MIN_BINS, bins - MIN_BINS + 1):
        ll = _ll(before[:, s - 1]) + _ll(total - before[:, s - 1])
        if ll > best_ll:
            best, best_ll = s, ll
    # one more parameter set must pay for itself: the split's gain beyond chance (G-test)
    gain = 2.0 * (best_ll - _ll(counts.sum(axis=1)))
    if best and gain < float(stats.chi2.isf(SKEW_P, counts.shape[0] - 1)):
        return 0
    return best


def _ll(n: np.ndarray) -> float:
    """Multinomial log-likelihood of counts ``n`` at their own shares."""
    total = float(n.sum())
    nz = n[n > 0]
    return float(np.sum(nz * np.log(nz / total))) if total > 0 else 0.0


def _fixed_fleet(pc_: PodCounts) -> bool:
    """Every pod counted from the first intervals to the last."""
    bins = pc_.counts.shape[1]
    for row in pc_.counts:
        seen = np.flatnonzero(row > 0)
        if seen.size == 0 or seen[0] > EDGE_BINS or seen[-1] < bins - 1 - EDGE_BINS:
            return False
    return True


def _counter_counts(capture: Capture) -> PodCounts | None:
    for metric in COUNTERS:
        incs: dict[str, list[tuple[float, float]]] = {}
        gaps: list[float] = []
        for lab, pts in counter_series(capture, metric).items():
            d = json.loads(lab)
            pod = d.get("pod") if isinstance(d, dict) else None
            pts = sorted(p for p in pts if np.isfinite(p[1]))
            if not pod or not pts:
                continue
            times = np.array([t for t, _ in pts])
            gaps += [float(g) for g in np.diff(times) if g > 0]
            steps = increases(np.array([v for _, v in pts]))
            incs.setdefault(str(pod), []).extend(
                zip(times[1:].tolist(), steps.tolist(), strict=True)
            )
        if not gaps:
            continue
        width = float(np.median(gaps))
        # an increase at a scrape counts the interval before it
        return _binned(incs, width, f"{metric} per pod", shift=width)
    return None


def _trace_counts(capture: Capture) -> PodCounts | None:
    rq = capture.requests
    if rq.num_rows == 0:
        return None
    per: dict[str, list[tuple[float, float]]] = {}
    for r, a in zip(rq["replica"].to_pylist(), rq["arrival"].to_pylist(), strict=True):
        if r and a is not None and np.isfinite(a):
            per.setdefault(str(r), []).append((float(a), 1.0))
    return _binned(per, TRACE_BIN_S, TRACES) if per else None


def _binned(
    per: dict[str, list[tuple[float, float]]], width: float, source: str, shift: float = 0.0
) -> PodCounts:
    lo = min(t for pts in per.values() for t, _ in pts)
    hi = max(t for pts in per.values() for t, _ in pts)
    bins = max(1, int(np.floor((hi - lo) / width)) + 1)
    pods = tuple(sorted(per))
    counts = np.zeros((len(pods), bins))
    for j, pod in enumerate(pods):
        t = np.array([x for x, _ in per[pod]])
        v = np.array([y for _, y in per[pod]])
        np.add.at(counts[j], np.minimum(((t - lo) // width).astype(int), bins - 1), v)
    return PodCounts(pods, lo + width * np.arange(bins) - shift, width, counts, source)


def _typical_e2e(capture: Capture, before: float) -> float:
    """Mean end-to-end latency of the traced requests that arrived before ``before``."""
    rq = capture.requests
    if rq.num_rows == 0:
        return 0.0
    a = rq["arrival"].to_numpy(zero_copy_only=False).astype(float)
    f = rq["finish"].to_numpy(zero_copy_only=False).astype(float)
    ok = np.isfinite(a) & np.isfinite(f) & (a < before)
    return float(np.mean(f[ok] - a[ok])) if ok.any() else 0.0
