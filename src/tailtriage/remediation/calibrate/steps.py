"""The engine step-time fit: per-request decode durations and the batch each request shared.

A request's decode takes ``output_tokens - 1`` engine steps, so its TPOT is the mean step time
over its decode; the batch it shared those steps with is known from the other requests on the
same replica (time-averaged decode sequences, context tokens and prefill tokens per step).
Non-negative least squares on those gives the fitted step-time model's coefficients."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy.optimize import nnls

from tailtriage.errors import InsufficientDataError
from tailtriage.model import Capture
from tailtriage.simulator.steptime import FittedStepTime, RooflineStepTime

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: timestamps closer than this are one engine step's (steps last milliseconds)
STEP_TOLERANCE = 1e-4
#: traced sequences (time-averaged) beside a request for their mean context to stand for the
#: untraced ones the engine's gauge counts; fewer: the capture's mean context stands in
MIN_TRACED_NEIGHBOURS = 1.0


# -- per-request engine timings ------------------------------------------------------------
@dataclass(frozen=True)
class EngineTimings:
    """Engine-side timestamps of successful requests (seconds, relative to ``t0``)."""

    t0: float
    replica: IntArray  # replica index (requests on one replica share its batches)
    arrival: FloatArray
    queued: FloatArray  # entered the engine's queue
    scheduled: FloatArray  # first scheduled (prefill starts)
    first_token: FloatArray
    finish: FloatArray  # last token
    prompt: FloatArray
    output: FloatArray
    replicas: tuple[str, ...] = ()
    #: share of the replica's requests these timings hold (traces sampled: below 1); the
    #: batch a request shared is the others it shows over this share
    sampled: float = 1.0
    #: per replica (index as in ``replica``): (times relative to t0, running sequences) of
    #: ``vllm:num_requests_running`` - the batch sampled traces cannot show; empty: none
    running: tuple[tuple[FloatArray, FloatArray], ...] = ()
    #: per replica: (times relative to t0, prompt tokens computed since the first sample) of
    #: ``vllm:prompt_tokens_total`` (resets removed) - the prefill work untraced requests
    #: added to each step; empty: none
    prompt_tokens: tuple[tuple[FloatArray, FloatArray], ...] = ()

    @property
    def n(self) -> int:
        return int(self.arrival.size)


_TIMINGS_SQL = """
WITH st AS (
    SELECT request_id,
           min(start) FILTER (WHERE stage = 'engine_queue') AS queue_start,
           sum(duration) FILTER (WHERE stage = 'engine_queue') AS queue_s,
           min(start) FILTER (WHERE stage = 'prefill') AS prefill_start,
           sum(duration) FILTER (WHERE stage = 'prefill') AS prefill_s,
           sum(duration) FILTER (WHERE stage = 'decode') AS decode_s
    FROM stages GROUP BY request_id
)
SELECT coalesce(r.replica, '') AS replica, r.arrival,
       coalesce(st.queue_start, st.prefill_start) AS queued,
       st.prefill_start AS scheduled,
       st.prefill_start + st.prefill_s AS first_token,
       st.prefill_start + st.prefill_s + coalesce(st.decode_s, 0) AS finish,
       r.prompt_tokens AS prompt, r.output_tokens AS output
FROM requests r JOIN st USING (request_id)
WHERE r.status = 'ok' AND st.prefill_start IS NOT NULL AND r.prompt_tokens IS NOT NULL
  AND r.output_tokens IS NOT NULL
ORDER BY r.arrival
"""


def engine_timings(capture: Capture) -> EngineTimings:
    """Per-request engine timestamps from the capture's ``prefill``/``decode`` stages."""
    con = duckdb.connect(":memory:")
    try:
        con.register("requests", capture.requests)
        con.register("stages", capture.stages)
        tab: pa.Table = con.sql(_TIMINGS_SQL).to_arrow_table()
    finally:
        con.close()
    if tab.num_rows == 0:
        raise InsufficientDataError(
            "no request with engine timings (prefill/decode stages and token counts) to "
            "calibrate the engine from"
        )
    names, codes = np.unique(
        np.asarray(tab["replica"].to_pylist(), dtype=object), return_inverse=True
    )
    col = {
        c: tab[c].to_numpy(zero_copy_only=False).astype(np.float64) for c in tab.column_names[1:]
    }
    t0 = float(col["arrival"].min())
    return EngineTimings(
        t0=t0,
        replica=codes.astype(np.int64),
        arrival=col["arrival"] - t0,
        queued=col["queued"] - t0,
        scheduled=col["scheduled"] - t0,
        first_token=col["first_token"] - t0,
        finish=col["finish"] - t0,
        prompt=col["prompt"],
        output=col["output"],
        replicas=tuple(str(x) for x in names),
    )


# -- time integrals of piecewise functions -------------------------------------------------
class _Piecewise:
    """Sum of ``w_j * 1[a_j <= t < b_j] * (c_j + t)**0`` or ``* t`` terms, integrated exactly.

    ``integral(x, y)`` gives the integral over [x, y] of ``sum_j 1[a_j <= t < b_j] * w_j`` (and
    of ``... * w_j * t`` for the linear part).  Built once per replica, queried vectorised."""

    def __init__(self, a: FloatArray, b: FloatArray, w: FloatArray, linear: bool = False) -> None:
        times = np.concatenate([a, b])
        deltas = np.concatenate([w, -w])
        order = np.argsort(times, kind="stable")
        self.t = times[order]
        level = np.cumsum(deltas[order])  # value on [t_k, t_{k+1})
        self.level = level
        self.linear = linear
        seg = np.diff(self.t)
        if linear:
            piece = level[:-1] * (self.t[1:] ** 2 - self.t[:-1] ** 2) / 2.0
        else:
            piece = level[:-1] * seg
        self.cum = np.concatenate([[0.0], np.cumsum(piece)])

    def _at(self, x: FloatArray) -> FloatArray:
        k = np.clip(np.searchsorted(self.t, x, side="right") - 1, 0, len(self.t) - 1)
        before = x < self.t[0]
        lv = np.where(before, 0.0, self.level[k])
        tk = self.t[k]
        part = lv * (x**2 - tk**2) / 2.0 if self.linear else lv * (x - tk)
        return np.where(before, 0.0, self.cum[k] + part)

    def integral(self, x: FloatArray, y: FloatArray) -> FloatArray:
        return self._at(y) - self._at(x)

    def value(self, x: FloatArray) -> FloatArray:
        """The function at ``x`` (intervals are closed at their start, open at their end)."""
        k = np.searchsorted(self.t, x, side="right") - 1
        lv = np.where(k < 0, 0.0, self.level[np.clip(k, 0, len(self.t) - 1)])
        return np.asarray(lv * x if self.linear else lv, dtype=np.float64)


@dataclass(frozen=True)
class StepFeatures:
    """Per-request means over its decode steps (one row per request with >= 2 output tokens)."""

    tpot: FloatArray  # observed mean step time during its decode
    decode_seqs: FloatArray  # time-averaged sequences decoding beside it (itself included)
    context: FloatArray  # time-averaged context tokens read by those sequences
    prefill_per_step: FloatArray  # prompt tokens prefilled per step meanwhile


def step_features(t: EngineTimings) -> StepFeatures:
    """Batch composition seen by each request during its decode, from all requests' timings."""
    keep = (t.output >= 2) & (t.finish > t.first_token)
    out: dict[str, list[FloatArray]] = {k: [] for k in ("tpot", "b", "k", "p")}
    for r in np.unique(t.replica):
        on = t.replica == r
        f, l_, s = t.first_token[on], t.finish[on], t.scheduled[on]
        p, o = t.prompt[on], t.output[on]
        dur = np.maximum(l_ - f, 1e-9)
        rate = o / dur  # tokens generated per second while decoding
        batch = running_sequences(t, int(r))
        # context of a decoding sequence = prompt + tokens so far = (p - rate*f) + rate*t
        ctx_const = _Piecewise(f, l_, p - rate * f)
        ctx_lin = _Piecewise(f, l_, rate, linear=True)
        pdur = np.maximum(f - s, 1e-6)
        prefill = _Piecewise(s, s + pdur, p / pdur)
        sel = keep[on]
        x, y = f[sel], l_[sel]
        span = y - x
        steps = o[sel] - 1.0
        # its own share: itself decoding, its context growing from p to p + o over its decode
        own_b, own_k = 1.0, p[sel] + o[sel] / 2.0
        grow = 1.0 / t.sampled  # the unsampled requests beside it, in expectation
        b = batch.integral(x, y) / span
        k = (ctx_const.integral(x, y) + ctx_lin.integral(x, y)) / span
        full_b = own_b + (b - own_b) * grow
        full_k = own_k + (k - own_k) * grow
        gauge = t.running[int(r)] if t.sampled < 1.0 and int(r) < len(t.running) else None
        if gauge is not None and gauge[0].size >= 2:
            # the engine's own count of running sequences, averaged over the decode, is the
            # batch; each other sequence reads the context the traced ones beside it read
            # then (the capture's average where none was traced beside it)
            full_b = np.maximum(time_mean(gauge, x, y), 1.0)
            others = b - own_b
            per_seq = np.where(
                others >= MIN_TRACED_NEIGHBOURS,
                (k - own_k) / np.maximum(others, 1e-9),
                float(np.mean(p + o / 2.0)),
            )
            full_k = own_k + (full_b - 1.0) * per_seq
        pre = prefill.integral(x, y) * grow
        counted = (
            t.prompt_tokens[int(r)] if gauge is not None and int(r) < len(t.prompt_tokens) else None
        )
        if counted is not None and counted[0].size >= 2:
            # the engine's prompt-token counter holds every request's prefill, traced or not
            pre = np.interp(y, *counted) - np.interp(x, *counted)
        out["tpot"].append(span / steps)
        out["b"].append(full_b)
        out["k"].append(full_k)
        out["p"].append(pre / steps)
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}
    return StepFeatures(cat["tpot"], cat["b"], cat["k"], cat["p"])


def running_sequences(t: EngineTimings, replica: int) -> _Piecewise:
    """The traced sequences decoding on ``replica`` over time (its ``integral`` over a span
    divided by the span is the mean batch a traced request saw)."""
    on = t.replica == replica
    f, l_ = t.first_token[on], t.finish[on]
    return _Piecewise(f, l_, np.ones_like(f))


def time_mean(gauge: tuple[FloatArray, FloatArray], x: FloatArray, y: FloatArray) -> FloatArray:
    """Mean of a step-wise gauge (each sample holds until the next) over each [x, y]."""
    times, values = gauge
    ends = np.concatenate([times[1:], [times[-1] + float(np.median(np.diff(times)))]])
    level = _Piecewise(times, ends, values)
    return np.asarray(level.integral(x, y) / np.maximum(y - x, 1e-9), dtype=np.float64)


def single_steps(t: EngineTimings, budget: int | None = None) -> StepFeatures:
    """One row per engine step whose duration the timings show exactly.

    A first token marks the end of a step; the requests that got their first token then, and
    were admitted last, were admitted at that step's start (an engine stamps a request
    scheduled when the scheduler admits it).  When no other step end was observed in between,
    the step ran from that admission to the first token.  Its batch is known from the other
    requests: sequences decoding then, their context, and the prompt tokens of every prefill
    in flight (capped by the token budget when known).  These are the steps TTFT is made of,
    which the TPOT rows only see on average."""
    out: dict[str, list[FloatArray]] = {k: [] for k in ("y", "b", "k", "p")}
    if t.sampled < 1.0:  # the step ends of untraced requests are unseen: no step is pinned
        return StepFeatures(*(np.zeros(0),) * 4)
    for r in np.unique(t.replica):
        on = t.replica == r
        f, l_, s = t.first_token[on], t.finish[on], t.scheduled[on]
        p, o = t.prompt[on], t.output[on]
        # first tokens within STEP_TOLERANCE of each other came out of one step (timestamps
        # that went through a trace format carry rounding noise)
        order = np.argsort(f, kind="stable")
        group = np.empty(f.size, dtype=np.int64)
        group[order] = np.cumsum(np.concatenate([[0], np.diff(f[order]) > STEP_TOLERANCE]))
        ends = np.full(int(group.max()) + 1, np.inf)
        np.minimum.at(ends, group, f)
        starts = np.full(ends.size, -np.inf)
        np.maximum.at(starts, group, s)
        # every first token and every finish is a step end: none may fall inside the step
        seen = np.unique(np.concatenate([f, l_]))
        inside = np.searchsorted(seen, ends - STEP_TOLERANCE, side="left") - np.searchsorted(
            seen, starts + STEP_TOLERANCE, side="right"
        )
        # the member admitted last must have fitted its whole prompt into that one step
        latest = np.zeros(ends.size)
        is_latest = s >= starts[group] - 1e-12
        np.maximum.at(latest, group[is_latest], p[is_latest])
        ok = (ends > starts + STEP_TOLERANCE) & (inside <= 0)
        x, y = starts[ok], ends[ok]
        rate = o / np.maximum(l_ - f, 1e-9)
        decoding = _Piecewise(f, l_, np.ones_like(f)).value(x)
        if budget:
            fits = latest[ok] <= budget - decoding
            x, y, decoding = x[fits], y[fits], decoding[fits]
        ctx = _Piecewise(f, l_, p - rate * f).value(x)
        ctx = ctx + _Piecewise(f, l_, rate, linear=True).value(x)
        # remaining prompt of a prefill in flight falls linearly from p at s_j to 0 at f_j
        span = np.maximum(f - s, 1e-9)
        pending = _Piecewise(s, f, p * f / span).value(x)
        pending = pending - _Piecewise(s, f, p / span, linear=True).value(x)
        if budget:
            pending = np.minimum(pending, np.maximum(budget - decoding, 0.0))
        out["y"].append(y - x)
        out["b"].append(decoding)
        out["k"].append(ctx)
        out["p"].append(pending)
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}
    return StepFeatures(cat["y"], cat["b"], cat["k"], cat["p"])


def sampled_prefill_steps(t: EngineTimings, budget: int | None = None) -> StepFeatures:
    """For sampled traces: one row per traced prefill that fitted in one step.

    No step end of an untraced request is seen, so no step is pinned as :func:`single_steps`
    pins them; but a prompt that fits the token budget beside the running decodes is
    prefilled in the step it was admitted to (vLLM schedules running decodes first, then
    whole prompts that fit), so its admission -> first token is one step.  The batch beside
    it is the engine's running gauge at admission (less itself), each decode reading the
    traced requests' mean context on that replica; the other prefills in that step are the
    replica's prompt-token counter rate over the median such step.  A step a prompt shared
    with others' prefills beyond that, or was split over, is an outlier the robust fit
    discounts.  They carry the compute side's cost per token (:func:`fit_compute`), which
    the TPOT rows (a mean step over a whole decode) do not show: a line fitted to sampled
    traces charged a third of the observed per-token prefill cost on a tuning bundle."""
    out: dict[str, list[FloatArray]] = {k: [] for k in ("y", "b", "k", "p")}
    for r in np.unique(t.replica):
        ri = int(r)
        if ri >= len(t.running) or t.running[ri][0].size < 2:
            continue
        on = t.replica == r
        s, f, p, o = t.scheduled[on], t.first_token[on], t.prompt[on], t.output[on]
        times, values = t.running[ri]
        # the sample in force at admission (a gauge holds until the next scrape)
        k = np.clip(np.searchsorted(times, s, side="right") - 1, 0, times.size - 1)
        decoding = np.maximum(values[k] - 1.0, 0.0)
        y = f - s
        ok = y > 0
        if budget:
            ok &= p <= budget - decoding
        if not ok.any():
            continue
        rate = 0.0
        if ri < len(t.prompt_tokens) and t.prompt_tokens[ri][0].size >= 2:
            ct, cv = t.prompt_tokens[ri]
            span = float(ct[-1] - ct[0])
            rate = float(cv[-1] - cv[0]) / span if span > 0 else 0.0
        # the others' prompt tokens in that step: those that arrived over the step before
        # it (a typical step: the traced decodes' mean step), at the counter's rate
        dec = (o >= 2) & (t.finish[on] > f)
        typical = (
            float(np.median((t.finish[on][dec] - f[dec]) / (o[dec] - 1.0)))
            if dec.any()
            else float(np.median(y[ok]))
        )
        others = rate * typical
        pre = p[ok] + others
        if budget:
            pre = np.minimum(pre, np.maximum(budget - decoding[ok], p[ok]))
        ctx = float(np.mean(p + o / 2.0))
        out["y"].append(y[ok])
        out["b"].append(decoding[ok])
        out["k"].append(decoding[ok] * ctx)
        out["p"].append(pre)
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}
    return StepFeatures(cat["y"], cat["b"], cat["k"], cat["p"])


def _pinned_steps(t: EngineTimings, budget: int | None) -> StepFeatures:
    """The prefill steps the compute side is fitted to: :func:`single_steps`, or with sampled
    traces :func:`sampled_prefill_steps`.  Only there: a line or the roofline's grid fitted
    to the gauge's mean compositions came out worse (the simulator's saturated capture with
    8 % of its traces: replayed median TTFT -22 %, roofline MBU 0.51 for 0.8), while the
    compute side is a median over the steps clearly past the line, and it is one more
    candidate the replay must prefer."""
    return sampled_prefill_steps(t, budget) if t.sampled < 1.0 else single_steps(t, budget)


@dataclass(frozen=True)
class StepFit:
    model: FittedStepTime
    n: int  # requests the fit used
    r2: float  # of per-request TPOT
    mape: float  # mean absolute percentage error of per-request TPOT


def fit_step_time(t: EngineTimings, budget: int | None = None, *, single: bool = True) -> StepFit:
    """Fit ``step = c0 + D*decode_seqs + C*context + P*prefill_tokens`` (all >= 0) to the
    requests' TPOTs (mean decode steps) and to the single prefill steps the timings show
    (``budget``: the engine's max_num_batched_tokens, when known)."""
    tp = step_features(t)
    one = single_steps(t, budget) if single else StepFeatures(*(np.zeros(0),) * 4)
    rows = [
        np.concatenate([tp.tpot, one.tpot]),
        np.concatenate([tp.decode_seqs, one.decode_seqs]),
        np.concatenate([tp.context, one.context]),
        np.concatenate([tp.prefill_per_step, one.prefill_per_step]),
    ]
    ok = np.isfinite(rows[0]) & (rows[0] > 0)
    n = int(ok.sum())
    if n < 5:
        raise InsufficientDataError(
            f"only {n} decode or prefill steps observed: too few to fit the engine step time"
        )
    a = np.column_stack([np.ones(n), rows[1][ok], rows[2][ok], rows[3][ok]])
    y = rows[0][ok]
    coef = _robust_nnls(a, y)
    pred = a @ coef
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum()) or 1e-30
    # the simulator also charges ``context`` for the prompt chunk's own tokens; the fitted
    # per-prefill-token cost already includes it
    prefill = max(0.0, float(coef[3]) - float(coef[2]))
    model = FittedStepTime(
        c0=float(coef[0]),
        decode=float(coef[1]),
        context=float(coef[2]),
        prefill=prefill,
        batch=0.0,
    )
    return StepFit(
        model=model,
        n=n,
        r2=1.0 - ss_res / ss_tot,
        mape=float(np.mean(np.abs(pred - y) / y)),
    )


#: a pinned step this much longer than the decode line predicts is on the compute side of
#: the roofline (prefill tokens beyond the ridge); below it, the line's noise
COMPUTE_BOUND = 1.3
#: the fewest such steps that fit a compute cost per token
MIN_COMPUTE_STEPS = 10


def fit_compute(t: EngineTimings, line: FittedStepTime, budget: int | None = None) -> float | None:
    """Seconds per token of a compute-bound step: the median of step / tokens over the pinned
    prefill steps (:func:`single_steps`) that ran ``COMPUTE_BOUND`` longer than ``line`` (a
    fit to decode TPOTs, the memory-bound side) predicts, the longer half of them by tokens
    (nearest to pure compute).  None where fewer than ``MIN_COMPUTE_STEPS`` show it.

    A line through decode and prefill steps together cannot bend: a GPU's step is flat in
    its tokens until compute overtakes the weight reads, then grows with them (the ridge).
    Fitted to both, the line charged a third of the observed per-token prefill cost on a
    tuning bundle whose TTFT was mostly long prompts' prefill steps."""
    one = _pinned_steps(t, budget)
    if one.tpot.size == 0:
        return None
    pred = line.c0 + line.decode * one.decode_seqs + line.context * one.context
    pred = pred + line.prefill * one.prefill_per_step
    tokens = one.prefill_per_step + one.decode_seqs
    bound = (one.tpot > COMPUTE_BOUND * pred) & (tokens > 0)
    if int(bound.sum()) < MIN_COMPUTE_STEPS:
        return None
    y, n = one.tpot[bound], tokens[bound]
    longer = n >= np.median(n)
    return float(np.median(y[longer] / n[longer]))


def _robust_nnls(a: FloatArray, y: FloatArray, iterations: int = 20) -> FloatArray:
    """Non-negative least absolute relative error, by iteratively reweighted NNLS.

    Relative, because step times span an order of magnitude; absolute rather than squared,
    because a preempted request's decode includes the time it sat preempted and sits far
    above the line (vLLM's docs: preemption inflates decode intervals) - an L1 fit follows
    the typical step instead of those few."""
    scale = np.maximum(np.abs(a).max(axis=0), 1e-12)  # columns of one size: NNLS conditioning
    a_s = a / scale
    w = 1.0 / y
    coef = np.zeros(a.shape[1])
    for _ in range(iterations):
        coef, _ = nnls(a_s * w[:, None], y * w)
        rel = np.abs(a_s @ coef - y) / y
        w = 1.0 / (y * np.maximum(rel, 1e-3))
    return np.asarray(coef / scale, dtype=np.float64)


# -- the roofline's efficiencies -----------------------------------------------------------
@dataclass(frozen=True)
class RooflineFit:
    """Efficiencies that make a roofline (known model and GPU) match the observed steps."""

    mfu: float
    mbu: float
    overhead_s: float
    n: int
    mape: float  # of the rows it was fitted to


def fit_roofline(
    t: EngineTimings, template: RooflineStepTime, budget: int | None = None, max_rows: int = 6000
) -> RooflineFit:
    """Grid-fit ``mfu``, ``mbu`` and the per-step overhead of ``template`` to the same rows as
    :func:`fit_step_time`.  A roofline keeps the knee a line cannot: below it a step costs the
    weight reads whatever its token count, above it every token costs compute - which is
    exactly what decides whether a smaller token budget shortens or lengthens TTFT."""
    # single steps are exact compositions; a TPOT row is a mean over steps, and the max() of a
    # mean composition is not the mean of the max(): use those only when steps are too few -
    # or the traces are sampled, when the prefill steps (sampled_prefill_steps) carry the
    # compute side and the decodes' mean steps the memory side, which those seldom reach
    one = _pinned_steps(t, budget)
    enough = t.sampled >= 1.0 and np.isfinite(one.tpot).sum() >= 50
    rows = [one] if enough else [one, step_features(t)]
    y = np.concatenate([r.tpot for r in rows])
    b = np.concatenate([r.decode_seqs for r in rows])
    k = np.concatenate([r.context for r in rows])
    p = np.concatenate([r.prefill_per_step for r in rows])
    ok = np.isfinite(y) & (y > 0)
    y, b, k, p = y[ok], b[ok], k[ok], p[ok]
    if y.size < 5:
        raise InsufficientDataError("too few observed steps to fit the roofline's efficiencies")
    if y.size > max_rows:  # an even subsample: the grid costs rows x candidates
        keep = np.linspace(0, y.size - 1, max_rows).astype(np.int64)
        y, b, k, p = y[keep], b[keep], k[keep], p[keep]
    unit = replace(template, mfu=1.0, mbu=1.0, overhead_s=0.0)
    work = np.array([unit.split(pi, bi, ki)[:3] for pi, bi, ki in zip(p, b, k, strict=True)])
    compute, memory, comm = work[:, 0], work[:, 1], work[:, 2]

    def search(mfus: FloatArray, mbus: FloatArray) -> tuple[float, float, float, float]:
        best = (math.inf, 1.0, 1.0, 0.0)
        for mfu in mfus:
            base = np.maximum(compute[None, :] / mfu, memory[None, :] / mbus[:, None]) + comm
            overhead = np.maximum(np.median(y - base, axis=1), 0.0)
            err = np.mean(np.abs(np.log((base + overhead[:, None]) / y)), axis=1)
            i = int(np.argmin(err))
            if err[i] < best[0]:
                best = (float(err[i]), float(mfu), float(mbus[i]), float(overhead[i]))
        return best

    coarse = np.geomspace(0.03, 1.0, 48)  # 7.7 % apart
    _, mfu, mbu, _ = search(coarse, coarse)
    _, mfu, mbu, overhead = search(
        np.clip(mfu * np.geomspace(0.92, 1.08, 17), 0.01, 1.0),
        np.clip(mbu * np.geomspace(0.92, 1.08, 17), 0.01, 1.0),
    )
    pred = np.maximum(compute / mfu, memory / mbu) + comm + overhead
    return RooflineFit(mfu, mbu, overhead, int(y.size), float(np.mean(np.abs(pred - y) / y)))
