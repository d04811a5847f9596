"""Two captures (or two windows) -> Report of kind "compare": which SLOs changed, which stage
changed, and whether each tail-percentile change is statistically real.

Per SLO: the exact percentile before and after, each with its order-statistic confidence
interval (``analyses.quantiles``), and a seeded bootstrap interval of the *difference*.  A
change is called real only when that interval excludes zero; with fewer requests than the
percentile needs, the answer is "too few requests" and the minimum count, never a guess.
Throughput is compared on its own, never folded into a latency number."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tailtriage.analyses import quantiles as Q
from tailtriage.analyses.metrics import metric_source
from tailtriage.analyses.results import Decomposition, SloSpec, StageValue
from tailtriage.analyses.slo import parse_slos
from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze
from tailtriage.report import Report
from tailtriage.report_sections import CompareSection, SloDelta, StageDelta
from tailtriage.store import InputStore, Store, opened
from tailtriage.store.dialect import window_filter

BOOTSTRAP = 400


@dataclass(frozen=True)
class SloChange:
    spec: SloSpec
    before: Q.QuantileEstimate
    after: Q.QuantileEstimate
    diff_ci: tuple[float, float] | None  # bootstrap CI of after - before (seconds)
    verdict: str  # improved | regressed | no significant change | too few requests
    warning: str | None = None

    @property
    def delta(self) -> float:
        return self.after.value - self.before.value

    def row(self) -> SloDelta:
        """The report's typed row for this change."""
        return SloDelta(
            metric=self.spec.metric,
            percentile=self.spec.percentile,
            threshold=self.spec.threshold,
            before=self.before.value,
            after=self.after.value,
            delta=self.delta,
            before_ci=(self.before.ci_low, self.before.ci_high),
            after_ci=(self.after.ci_low, self.after.ci_high),
            delta_ci=self.diff_ci,
            n_before=self.before.count,
            n_after=self.after.count,
            before_breached=self.before.value > self.spec.threshold,
            after_breached=self.after.value > self.spec.threshold,
            significant=self.verdict in ("improved", "regressed"),
            verdict=self.verdict,
            method=f"bootstrap of the difference ({BOOTSTRAP} resamples) and "
            "order-statistic CIs of each percentile",
            warning=self.warning,
        )


def _values(store: Store, metric: str, window: tuple[float, float] | None) -> np.ndarray:
    src = metric_source(store, metric)
    tab = store.query(
        f"SELECT value FROM ({src.sql}) AS s WHERE {window_filter('arrival', window)} "
        "AND value IS NOT NULL"
    )
    return np.asarray(tab.column(0).to_numpy(zero_copy_only=False), dtype=np.float64)


def slo_change(
    spec: SloSpec,
    before: np.ndarray,
    after: np.ndarray,
    rng: np.random.Generator,
    confidence: float = 0.95,
) -> SloChange:
    """The change in one SLO percentile, and whether it is statistically real."""
    b, a = Q.estimate(before, spec.percentile), Q.estimate(after, spec.percentile)
    need = Q.min_count(spec.percentile, confidence)
    if min(b.count, a.count) < need:
        return SloChange(
            spec,
            b,
            a,
            None,
            "too few requests",
            f"p{spec.percentile:g} needs at least {need} requests on each side for a "
            f"{confidence:.0%} interval (before {b.count}, after {a.count})",
        )
    diffs = np.empty(BOOTSTRAP)
    for i in range(BOOTSTRAP):
        rb = before[rng.integers(0, before.size, before.size)]
        ra = after[rng.integers(0, after.size, after.size)]
        diffs[i] = Q.percentile(ra, spec.percentile) - Q.percentile(rb, spec.percentile)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = (float(v) for v in np.quantile(diffs, [alpha, 1.0 - alpha]))
    verdict = "improved" if hi < 0 else "regressed" if lo > 0 else "no significant change"
    return SloChange(spec, b, a, (lo, hi), verdict)


def _full(store: InputStore) -> tuple[float, float]:
    rng = store.time_range
    if rng is None:
        return (0.0, 1.0)
    return (rng[0], rng[1] + 1e-6)


def compare(
    before: Capture | InputStore,
    after: Capture | InputStore,
    slos: Sequence[SloSpec] | str,
    *,
    before_window: tuple[float, float] | None = None,
    after_window: tuple[float, float] | None = None,
    seed: int = 0,
) -> Report:
    """Compare two captures or stores (whole time range unless windows are given)."""
    specs = parse_slos(slos) if isinstance(slos, str) else tuple(slos)
    with opened(before) as before_store, opened(after) as after_store:
        bw, aw = before_window or _full(before_store), after_window or _full(after_store)
        rb = analyze(before_store, specs, incident=bw)
        ra = analyze(after_store, specs, incident=aw)
        rng = np.random.default_rng(seed)
        changes = tuple(
            slo_change(
                s, _values(before_store, s.metric, bw), _values(after_store, s.metric, aw), rng
            )
            for s in specs
        )
    decomposition = _stage_deltas(rb.decomposition, ra.decomposition)
    section = CompareSection(
        slos=tuple(c.row() for c in changes),
        stages=_stage_rows(decomposition),
        throughput_before=dict(rb.throughput),
        throughput_after=dict(ra.throughput),
        window_before=bw,
        window_after=aw,
        seed=seed,
        changed_stages=tuple(_changed(decomposition)),
    )
    return dataclasses.replace(
        ra,
        kind="compare",
        title="tailtriage compare",
        decomposition=decomposition,
        windows=dataclasses.replace(ra.windows, baseline=bw) if ra.windows else None,
        attribution={},
        sections=dataclasses.replace(ra.sections, compare=section),
    )


def _stage_deltas(b: Decomposition | None, a: Decomposition | None) -> Decomposition | None:
    """The after decomposition with the before values as its baseline."""
    if a is None:
        return None
    before = {s.stage: s.seconds for s in b.stages} if b is not None else {}
    stages = [StageValue(s.stage, s.seconds, before.get(s.stage, 0.0)) for s in a.stages]
    stages += [
        StageValue(k, 0.0, v) for k, v in before.items() if k not in {s.stage for s in a.stages}
    ]
    return dataclasses.replace(
        a,
        stages=tuple(stages),
        baseline_total=None if b is None else b.total,
        baseline_count=0 if b is None else b.count,
    )


def _stage_rows(d: Decomposition | None) -> tuple[StageDelta, ...]:
    if d is None:
        return ()
    return tuple(
        StageDelta(s.stage, s.baseline_seconds, s.seconds, s.seconds - (s.baseline_seconds or 0.0))
        for s in d.stages
    )


def _changed(d: Decomposition | None) -> list[str]:
    """Stages whose share of the percentile moved by more than 10 % of it (largest first)."""
    if d is None or d.baseline_total is None:
        return []
    scale = max(d.total, d.baseline_total, 1e-9)
    moved = [
        (abs(s.seconds - (s.baseline_seconds or 0.0)), s.stage)
        for s in d.stages
        if abs(s.seconds - (s.baseline_seconds or 0.0)) >= 0.1 * scale
    ]
    return [stage for _, stage in sorted(moved, reverse=True)]
