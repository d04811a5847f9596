"""A predictor's answer for one change: per SLO the value the planner ranks by and, when the
model says so, what is known about that value; the throughput change apart.

``whatif.Prediction.forecast`` builds it from a calibrated replay; the planner
(``remediation.plan``) reads it.  ``Remediation.predicted`` is :meth:`Forecast.predicted`: the
values only, keyed ``<metric>_p<N>`` (seconds) plus ``throughput_change_pct``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

#: the key of the throughput change beside the SLO keys in ``Remediation.predicted``
THROUGHPUT: Final = "throughput_change_pct"
#: a replay with the change within this fraction of the replay without it predicts no effect:
#: same seed and workload, so any mechanism the change touches moves the percentile more
INERT_CHANGE = 0.001
#: the observed percentile's interval is taken at this confidence (order statistics of the
#: requests measured): a percentile from a few dozen sampled traces is known no better, and a
#: replay the observation cannot tell apart from it is not contradicted by it
OBSERVED_CONFIDENCE: Final = 0.90


@dataclass(frozen=True)
class ModelFacts:
    """What the calibrated model knows about its own prediction of one SLO."""

    observed: float | None  # seconds, from the capture
    raw: float | None  # seconds, the replay with the change, before any correction
    model_error_pct: float | None  # calibrated baseline against observed
    anchored: bool  # the value is observed x replay_after / replay_before
    low_confidence: bool  # the model misses the observation by more than its tolerance
    baseline: float | None = None  # seconds, the calibrated replay without the change
    #: beyond the tolerance, but inside the observed percentile's own interval (seconds):
    #: too few requests measured to tell the replay from the observation; None otherwise
    within_interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class SloForecast:
    """One SLO's predicted percentile (seconds) and, from a calibrated model, its facts."""

    value: float
    facts: ModelFacts | None = None


@dataclass(frozen=True)
class Forecast:
    """Predicted percentiles per SLO key (``ttft_p95``) and the throughput change (percent)."""

    slos: Mapping[str, SloForecast] = field(default_factory=dict)
    throughput_change_pct: float | None = None
    #: what the model saw in its own replay that explains a surprising prediction, one line
    #: each (a fix that makes the autoscaler remove pods sooner, say)
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Mapping[str, float]) -> Forecast:
        """From plain values (``{"ttft_p95": s, "throughput_change_pct": pct}``), no facts."""
        return cls(
            slos={k: SloForecast(v) for k, v in values.items() if k != THROUGHPUT},
            throughput_change_pct=values.get(THROUGHPUT),
        )

    def predicted(self) -> dict[str, float]:
        """The values, as ``Remediation.predicted`` holds them."""
        out = {k: s.value for k, s in self.slos.items()}
        if self.throughput_change_pct is not None:
            out[THROUGHPUT] = self.throughput_change_pct
        return out

    def facts(self, key: str) -> ModelFacts | None:
        s = self.slos.get(key)
        return None if s is None else s.facts

    @property
    def has_facts(self) -> bool:
        """The model reported facts about its predictions (a calibrated replay does)."""
        return any(s.facts is not None for s in self.slos.values())

    @property
    def low_confidence(self) -> bool:
        return any(s.facts is not None and s.facts.low_confidence for s in self.slos.values())

    @property
    def inert(self) -> bool:
        """The model's own replay of the change equals its replay without it on every SLO it
        knows both for: it predicts no effect (often because it does not model the change)."""
        pairs = [
            (f.raw, f.baseline)
            for s in self.slos.values()
            if (f := s.facts) is not None and f.raw is not None and f.baseline is not None
        ]
        return bool(pairs) and all(
            abs(raw - base) <= INERT_CHANGE * abs(base) for raw, base in pairs
        )
