"""Sampled traces: the full-rate workload rebuilt from counters, the traces giving its shape.

Real stacks trace 1-20 % of requests.  Replaying only the traced requests replays a fraction
of the load, and the replay runs far too fast.  Counters are not sampled: vLLM's
``vllm:request_success_total`` (else the request histograms' ``_count``) counts every request
a pod finished, so over the window the counters cover

    sampling ratio = traced requests finished / requests counted

and the full-rate workload is rebuilt from the counter's increase per scrape: the requests it
counted finishing in a scrape interval arrived one latency earlier, the latency of a traced
request that finished about then, whose prompt and output lengths each copies (lengths,
their correlation and their latency kept), rescaled per group of scrape intervals (at
least SIZE_GROUP_COPIES copies) so that the copies add up to what the engines'
``vllm:request_prompt_tokens`` / ``_generation_tokens`` histogram sums counted finishing
then: a few traced donors carry the shape, the unsampled sums the volume (at 10 % a
minute's traces are a dozen requests, and a length shift at an incident's start is half
missed without them).  Per request, not one median latency for all: a
success counter counts completions, capped at what the stack served, so under overload the
arrivals ran ahead of it, and only the queueing latency the traces show carries them back
to when they came.  The traced requests are replayed as they came, the untraced ones drawn
around them.  What the counter never counted (failed requests, requests still running
when the capture ended) is each traced one over the ratio, at uniform times in its arrival
bin.  Without a counter scraped often enough, every bin is its traced arrivals over the
ratio.  Deterministic: one seeded generator.

The ratio also corrects what the fits read off the traced requests: a request's batch (the
other requests decoding beside it) is ``1/ratio`` times what the traces show."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow.compute as pc

from tailtriage.model import Capture
from tailtriage.remediation.calibrate.observed import per_pod_series
from tailtriage.remediation.calibrate.parts import observed_workload
from tailtriage.remediation.calibrate.steps import (
    EngineTimings,
    FloatArray,
    running_sequences,
    time_mean,
)
from tailtriage.simulator.workload import Workload

#: counters that count every finished request, in order of preference
REQUEST_COUNTERS = (
    "vllm:request_success_total",
    "vllm:e2e_request_latency_seconds_count",
    "vllm:time_to_first_token_seconds_count",
)
#: a traced share below this is sampling (above, the traces are taken as complete: counters
#: and traces disagree by a few requests at the window's edges)
SAMPLED_BELOW = 0.8
#: bins of the rebuilt arrival schedule (s): short enough to keep bursts and ramps
BIN_S = 10.0
#: traced requests whose latency (and sizes) a scrape interval's counted completions draw
#: from, at least: those finishing in the interval, else this many finishing nearest it
LATENCY_DONORS = 5
#: histogram sums adding up the prompt and output tokens of every finished request (vLLM
#: observes them when a request finishes, as the success counter counts it): unsampled sizes
SIZE_SUMS = ("vllm:request_prompt_tokens_sum", "vllm:request_generation_tokens_sum")
#: a scrape interval's copies are rescaled by at most this factor either way: their sizes
#: come from a few traced donors, the sums from every request
SIZE_FACTOR_MAX = 3.0
#: copies a size factor is computed over, at least (consecutive scrape intervals pooled): a
#: factor over a handful of copies of one or two donors is mostly their noise (the mean of
#: 40 lognormal lengths of sigma 0.7 is within ~12 %)
SIZE_GROUP_COPIES = 40


@dataclass(frozen=True)
class SamplingEstimate:
    """How many of the requests the counters saw have a trace."""

    ratio: float  # traced / counted, over the counters' window
    traced: int
    counted: float
    counter: str  # the counter that counted them
    window: tuple[float, float]  # unix seconds the counters cover
    #: (unix scrape time, requests finished since the scrape before), over every series
    per_scrape: tuple[tuple[float, float], ...] = ()
    interval_s: float = 0.0  # the counters' scrape interval (median)

    @property
    def sampled(self) -> bool:
        return self.ratio < SAMPLED_BELOW

    def as_dict(self) -> dict[str, Any]:
        return {"ratio": round(self.ratio, 4), "traced": self.traced,
                "counted": round(self.counted, 1), "counter": self.counter,
                "window": list(self.window)}  # fmt: skip


def counter_series(capture: Capture, metric: str) -> dict[str, list[tuple[float, float]]]:
    """Each series of counter ``metric`` by its labels (JSON; histogram buckets other than
    ``+Inf`` left out): its (scrape time, value) points."""
    se = capture.series
    sel = se.filter(pc.equal(se["metric"], metric)) if se.num_rows else se
    by: dict[str, list[tuple[float, float]]] = {}
    for lab, t, v in zip(
        sel["labels"].to_pylist(), sel["time"].to_pylist(), sel["value"].to_pylist(), strict=True
    ):
        try:
            d = json.loads(lab)
        except (TypeError, ValueError):
            continue
        if isinstance(d, dict) and d.get("le") not in (None, "+Inf"):
            continue
        by.setdefault(str(lab), []).append((float(t), float(v)))
    return by


def increases(values: FloatArray) -> FloatArray:
    """A counter's rise to each sample after the first; a drop is a restart from zero."""
    d = np.diff(values)
    return np.asarray(np.where(d >= 0, d, values[1:]), dtype=np.float64)


def _increase(
    capture: Capture, metric: str
) -> tuple[float, tuple[float, float], list[tuple[float, float]], float] | None:
    """Requests counted by ``metric`` summed over its series (labels other than ``le``),
    counter resets handled; a series that starts after the window opens counts from zero
    (its pod started during the capture)."""
    by = counter_series(capture, metric)
    if not by:
        return None
    start = min(p[0] for pts in by.values() for p in pts)
    end = max(p[0] for pts in by.values() for p in pts)
    interval = _interval(by)
    total = 0.0
    counted: list[tuple[float, float]] = []  # (scrape time, requests counted since the last)
    for pts in by.values():
        pts.sort()
        values = np.array([v for _, v in pts])
        counted += [(t, float(v)) for (t, _), v in zip(pts[1:], increases(values), strict=True)]
        if pts[0][0] > start + 1.5 * interval:
            counted.append((pts[0][0], float(values[0])))
    total = float(sum(v for _, v in counted))
    return total, (start, end), counted, interval


def _interval(by: dict[str, list[tuple[float, float]]]) -> float:
    gaps = [float(g) for pts in by.values() for g in np.diff(sorted(t for t, _ in pts))]
    gaps = [g for g in gaps if g > 0]
    return float(np.median(gaps)) if gaps else 0.0


def estimate_sampling(capture: Capture) -> SamplingEstimate | None:
    """The traced share of the requests, or None when no request counter was scraped."""
    rq = capture.requests
    finish = rq["finish"].to_numpy(zero_copy_only=False).astype(np.float64)
    for counter in REQUEST_COUNTERS:
        found = _increase(capture, counter)
        if found is None or found[0] <= 0:
            continue
        counted, (start, end), per_scrape, interval = found
        traced = int(((finish > start) & (finish <= end)).sum())
        ratio = min(traced / counted, 1.0)
        return SamplingEstimate(
            ratio, traced, counted, counter, (start, end), tuple(per_scrape), interval
        )
    return None


def full_rate_workload(
    traced: Workload,
    estimate: SamplingEstimate,
    t0: float,
    finish: FloatArray,
    *,
    seed: int = 0,
    sums: tuple[list[tuple[float, float]], list[tuple[float, float]]] | None = None,
) -> tuple[Workload, dict[str, Any]]:
    """The workload at the counted rate (see the module doc); ``traced`` is the observed
    workload of the traced requests (arrivals relative to ``t0``, the first), ``finish`` when
    each finished successfully (relative to ``t0``, in ``traced``'s order; NaN when it did
    not: the success counter never counted it)."""
    rng = np.random.default_rng(seed)
    arrival = traced.arrival
    span = float(arrival[-1]) if arrival.size else 0.0
    per = sorted(estimate.per_scrape)
    times = np.unique(np.array([t for t, _ in per])) - t0
    counted = np.zeros(arrival.size, dtype=bool)
    scale = (np.ones(0), np.ones(0))
    if times.size >= 3 and estimate.interval_s > 0:
        when, donors, counted, bins = _counted_arrivals(
            arrival, finish, per, times, estimate.interval_s, t0, rng
        )
        how = "completions per scrape, each at the latency of the traces finishing then"
        if sums is not None and when.size:
            scale = _size_factors(traced, finish, counted, donors, bins, times, t0, sums)
            used = [m for m, per in zip(SIZE_SUMS, sums, strict=True) if per]
            if used:
                how += "; sizes scaled to " + ", ".join(used)
    else:
        when, donors = np.zeros(0), np.zeros(0, dtype=np.int64)
        how = "traced arrivals over the ratio"
    # what no counter counted (failed, still running, outside the counters' window): each
    # traced one stands for 1/ratio requests, drawn around its arrival
    more_t, more_i = _uncounted(traced, ~counted, estimate.ratio, span, rng)
    # the traced requests themselves, as they came: the untraced ones are drawn around them
    t = np.concatenate([arrival, when, more_t])
    idx = np.concatenate([np.arange(arrival.size), donors, more_i]).astype(np.int64)
    sizes = []
    for col, f in zip((traced.prompt_tokens, traced.output_tokens), scale, strict=True):
        own = np.ones(arrival.size + when.size + more_t.size)
        if f.size:
            own[arrival.size : arrival.size + when.size] = f
        sizes.append(np.maximum(np.rint(col[idx] * own), 1).astype(col.dtype))
    keep = (t >= 0.0) & (t <= span)  # arrivals outside the traced span are not replayed
    t, idx = t[keep], idx[keep]
    order = np.argsort(t, kind="stable")
    t, idx = t[order], idx[order]
    prompt, output = (x[keep][order] for x in sizes)
    rebuilt = Workload(
        t,
        prompt,
        output,
        traced.prefix_group[idx],
        traced.prefix_tokens[idx],
        traced.phase[idx],
    )
    part = {**estimate.as_dict(), "rebuilt_requests": int(t.size), "arrivals": how}
    return rebuilt, part


def _counted_arrivals(
    arrival: FloatArray,
    finish: FloatArray,
    per: list[tuple[float, float]],
    times: FloatArray,
    interval: float,
    t0: float,
    rng: np.random.Generator,
) -> tuple[FloatArray, Any, Any, Any]:
    """The untraced requests the success counter counted (its count less the traced ones
    finishing in the interval), each finishing in its scrape interval and arriving one
    latency earlier - the latency of a traced request that finished about then
    (whose sizes it takes).  A completion counter caps at what the stack served: under
    overload the arrivals ran ahead of it, and the latency the traces show then (a queue
    growing) carries them back to when they arrived.  Returns (arrival times, the traced
    request each copies, which traced requests the counter covered, the scrape interval each
    copy finished in)."""
    counts = _per_interval(per, times, t0)
    lo, hi = times[0] - interval, times[-1]
    done = np.isfinite(finish)
    counted = done & (finish > lo) & (finish <= hi)
    pool = np.flatnonzero(counted)
    if pool.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64), counted, np.zeros(0, dtype=np.int64)
    pool = pool[np.argsort(finish[pool], kind="stable")]
    ends = finish[pool]
    carry = 0.0
    when: list[FloatArray] = []
    donors: list[Any] = []
    bins: list[Any] = []
    for b in range(times.size):
        start = times[b] - interval
        # the traced ones finishing in the interval are replayed as themselves (a negative
        # rest: some were counted in a neighbouring scrape, carried over)
        traced = np.searchsorted(ends, times[b], side="right") - np.searchsorted(
            ends, start, side="right"
        )
        want = counts[b] - traced + carry
        n = max(int(want), 0)
        carry = want - n
        if n == 0:
            continue
        near = _nearest(ends, start, times[b], LATENCY_DONORS)
        picked = pool[rng.choice(near, n)]
        done_at = rng.uniform(start, times[b], n)
        when.append(done_at - (finish[picked] - arrival[picked]))
        donors.append(picked)
        bins.append(np.full(n, b))
    if not when:
        return np.zeros(0), np.zeros(0, dtype=np.int64), counted, np.zeros(0, dtype=np.int64)
    return np.concatenate(when), np.concatenate(donors), counted, np.concatenate(bins)


def _per_interval(per: list[tuple[float, float]], times: FloatArray, t0: float) -> FloatArray:
    """(unix scrape time, increase) points summed into the scrape intervals ending at
    ``times`` (relative to ``t0``)."""
    out = np.zeros(times.size)
    k = np.searchsorted(times, np.array([t for t, _ in per]) - t0)
    np.add.at(out, np.clip(k, 0, times.size - 1), np.array([v for _, v in per]))
    return out


def _size_factors(
    traced: Workload,
    finish: FloatArray,
    counted: Any,
    donors: Any,
    bins: Any,
    times: FloatArray,
    t0: float,
    sums: tuple[list[tuple[float, float]], list[tuple[float, float]]],
) -> tuple[FloatArray, FloatArray]:
    """Per copy, the factor on its prompt and output lengths that makes the copies of its
    group of scrape intervals (:func:`_groups`) add up to what the engines' token sums
    counted finishing then, less the traced requests finishing then.  The donors are a few traced requests finishing
    about then; at a 10 % sample a minute's traces are a dozen requests, and a length shift
    at the incident's start is half missed.  1 where a sum is not scraped or says nothing."""
    out = []
    done = np.flatnonzero(counted)
    tb = np.clip(np.searchsorted(times, finish[done]), 0, times.size - 1)
    for col, per in zip((traced.prompt_tokens, traced.output_tokens), sums, strict=True):
        if not per:
            out.append(np.ones(donors.size))
            continue
        total = _per_interval(per, times, t0)
        own = np.zeros(times.size)
        np.add.at(own, tb, col[done].astype(np.float64))
        copies = np.zeros(times.size)
        np.add.at(copies, bins, col[donors].astype(np.float64))
        group = _groups(np.bincount(bins, minlength=times.size))
        rest = np.bincount(group, total - own)
        ours = np.bincount(group, copies)
        f = np.where((ours > 0) & (rest > 0), rest / np.maximum(ours, 1e-9), 1.0)
        out.append(np.clip(f, 1.0 / SIZE_FACTOR_MAX, SIZE_FACTOR_MAX)[group[bins]])
    return out[0], out[1]


def _groups(copies: Any) -> Any:
    """Consecutive scrape intervals grouped until each group holds SIZE_GROUP_COPIES copies
    (the last group takes what is left): the group index of each interval."""
    group = np.zeros(copies.size, dtype=np.int64)
    g, held = 0, 0
    for i, n in enumerate(copies):
        group[i] = g
        held += int(n)
        if held >= SIZE_GROUP_COPIES:
            g, held = g + 1, 0
    if held and g:  # a short tail joins the group before it
        group[group == g] = g - 1
    return group


def _nearest(ends: FloatArray, start: float, stop: float, k: int) -> Any:
    """Indices (into sorted ``ends``) of the requests finishing in [start, stop), at least the
    ``k`` finishing nearest its middle."""
    a, b = np.searchsorted(ends, start), np.searchsorted(ends, stop)
    if b - a >= k:
        return np.arange(a, b)
    mid = 0.5 * (start + stop)
    return np.argsort(np.abs(ends - mid), kind="stable")[: min(k, ends.size)]


def _uncounted(
    traced: Workload, which: Any, ratio: float, span: float, rng: np.random.Generator
) -> tuple[FloatArray, Any]:
    """The untraced requests beside the traced ones ``which``: each traced one stands for
    1/ratio requests (itself and 1/ratio - 1 drawn here) arriving uniformly over its share of the time (half-way to the neighbouring
    ones), sizes drawn from the LATENCY_DONORS of them arriving nearest (kept whole).  Their
    own arrival times, not a bin's: at the capture's end they are the requests still running,
    which arrived late in any bin."""
    pool = np.flatnonzero(which)
    if pool.size == 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    pool = pool[np.argsort(traced.arrival[pool], kind="stable")]
    at = traced.arrival[pool]
    mids = 0.5 * (at[1:] + at[:-1])
    first = at[0] - (mids[0] - at[0] if mids.size else BIN_S / 2)
    last = at[-1] + (at[-1] - mids[-1] if mids.size else BIN_S / 2)
    lo = np.concatenate([[max(first, 0.0)], mids])
    hi = np.concatenate([mids, [min(last, span)]])
    want = np.full(pool.size, 1.0 / max(ratio, 1e-6) - 1.0)  # beside the traced one itself
    n = np.diff(np.floor(np.concatenate([[0.0], np.cumsum(want)]))).astype(np.int64)
    owner = np.repeat(np.arange(pool.size), n)
    times = rng.uniform(lo[owner], np.maximum(hi[owner], lo[owner]))
    shift = rng.integers(-(LATENCY_DONORS // 2), LATENCY_DONORS // 2 + 1, owner.size)
    donors = pool[np.clip(owner + shift, 0, pool.size - 1)]
    return times, donors


def with_engine_batch(timings: EngineTimings, capture: Capture, ratio: float) -> EngineTimings:
    """``timings`` marked as a ``ratio`` sample, with each replica's running-sequences gauge
    (the batch the sampled traces under-count) when it was scraped."""
    gauges = per_pod_series(capture, "vllm:num_requests_running")
    counters = per_pod_series(capture, "vllm:prompt_tokens_total")
    running, prompts = [], []
    for name in timings.replicas:
        times, values = gauges.get(name, (np.zeros(0), np.zeros(0)))
        running.append(
            (np.asarray(times, dtype=np.float64) - timings.t0, np.asarray(values, dtype=np.float64))
        )
        times, values = counters.get(name, (np.zeros(0), np.zeros(0)))
        rises = np.diff(
            np.asarray(values, dtype=np.float64), prepend=float(values[0]) if len(values) else 0.0
        )
        # a counter reset (pod restart) counts from zero again: the drop is not work done
        done = np.cumsum(np.where(rises < 0.0, 0.0, rises))
        prompts.append((np.asarray(times, dtype=np.float64) - timings.t0, done))
    return replace(timings, sampled=ratio, running=tuple(running), prompt_tokens=tuple(prompts))


def traced_batch_share(timings: EngineTimings, capture: Capture) -> float | None:
    """The traced share of the engine's batch when no counter gives one: over every traced
    decode, the sequences the traces show running beside it against the engine's own
    ``vllm:num_requests_running`` gauge (time-averaged over the decode; the median over
    decodes).  None without a gauge for the traced replicas.  Below ``SAMPLED_BELOW`` the
    traces miss requests the engine ran (a capture cut to some requests, untraced requests
    the counters did not reveal): the fit must read the batch from the gauge."""
    gauged = with_engine_batch(timings, capture, 1.0)
    shares: list[FloatArray] = []
    for r, (times, values) in enumerate(gauged.running):
        on = (timings.replica == r) & (timings.output >= 2) & (timings.finish > timings.first_token)
        if times.size < 2 or not on.any():
            continue
        traced = running_sequences(timings, r)
        x, y = timings.first_token[on], timings.finish[on]
        engine = time_mean((times, values), x, y)
        ok = engine >= 1.0
        shares.append(traced.integral(x[ok], y[ok]) / (y[ok] - x[ok]) / engine[ok])
    if not shares:
        return None
    share = np.concatenate(shares)
    return float(np.median(share)) if share.size else None


def incident_workload(capture: Capture, *, seed: int = 0) -> tuple[Workload, float, dict[str, Any]]:
    """The capture's arrival schedule at its full rate: the traced requests as they arrived,
    or, when traces were sampled, the workload rebuilt at the counted rate (module doc).
    Returns (workload, unix time of its zero, what was done)."""
    workload, t0 = observed_workload(capture)
    est = estimate_sampling(capture)
    if est is None or not est.sampled:
        note = "no request counter scraped" if est is None else "traces complete"
        return workload, t0, {"rebuilt": False, "note": note, **(est.as_dict() if est else {})}
    rq = capture.requests.sort_by("arrival")  # observed_workload's order
    finish = rq["finish"].to_numpy(zero_copy_only=False).astype(np.float64) - t0
    ok = np.asarray(rq["status"].to_pylist(), dtype=object) == "ok"
    found = [_increase(capture, m) for m in SIZE_SUMS]
    sums = (found[0][2] if found[0] else [], found[1][2] if found[1] else [])
    rebuilt, part = full_rate_workload(
        workload, est, t0, np.where(ok, finish, np.nan), seed=seed, sums=sums
    )
    return rebuilt, t0, {"rebuilt": True, **part}
