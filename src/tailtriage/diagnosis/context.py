"""What a rule sees: the SLO results, windows, tail decomposition and the capture's signals.

One calling convention for every rule: ``rule.evaluate(ctx) -> tuple[Finding, ...]``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tailtriage.analyses.results import Decomposition, SloResult, Windows
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.signals import Signals
from tailtriage.model import Capture
from tailtriage.store import Store


@dataclass(frozen=True)
class StageView:
    """One stage of the decomposition at the SLO percentile (seconds)."""

    stage: str
    seconds: float
    baseline: float | None

    @property
    def delta(self) -> float | None:
        return None if self.baseline is None else self.seconds - self.baseline


@dataclass(frozen=True)
class DiagnosisContext:
    slos: tuple[SloResult, ...]
    windows: Windows
    signals: Signals
    #: decomposition of the primary SLO metric (a latency metric with stages: ttft or e2e)
    decomposition: Decomposition | None = None
    #: counterfactual / Shapley attribution per stage, when analyses computed it
    attribution: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    capture: Capture | None = None
    store: Store | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    # -- SLOs ----------------------------------------------------------------------------
    def breached(self, *metrics: str) -> tuple[SloResult, ...]:
        return tuple(
            s for s in self.slos if s.breached and (not metrics or s.spec.metric in metrics)
        )

    def slo(self, *metrics: str) -> SloResult | None:
        """The first breached SLO on ``metrics``, else the first given on them."""
        hit = self.breached(*metrics)
        if hit:
            return hit[0]
        return next((s for s in self.slos if s.spec.metric in metrics), None)

    @property
    def primary(self) -> SloResult | None:
        return self.breached()[0] if self.breached() else (self.slos[0] if self.slos else None)

    # -- stages --------------------------------------------------------------------------
    def stage(self, name: str) -> StageView | None:
        d = self.decomposition
        if d is None:
            return None
        for s in d.stages:
            if s.stage == name:
                return StageView(s.stage, s.seconds, s.baseline_seconds)
        return None

    def stage_seconds(self, *names: str) -> float:
        return sum(v.seconds for n in names if (v := self.stage(n)) is not None)

    def stage_excess(self, *names: str) -> float:
        """How much the stages grew against the baseline; without a baseline, their size."""
        total = 0.0
        for n in names:
            v = self.stage(n)
            if v is None:
                continue
            total += v.seconds - v.baseline if v.baseline is not None else v.seconds
        return max(total, 0.0)

    def stage_explained(self, *names: str) -> float:
        """Seconds of the percentile's excess over baseline the stages explain: their Shapley
        attribution when the analysis computed it (they add up to observed - baseline), else
        their growth in the percentile band (:meth:`stage_excess`)."""
        if self.attribution:
            shap = sum(float(self.attribution.get(n, {}).get("shapley", 0.0)) for n in names)
            return max(shap, 0.0)
        return self.stage_excess(*names)

    def stage_share(self, *names: str) -> float:
        d = self.decomposition
        if d is None or d.total <= 0:
            return 0.0
        return self.stage_seconds(*names) / d.total

    @property
    def stages_breached(self) -> bool:
        """The decomposed metric's SLO is breached (else the stages explain no breach)."""
        d = self.decomposition
        return d is not None and bool(self.breached(d.metric))

    def stage_matters(self, *names: str, share: float = T.STAGE_SHARE_MIN) -> bool:
        """True when the stages take a real part of the breached percentile, or grew markedly."""
        d = self.decomposition
        if d is None or not self.stages_breached:
            return False
        threshold = self._threshold()
        grew = self.stage_excess(*names)
        has_base = any((v := self.stage(n)) is not None and v.baseline is not None for n in names)
        if has_base and grew >= max(T.STAGE_GROWTH_OF_THRESHOLD * threshold, T.STAGE_GROWTH_MIN_S):
            return True
        return self.stage_share(*names) >= share and self.stage_seconds(*names) >= T.STAGE_MIN_S

    def _threshold(self) -> float:
        d = self.decomposition
        if d is not None:
            slo = self.slo(d.metric)
            if slo is not None:
                return slo.spec.threshold
            return d.total
        return 1.0
