"""Frozen result values produced by analyses (seconds inside; ms only in renderers)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SloSpec:
    """``p95 ttft < 500ms`` → SloSpec("ttft", 95.0, 0.5)."""

    metric: str  # ttft | itl | tpot | e2e
    percentile: float  # 95.0, 99.9
    threshold: float  # seconds

    def __str__(self) -> str:
        p = f"{self.percentile:g}"
        return f"p{p} {self.metric} < {self.threshold * 1000:g}ms"


@dataclass(frozen=True)
class SloResult:
    spec: SloSpec
    observed: float | None  # seconds, exact percentile over the incident window
    breached: bool
    count: int  # samples the percentile was computed from
    ci_low: float | None = None  # order-statistic confidence interval (seconds)
    ci_high: float | None = None
    definition: str = ""  # which definition of the metric was available
    warning: str | None = None  # e.g. too few samples for this percentile
    #: where the percentile comes from: "requests" (per-request samples) or
    #: "engine_histograms" (histogram_quantile over the engine's buckets; then ci_low/ci_high
    #: are the bucket that bounds the true value, not a confidence interval)
    source: str = "requests"


@dataclass(frozen=True)
class StageValue:
    stage: str
    seconds: float  # share of the percentile (additive)
    baseline_seconds: float | None = None


@dataclass(frozen=True)
class StageMove:
    """Seconds of the band that a diagnosis reads as another stage than the span rule did:
    a stage is named per span, before anything is known about the fleet (Knative's
    ``throttler_try`` is ``pending``; Envoy's time before the first upstream byte is
    ``ingress``), and a rule that proves what the wait was (no capacity coming: a queue at a
    concurrency limit; Envoy's pool) moves it."""

    source: str  # stage the span rule named
    target: str  # stage it is
    seconds: float  # of the incident band
    baseline_seconds: float  # of the baseline band
    why: str  # one line, for the report

    @property
    def label(self) -> str:
        return f"{self.source} read as {self.target}: {self.why}"


@dataclass(frozen=True)
class Decomposition:
    """Stage breakdown of the requests in a narrow band around the SLO percentile,
    scaled so the stages add up exactly to the observed percentile."""

    metric: str
    percentile: float
    total: float  # observed percentile (seconds) = sum of stages
    stages: tuple[StageValue, ...]
    band: tuple[float, float] = (0.0, 0.0)  # percentile band used, e.g. (94, 96)
    count: int = 0  # requests in the band
    baseline_total: float | None = None
    baseline_count: int = 0
    #: "spans" (stage spans of the requests in the band) or "engine_histograms" (the engine's
    #: phase histograms: engine-side only, nothing before the engine is seen)
    source: str = "spans"
    method: str = ""  # how the stages were computed, in words, when not the band of spans
    #: time the diagnosis moved between stages (see StageMove), already applied to ``stages``
    moves: tuple[StageMove, ...] = ()

    @property
    def basis(self) -> str:
        """What the stages were computed from, for a report's subtitle."""
        if self.source == "engine_histograms":
            return (
                f"engine-side, from {self.count:,} observations in the engine's histograms "
                f"(no gateway, pending or network time)"
            )
        band = f"{self.count:,} requests in the p{self.band[0]:g}–p{self.band[1]:g} band"
        return "; ".join((band, *(m.label for m in self.moves)))


@dataclass(frozen=True)
class Windows:
    incident: tuple[float, float]
    baseline: tuple[float, float] | None = None
    detected: bool = False  # True when chosen automatically


@dataclass(frozen=True)
class PercentilePoint:
    """One time bin of a percentile-over-time series."""

    start: float
    end: float
    count: int
    values: tuple[tuple[float, float], ...] = field(default_factory=tuple)  # (percentile, seconds)


@dataclass(frozen=True)
class Attribution:
    """What each stage contributes to the breach of the percentile (seconds).

    ``counterfactual[i]``: the percentile if ``stages[i]`` alone had its baseline distribution.
    ``shapley[i]``: the stage's share of the breach (Shapley value); they add up to
    ``observed - baseline``."""

    metric: str
    percentile: float
    observed: float
    baseline: float
    stages: tuple[str, ...]
    counterfactual: tuple[float, ...]
    shapley: tuple[float, ...]
    seed: int = 0
    population: int = 0  # incident requests paired with baseline requests
    resampled_baseline: float | None = None  # all stages at baseline, by resampling (check)

    def as_mapping(self) -> dict[str, dict[str, float]]:
        return {
            s: {"counterfactual": c, "shapley": v}
            for s, c, v in zip(self.stages, self.counterfactual, self.shapley, strict=True)
        }
