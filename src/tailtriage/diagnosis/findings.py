"""Findings and the evidence behind them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tailtriage.analyses.results import StageMove
from tailtriage.model.vocabulary import Category, Stage


@dataclass(frozen=True)
class Evidence:
    """One observed fact that supports (or weakens) a finding."""

    signal: str  # metric name, span name or event reason
    value: Any  # the observed value (number or short string)
    detail: str  # human sentence: comparison, threshold, baseline
    source: str = "span"  # span | metric | event | derived
    threshold: Any = None


@dataclass(frozen=True)
class Finding:
    category: Category
    stage: Stage | None  # the stage it explains
    confidence: float  # 0..1
    summary: str
    evidence: tuple[Evidence, ...] = ()
    next_steps: tuple[str, ...] = ()  # what to measure next when evidence is missing
    #: seconds of the SLO percentile this finding explains (used for ranking)
    impact: float = 0.0
    #: the metric whose breach it explains (ttft | itl | tpot | e2e)
    metric: str | None = None
    #: name of the rule that produced it
    rule: str = ""
    #: share of the metric's percentile excess over baseline it explains (set when ranked)
    explained_share: float | None = None
    #: why it ranks where it does (the first finding's sentence; set when ranked)
    rank_reason: str = ""
    #: band time this finding proves belongs to another stage than its spans' rule named
    #: (applied to the report's decomposition after the diagnosis)
    moves: tuple[StageMove, ...] = ()
