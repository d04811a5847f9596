"""What-if: replay the calibrated simulator with and without a set of changes.

Both runs use the same calibration and the same seed, so the difference between them is the
effect of the changes alone.  Every prediction is shown next to the observed value and the
calibrated baseline, so the user sees the model's own error before trusting its forecast::

    replay = Replay.from_capture(capture, slos)           # calibrates once, runs the baseline
    pred = replay.predict({"engine.max_num_batched_tokens": 128})
    pred.slos[0].predicted, pred.throughput_change_pct

``whatif(capture, slos, overrides)`` does the same in one call.  Overrides use the simulator's
dotted keys (``simulator.apply_overrides``; documented in docs/scenarios.md).

Throughput is not latency, and is reported on its own: ``served_rps`` (completed requests per
second of the run: equal in an open-loop replay unless a change makes the stack fall behind),
``capacity_tps`` (output tokens per replica-busy second of the run) and ``step_capacity_tps``
(tokens per second of one full engine step of the stack's shape: ``max_num_seqs`` decodes and
the rest of ``max_num_batched_tokens`` in prompt chunks, timed by the calibrated step model -
what a fix costs in GPU efficiency, e.g. a smaller token budget, even when the replayed load
never saturates the engine).  ``throughput_change_pct`` compares the step capacity of the
changed stack with the baseline's.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tailtriage.analyses.metrics import (
    MetricSource,
    metric_percentiles,
    metric_source,
    order_statistic_ci,
)
from tailtriage.analyses.results import SloSpec
from tailtriage.errors import InsufficientDataError, TailtriageError
from tailtriage.model import Capture
from tailtriage.remediation.calibrate import Calibration, calibrate
from tailtriage.remediation.calibrate.infer import rescale_events
from tailtriage.remediation.calibrate.replay import simulate, with_trace, write_trace
from tailtriage.remediation.forecast import (
    OBSERVED_CONFIDENCE,
    Forecast,
    ModelFacts,
    SloForecast,
)
from tailtriage.simulator.cluster import resized_cache
from tailtriage.simulator.config import ScenarioConfig, apply_overrides
from tailtriage.simulator.parallel import run_many
from tailtriage.simulator.workload import Workload
from tailtriage.store.base import DuckDBStore

#: a calibrated baseline further than this (percent) from the observed percentile does not
#: reproduce the incident: its predictions are shown, marked low-confidence, and not ranked
MODEL_TOLERANCE_PCT = 25.0
#: ... unless it falls inside the observed percentile's own interval (forecast's
#: OBSERVED_CONFIDENCE)


@dataclass(frozen=True)
class SloPrediction:
    """One SLO's percentile: observed, as the calibrated model reproduces it, and predicted."""

    spec: SloSpec
    observed: float | None  # seconds, from the capture
    baseline: float | None  # calibrated simulator, no changes
    predicted: float | None  # calibrated simulator with the changes
    definition: str = ""
    #: the observed percentile's OBSERVED_CONFIDENCE interval (order statistics of the
    #: requests measured); None where one side is beyond the sample
    observed_ci: tuple[float, float] | None = None

    @property
    def model_error_pct(self) -> float | None:
        """How far the calibrated baseline is from what was observed (the model's own error)."""
        return _pct(self.baseline, self.observed)

    @property
    def within_tolerance(self) -> bool:
        """The calibrated baseline reproduces the observation within MODEL_TOLERANCE_PCT, or
        lies inside the observed percentile's own interval (:data:`OBSERVED_CONFIDENCE`)."""
        err = self.model_error_pct
        if err is None:
            return False
        if abs(err) <= MODEL_TOLERANCE_PCT:
            return True
        ci, base = self.observed_ci, self.baseline
        return ci is not None and base is not None and ci[0] <= base <= ci[1]

    @property
    def by_interval(self) -> bool:
        """Within tolerance only by the observed interval (beyond MODEL_TOLERANCE_PCT)."""
        err = self.model_error_pct
        return err is not None and abs(err) > MODEL_TOLERANCE_PCT and self.within_tolerance

    @property
    def change_pct(self) -> float | None:
        """Predicted against baseline: the effect of the changes alone."""
        return _pct(self.predicted, self.baseline)

    @property
    def corrected(self) -> float | None:
        """The prediction scaled by observed/baseline (the Dynamo planner's correction factor):
        the observed value moved by the predicted relative change."""
        if self.predicted is None or self.baseline is None or self.observed is None:
            return None
        if self.baseline <= 0:
            return self.predicted
        return self.predicted * self.observed / self.baseline

    @property
    def key(self) -> str:
        """``ttft_p95``: the name a Remediation's ``predicted`` mapping uses."""
        return f"{self.spec.metric}_p{self.spec.percentile:g}"


@dataclass(frozen=True)
class Throughput:
    served_rps: float  # completed requests per second of the run
    capacity_tps: float  # output tokens per replica-busy second
    requests: int
    output_tokens: int
    step_capacity_tps: float = 0.0  # tokens per second of a full engine step (see module doc)


@dataclass(frozen=True)
class Prediction:
    """The result of one what-if."""

    overrides: Mapping[str, Any]
    slos: tuple[SloPrediction, ...]
    observed: Throughput
    baseline: Throughput
    predicted: Throughput
    seed: int
    fit: Any = None  # calibrate.FitQuality of the calibration used
    warnings: tuple[str, ...] = field(default_factory=tuple)
    #: pods the autoscaler removed within the window: (replay without, with the change)
    scale_ins: tuple[int, int] = (0, 0)

    @property
    def throughput_change_pct(self) -> float:
        change = _pct(self.predicted.step_capacity_tps, self.baseline.step_capacity_tps)
        return 0.0 if change is None else change

    def forecast(self, corrected: bool = False) -> Forecast:
        """The planner's view: per SLO the value to rank by (``corrected``: observed x
        replay_after / replay_before, else the raw replay) with the model's facts about it,
        and the throughput change."""
        slos: dict[str, SloForecast] = {}
        for s in self.slos:
            value = s.corrected if corrected else s.predicted
            if value is None:
                continue
            facts = ModelFacts(
                observed=s.observed,
                raw=s.predicted,
                model_error_pct=s.model_error_pct,
                anchored=corrected and s.corrected is not None,
                low_confidence=not s.within_tolerance,
                baseline=s.baseline,
                within_interval=s.observed_ci if s.by_interval else None,
            )
            slos[s.key] = SloForecast(value, facts)
        return Forecast(slos, self.throughput_change_pct, self._notes())

    def _notes(self) -> tuple[str, ...]:
        """Why the replay with the change is slower than the one without, where the replays
        show it: a change that leaves capacity idle sooner (faster start-ups, a bigger
        fleet) lets the autoscaler scale in sooner, and a burst then meets fewer pods."""
        before, after = self.scale_ins
        slower = [s for s in self.slos if s.predicted and s.baseline and s.predicted > s.baseline]
        if not slower or after <= before:
            return ()
        names = ", ".join(f"p{s.spec.percentile:g} {s.spec.metric.upper()}" for s in slower)
        return (
            f"Predicted slower ({names}) because the autoscaler removes pods sooner: the replay "
            f"with the change scales in {after} pod(s) within the window, {before} without it. "
            "Check the scale-down (stabilization window, minimum replicas) with this fix.",
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form: milliseconds at the edge, with the unit in the key."""
        return {
            "overrides": dict(self.overrides),
            "seed": self.seed,
            "slos": [
                {
                    "metric": s.spec.metric,
                    "percentile": s.spec.percentile,
                    "threshold_ms": _ms(s.spec.threshold),
                    "observed_ms": _ms(s.observed),
                    "baseline_ms": _ms(s.baseline),
                    "predicted_ms": _ms(s.predicted),
                    "predicted_corrected_ms": _ms(s.corrected),
                    "model_error_pct": _round(s.model_error_pct),
                    "observed_ci_ms": None
                    if s.observed_ci is None
                    else [_ms(s.observed_ci[0]), _ms(s.observed_ci[1])],
                    "low_confidence": not s.within_tolerance,
                    "change_pct": _round(s.change_pct),
                    "breached": None if s.predicted is None else s.predicted > s.spec.threshold,
                    "definition": s.definition,
                }
                for s in self.slos
            ],
            "throughput": {
                name: {
                    "served_rps": _round(t.served_rps),
                    "capacity_tokens_per_s": _round(t.capacity_tps),
                    "step_capacity_tokens_per_s": _round(t.step_capacity_tps),
                    "requests": t.requests,
                    "output_tokens": t.output_tokens,
                }
                for name, t in (
                    ("observed", self.observed),
                    ("baseline", self.baseline),
                    ("predicted", self.predicted),
                )
            },
            "throughput_change_pct": _round(self.throughput_change_pct),
            "warnings": list(self.warnings),
        }


def scaled_in(capture: Capture, window: tuple[float, float] | None = None) -> int:
    """Pods the autoscaler removed (its rescales to fewer replicas), within ``window``."""
    return sum(
        max(previous - size, 0)
        for t, size, previous in rescale_events(capture)
        if previous is not None and (window is None or window[0] <= t < window[1])
    )


def _pct(value: float | None, reference: float | None) -> float | None:
    if value is None or reference is None or reference == 0 or math.isnan(reference):
        return None
    return (value - reference) / reference * 100.0


def _ms(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else round(v * 1000.0, 3)


def _round(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else round(v, 3)


# -- measuring a capture -------------------------------------------------------------------
def _percentile(
    store: DuckDBStore,
    spec: SloSpec,
    token_times: bool | None,
    window: tuple[float, float] | None,
) -> tuple[float | None, str, MetricSource, int]:
    """One SLO's exact percentile (seconds; None without requests), its metric definition,
    its source and how many requests (or token gaps) it was taken over."""
    source = metric_source(store, spec.metric, token_times)
    pct = metric_percentiles(store, source, [spec.percentile], window)
    value = pct.get(spec.percentile) if pct.count else None
    value = None if value is None or math.isnan(value) else value
    return value, source.definition, source, pct.count


def slo_values(
    capture: Capture,
    slos: Sequence[SloSpec],
    *,
    token_times: bool | None = None,
    window: tuple[float, float] | None = None,
) -> tuple[tuple[float | None, str], ...]:
    """Each SLO's exact percentile (seconds) and the metric definition used, as ``analyze``
    computes it.  ``token_times=False`` forces the per-request ITL definition so a capture
    with token times can be compared with one without."""
    with DuckDBStore(capture) as store:
        return tuple(_percentile(store, spec, token_times, window)[:2] for spec in slos)


def observed_slos(
    capture: Capture,
    slos: Sequence[SloSpec],
    *,
    token_times: bool | None = None,
    window: tuple[float, float] | None = None,
) -> tuple[tuple[float | None, str, tuple[float, float] | None], ...]:
    """:func:`slo_values` with each percentile's interval at OBSERVED_CONFIDENCE over the
    requests (or token gaps) measured in ``window``: None where the sample is too small for
    either bound."""
    out = []
    with DuckDBStore(capture) as store:
        for spec in slos:
            value, definition, source, n = _percentile(store, spec, token_times, window)
            lo, hi = order_statistic_ci(
                store, source, spec.percentile, n, window, OBSERVED_CONFIDENCE
            )
            out.append((value, definition, None if lo is None or hi is None else (lo, hi)))
    return tuple(out)


def throughput(capture: Capture, window: tuple[float, float] | None = None) -> Throughput:
    """Served requests per second and output tokens per replica-busy second (of the
    requests arriving in ``window``, from the first of them to the last finish)."""
    rq = capture.requests
    if rq.num_rows == 0:
        raise InsufficientDataError("no requests to measure throughput on")
    ok = np.asarray(rq["status"].to_pylist(), dtype=object) == "ok"
    arrival = rq["arrival"].to_numpy(zero_copy_only=False).astype(np.float64)
    finish = rq["finish"].to_numpy(zero_copy_only=False).astype(np.float64)
    out_tok = rq["output_tokens"].to_numpy(zero_copy_only=False).astype(np.float64)
    replica = np.asarray(rq["replica"].to_pylist(), dtype=object)
    done = ok & np.isfinite(finish)
    first = arrival.min()
    if window is not None:
        inside = (arrival >= window[0]) & (arrival < window[1])
        done &= inside
        first = arrival[inside].min() if inside.any() else first
    span = float(np.nanmax(finish[done]) - first) if done.any() else 0.0
    tokens = float(np.nansum(out_tok[done]))
    busy = _busy_seconds(capture, replica, arrival, finish, done)
    return Throughput(
        served_rps=float(done.sum()) / span if span > 0 else 0.0,
        capacity_tps=tokens / busy if busy > 0 else 0.0,
        requests=int(done.sum()),
        output_tokens=int(tokens),
    )


def step_capacity(config: ScenarioConfig, workload: Workload) -> float:
    """Tokens per second of one full engine step of ``config``'s shape (0 when undefined)."""
    from tailtriage.simulator.cluster import make_template

    model = make_template(config, 0, np.random.default_rng(0)).step_model
    e = config.engine
    decode = min(e.max_num_seqs, e.max_num_batched_tokens)
    prefill = e.max_num_batched_tokens - decode
    mean_ctx = float(np.mean(workload.prompt_tokens) + np.mean(workload.output_tokens) / 2.0)
    seconds = model.step_time(prefill, decode, int(decode * mean_ctx + prefill))
    return e.max_num_batched_tokens / seconds if seconds > 0 else 0.0


def _busy_seconds(
    capture: Capture,
    replica: np.ndarray[Any, Any],
    arrival: np.ndarray[Any, Any],
    finish: np.ndarray[Any, Any],
    done: np.ndarray[Any, Any],
) -> float:
    """Sum over replicas of the time at least one request was inside the engine."""
    start = _engine_start(capture, arrival)
    total = 0.0
    for r in set(replica[done].tolist()):
        sel = done & (replica == r)
        a, b = start[sel], finish[sel]
        order = np.argsort(a)
        a, b = a[order], b[order]
        # union of intervals: running max of ends, new block where a start exceeds it
        ends = np.maximum.accumulate(b)
        new = np.concatenate([[True], a[1:] > ends[:-1]])
        block_id = np.cumsum(new) - 1
        block_start = a[new]
        block_end = np.zeros(block_start.size)
        np.maximum.at(block_end, block_id, b)
        total += float((block_end - block_start).sum())
    return total


def _engine_start(capture: Capture, arrival: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """When each request entered the engine (engine_queue, else prefill start, else arrival)."""
    st = capture.stages
    start = arrival.copy()
    if st.num_rows == 0:
        return start
    ids = capture.requests["request_id"].to_pylist()
    index = {rid: i for i, rid in enumerate(ids)}
    first: dict[int, float] = {}
    for rid, stage, t in zip(
        st["request_id"].to_pylist(), st["stage"].to_pylist(), st["start"].to_pylist(), strict=True
    ):
        if stage in ("engine_queue", "prefill"):
            i = index.get(rid)
            if i is not None and (i not in first or t < first[i]):
                first[i] = t
    for i, t in first.items():
        start[i] = t
    return start


@dataclass(frozen=True)
class SloTarget:
    """The SLOs' observed percentiles over ``window``, as a calibration target
    (:class:`~tailtriage.remediation.calibrate.ReplayTarget`): a replay's percent error on
    each, measured as the what-if measures its baseline."""

    slos: tuple[SloSpec, ...]
    observed: tuple[float | None, ...]  # seconds, one per SLO (None: not measurable)
    window: tuple[float, float] | None = None

    def errors(self, simulated: Capture) -> dict[str, float]:
        values = slo_values(simulated, self.slos, token_times=False, window=self.window)
        out = {}
        for spec, obs, (sim, _) in zip(self.slos, self.observed, values, strict=True):
            err = _pct(sim, obs)
            if err is not None and sim is not None and sim > 0:
                out[f"{spec.metric}_p{spec.percentile:g}"] = err
        return out


# -- replaying ------------------------------------------------------------------------------
#: margin (seconds) past the window's end that a replay still waits for: the capture's absolute
#: arrival is the start plus the relative one, a float sum that may round either way
STOP_MARGIN_S = 1e-3


def _stopped(config: ScenarioConfig, window: tuple[float, float] | None) -> ScenarioConfig:
    """``config`` run only until the requests arriving by the window's end have finished:
    percentiles over the window (arrivals in it) are exactly those of the whole run, since
    nothing that happens after a request has finished changes its timings."""
    if window is None:
        return config
    until = window[1] - config.start_unix_s + STOP_MARGIN_S
    return replace(config, output=replace(config.output, stop_after_arrivals_s=until))


class Replay:
    """A calibrated simulator bound to one capture: the baseline runs once, each
    :meth:`predict` runs the changed stack with the same workload and seed.

    The observed workload is replayed exactly (through the simulator's trace-replay input),
    so the comparison is not blurred by a resampled workload."""

    def __init__(
        self,
        capture: Capture,
        slos: Sequence[SloSpec],
        *,
        calibration: Calibration | None = None,
        base: ScenarioConfig | None = None,
        seed: int = 0,
        window: tuple[float, float] | None = None,
    ) -> None:
        self.capture = capture
        self.slos = tuple(slos)
        self.seed = seed
        self.window = window
        own = calibration is None
        wants_itl = any(s.metric == "itl" for s in self.slos)
        observed_tokens = capture.token_times.num_rows > 0
        # compare like with like: per-gap ITL only when the capture has token times too
        self._token_times = observed_tokens if wants_itl else False
        measured = observed_slos(capture, self.slos, token_times=self._token_times, window=window)
        self._observed = tuple(v for v, _, _ in measured)
        self._definitions = tuple(d for _, d, _ in measured)
        self._observed_ci = tuple(ci for _, _, ci in measured)
        # the calibration's choices reproduce these SLOs over the window as well (a calibrated
        # simulator replays without token times: per-request ITL, like with like)
        target = SloTarget(self.slos, self._observed, window) if not self._token_times else None
        self.calibration = calibration or calibrate(capture, base, seed=seed, target=target)
        self._tmp = tempfile.TemporaryDirectory(prefix="tailtriage-whatif-")
        trace = Path(self._tmp.name) / "observed-workload.csv"
        cal = self.calibration
        write_trace(cal.workload, cal.config.start_unix_s, trace)
        self.config = _stopped(with_trace(cal.config, trace, self._token_times), window)
        self._observed_tp = self._throughput(capture, self.config)
        self._baseline_capture: Capture | None = None
        self._runs: dict[str, Capture] = {}  # repr(config) -> its run
        self._baseline: tuple[float | None, ...] = ()
        self._baseline_tp: Throughput | None = None
        self._baseline_scale_ins = 0
        if own and cal.baseline is not None and cal.seed == seed and not self._token_times:
            self._keep_baseline(cal.baseline)  # calibration already ran exactly this config

    @classmethod
    def from_capture(
        cls,
        capture: Capture,
        slos: Sequence[SloSpec],
        *,
        seed: int = 0,
        base: ScenarioConfig | None = None,
    ) -> Replay:
        return cls(capture, slos, seed=seed, base=base)

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> Replay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, overrides: Mapping[str, Any] | None = None) -> Capture:
        """The simulated capture of the calibrated stack with ``overrides`` applied (run once
        per distinct config: the same config and seed make the same run)."""
        cfg = self._changed(overrides)
        key = repr(cfg)
        if key not in self._runs:
            self._runs[key] = simulate(cfg, self.seed)
        return self._runs[key]

    def prefetch(self, overrides: Sequence[Mapping[str, Any]]) -> None:
        """Run the changed stacks of ``overrides`` (and the baseline, unless it ran) several
        at once (``simulator.parallel``), for :meth:`run` and :meth:`predict` to find: the
        same captures they would make one by one.  Changes that do not apply, and every run
        when one fails, are left to :meth:`predict`, which says why for each."""
        configs = [] if self._baseline_capture is not None else [self.config]
        for o in overrides:
            try:
                configs.append(self._changed(o))
            except TailtriageError:
                continue
        todo = {repr(c): c for c in configs if repr(c) not in self._runs}
        try:
            self._runs.update(zip(todo, run_many(list(todo.values()), self.seed), strict=True))
        except TailtriageError:
            return

    def _changed(self, overrides: Mapping[str, Any] | None) -> ScenarioConfig:
        """The calibrated stack with ``overrides``; a KV cache the calibration read off the
        telemetry resized with the memory the change frees or takes."""
        if not overrides:
            return self.config
        return resized_cache(self.config, apply_overrides(self.config, overrides))

    @property
    def baseline(self) -> Capture:
        if self._baseline_capture is None:
            self._keep_baseline(self.run(None))
        assert self._baseline_capture is not None
        return self._baseline_capture

    def _keep_baseline(self, cap: Capture) -> None:
        self._baseline_capture = cap
        self._runs[repr(self.config)] = cap
        self._baseline = self._measure(cap)
        self._baseline_tp = self._throughput(cap, self.config)
        self._baseline_scale_ins = scaled_in(cap, self.window)

    def _throughput(self, cap: Capture, config: ScenarioConfig) -> Throughput:
        # over the window's requests: a replay stops once they have finished (``_stopped``)
        return replace(
            throughput(cap, self.window),
            step_capacity_tps=step_capacity(config, self.calibration.workload),
        )

    def _measure(self, cap: Capture) -> tuple[float | None, ...]:
        # the replay keeps the observed arrival times, so the same window selects the same
        # requests in the simulated captures
        values = slo_values(cap, self.slos, token_times=self._token_times, window=self.window)
        return tuple(v for v, _ in values)

    def predict(self, overrides: Mapping[str, Any]) -> Prediction:
        """Predicted SLO percentiles and throughput with ``overrides`` (dotted simulator keys)."""
        baseline = self.baseline
        changed = self.run(overrides) if overrides else baseline  # same seed: same run
        changed_config = self._changed(overrides)
        predicted = self._measure(changed)
        warnings = list(self.calibration.fit.warnings)
        slos = tuple(
            SloPrediction(spec, obs, base, pred, definition, ci)
            for spec, obs, base, pred, definition, ci in zip(
                self.slos,
                self._observed,
                self._baseline,
                predicted,
                self._definitions,
                self._observed_ci,
                strict=True,
            )
        )
        for s in slos:
            err = s.model_error_pct
            if s.by_interval:
                assert s.observed_ci is not None and err is not None
                lo, hi = s.observed_ci
                warnings.append(
                    f"the calibrated model misses the observed {s.key} by {err:+.0f}%, inside "
                    f"what the sample can tell: the observed value's "
                    f"{OBSERVED_CONFIDENCE:.0%} interval is {lo * 1e3:.0f}-{hi * 1e3:.0f} ms "
                    "(few requests measured); its predictions stand"
                )
            elif err is not None and abs(err) > MODEL_TOLERANCE_PCT:
                warnings.append(
                    f"the calibrated model misses the observed {s.key} by {err:+.0f}% (more "
                    f"than {MODEL_TOLERANCE_PCT:.0f}%): its predictions are low-confidence, read "
                    "them as a direction, not a number; fixes are not ranked by them"
                )
        assert self._baseline_tp is not None
        scale_ins = (self._baseline_scale_ins, scaled_in(changed, self.window))
        return Prediction(
            overrides=dict(overrides),
            slos=slos,
            observed=self._observed_tp,
            baseline=self._baseline_tp,
            predicted=self._throughput(changed, changed_config),
            seed=self.seed,
            fit=self.calibration.fit,
            warnings=tuple(warnings),
            scale_ins=scale_ins,
        )


def whatif(
    capture: Capture,
    slos: Sequence[SloSpec],
    overrides: Mapping[str, Any],
    *,
    seed: int = 0,
    base: ScenarioConfig | None = None,
    calibration: Calibration | None = None,
) -> Prediction:
    """Calibrate the simulator to ``capture``, replay it with and without ``overrides`` (same
    seed), and return predicted SLO percentiles and throughput beside the observed ones and
    the calibrated baseline.  For several candidate fixes, reuse one :class:`Replay`."""
    with Replay(capture, slos, seed=seed, base=base, calibration=calibration) as replay:
        return replay.predict(overrides)
