"""Sampled traces: the full-rate workload rebuilt from counters, the traces giving its shape.

Real stacks trace 1-20 % of requests.  Replaying only the traced requests replays a fraction
of the load, and the replay runs far too fast.  Counters are not sampled: vLLM's
``vllm:request_success_total`` (else the request histograms' ``_count``) counts every request
a pod finished, so over the window the counters cover

    sampling ratio = traced requests finished / requests counted

and the full-rate workload is rebuilt per time bin: as many requests as the counters say (the
traced count over the ratio, per bin, so the rate's shape over time is kept), arriving at
uniformly drawn times inside the bin (a Poisson process given its count), with prompt and
output lengths drawn from the traced requests of the same bin (lengths and their correlation
kept).  Deterministic: one seeded generator.

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
#: traced requests a bin needs to draw lengths from its own traces (else the whole capture's)
BIN_MIN_TRACES = 5


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

    @property
    def sampled(self) -> bool:
        return self.ratio < SAMPLED_BELOW

    def as_dict(self) -> dict[str, Any]:
        return {"ratio": round(self.ratio, 4), "traced": self.traced,
                "counted": round(self.counted, 1), "counter": self.counter,
                "window": list(self.window)}  # fmt: skip


def _increase(
    capture: Capture, metric: str
) -> tuple[float, tuple[float, float], list[tuple[float, float]]] | None:
    """Requests counted by ``metric`` summed over its series (labels other than ``le``),
    counter resets handled; a series that starts after the window opens counts from zero
    (its pod started during the capture)."""
    se = capture.series
    sel = se.filter(pc.equal(se["metric"], metric)) if se.num_rows else se
    if sel.num_rows == 0:
        return None
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
        # a drop is a restart: the counter began again from zero
        steps = np.where(np.diff(values) >= 0, np.diff(values), values[1:])
        counted += [(t, float(v)) for (t, _), v in zip(pts[1:], steps, strict=True)]
        if pts[0][0] > start + 1.5 * interval:
            counted.append((pts[0][0], float(values[0])))
    total = float(sum(v for _, v in counted))
    return total, (start, end), counted


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
        counted, (start, end), per_scrape = found
        traced = int(((finish > start) & (finish <= end)).sum())
        ratio = min(traced / counted, 1.0)
        return SamplingEstimate(ratio, traced, counted, counter, (start, end), tuple(per_scrape))
    return None


def full_rate_workload(
    traced: Workload, estimate: SamplingEstimate, t0: float, latency_s: float, *, seed: int = 0
) -> tuple[Workload, dict[str, Any]]:
    """The workload at the counted rate (see the module doc); ``traced`` is the observed
    workload of the traced requests (arrivals relative to ``t0``, the first), ``latency_s``
    their median end-to-end latency (a request is counted when it finishes)."""
    rng = np.random.default_rng(seed)
    arrival = traced.arrival
    span = float(arrival[-1]) if arrival.size else 0.0
    edges, counts = _bins(traced, estimate, t0, span, latency_s)
    which = np.clip(np.searchsorted(edges, arrival, side="right") - 1, 0, edges.size - 2)
    carry = 0.0  # fractional requests carried between bins: the total stays exact
    times: list[np.ndarray] = []
    picks: list[np.ndarray] = []
    for b in range(edges.size - 1):
        want = counts[b] + carry
        n = int(want)
        carry = want - n
        if n == 0:
            continue
        members = np.flatnonzero(which == b)
        pool = members if members.size >= BIN_MIN_TRACES else np.arange(arrival.size)
        times.append(rng.uniform(edges[b], edges[b + 1], n))
        picks.append(rng.choice(pool, n))
    t = np.concatenate(times) if times else np.zeros(0)
    idx = np.concatenate(picks).astype(np.int64) if picks else np.zeros(0, dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t, idx = t[order], idx[order]
    rebuilt = Workload(
        t,
        traced.prompt_tokens[idx],
        traced.output_tokens[idx],
        traced.prefix_group[idx],
        traced.prefix_tokens[idx],
        traced.phase[idx],
    )
    part = {**estimate.as_dict(), "rebuilt_requests": int(t.size), "bins": int(edges.size - 1)}
    return rebuilt, part


def _bins(
    traced: Workload, estimate: SamplingEstimate, t0: float, span: float, latency_s: float
) -> tuple[Any, Any]:
    """(bin edges relative to ``t0``, requests that arrived in each bin).

    From the counter's increase per scrape when it was scraped often enough: the requests it
    counted finishing in a scrape interval arrived about one median latency earlier.  Else the
    traced arrivals per BIN_S over the ratio (unbiased, but noisy at a low ratio: a handful of
    traces per bin is a rate that swings by tens of percent, and a stack near saturation
    queues on every swing)."""
    per = sorted(estimate.per_scrape)
    times = np.unique(np.array([t for t, _ in per]))
    if times.size >= 3:
        interval = float(np.median(np.diff(times)))
        ends = times - t0 - latency_s
        edges = np.concatenate([[ends[0] - interval], ends])
        counts = np.zeros(ends.size)
        k = np.searchsorted(times, np.array([t for t, _ in per]))
        np.add.at(counts, k, np.array([v for _, v in per]))
        keep = edges[1:] > 0.0  # arrivals before the first traced one are not replayed
        edges = np.concatenate([[max(edges[:-1][keep][0], 0.0)], edges[1:][keep]])
        return edges, counts[keep]
    edges = np.arange(0.0, span + BIN_S, BIN_S)
    if edges.size < 2:
        edges = np.array([0.0, max(span, 1e-3)])
    which = np.clip(np.searchsorted(edges, traced.arrival, side="right") - 1, 0, edges.size - 2)
    counts = np.bincount(which, minlength=edges.size - 1) / max(estimate.ratio, 1e-6)
    return edges, counts


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
    e2e = capture.requests["e2e"].to_numpy(zero_copy_only=False).astype(np.float64)
    latency = float(np.nanmedian(e2e)) if np.isfinite(e2e).any() else 0.0
    rebuilt, part = full_rate_workload(workload, est, t0, latency, seed=seed)
    return rebuilt, t0, {"rebuilt": True, **part}
