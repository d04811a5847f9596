"""The Rule plug-in protocol, its name registry and the helpers rules share."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

from tailtriage.analyses.results import StageMove
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.signals import GaugeStats
from tailtriage.model.vocabulary import CATEGORIES, Category, as_stage


@runtime_checkable
class Rule(Protocol):
    """Turns the context into zero or more findings of one root-cause category."""

    @property
    def name(self) -> str: ...

    @property
    def category(self) -> Category: ...

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]: ...


_REGISTRY: dict[str, Rule] = {}

#: modules whose rules register themselves on import
BUILTIN_MODULES: tuple[str, ...] = (
    "rules_path",
    "rules_capacity",
    "rules_saturation",
    "rules_engine",
    "rules_metrics",
    "rules_metrics_engine",
    "rules_disagg",
)
_LOADED = False


def register(rule: Rule) -> Rule:
    """Add a rule (a later rule with the same name replaces it)."""
    if rule.category not in CATEGORIES:
        raise ValueError(f"rule {rule.name!r}: unknown category {rule.category!r}")
    _REGISTRY[rule.name] = rule
    return rule


def registered() -> Iterator[Rule]:
    _load_builtins()
    return iter(list(_REGISTRY.values()))


def get(name: str) -> Rule:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown rule {name!r}; known: {', '.join(_REGISTRY)}") from None


def _load_builtins() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for mod in BUILTIN_MODULES:
        importlib.import_module(f"tailtriage.diagnosis.{mod}")


# -- helpers --------------------------------------------------------------------------------


def combine(*weights: float) -> float:
    """Independent supporting signals: 1 - prod(1 - w), clipped to [0, MAX_CONFIDENCE]."""
    miss = 1.0
    for w in weights:
        miss *= 1.0 - min(max(w, 0.0), 1.0)
    return min(max(1.0 - miss, 0.0), T.MAX_CONFIDENCE)


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"


def stage_evidence(ctx: DiagnosisContext, *stages: str) -> tuple[Evidence, ...]:
    """One evidence line per stage: its share of the percentile and its baseline."""
    out = []
    d = ctx.decomposition
    for name in stages:
        v = ctx.stage(name)
        if v is None or d is None:
            continue
        base = f", baseline {ms(v.baseline)}" if v.baseline is not None else ""
        out.append(
            Evidence(
                signal=f"stage.{name}",
                value=round(v.seconds * 1000, 1),
                detail=f"{ms(v.seconds)} of the p{d.percentile:g} {d.metric} ({ms(d.total)}){base}",
                source="metric" if d.source == "engine_histograms" else "span",
                threshold=None if v.baseline is None else round(v.baseline * 1000, 1),
            )
        )
    return tuple(out)


def gauge_evidence(g: GaugeStats, detail: str, threshold: float | None = None) -> Evidence:
    return Evidence(
        signal=g.metric,
        value=round(g.max, 3),
        detail=f"{detail} (mean {g.mean:.3g}, max {g.max:.3g}, trend {g.slope:+.3g}/s)",
        source="metric",
        threshold=threshold,
    )


def finding(
    rule: Rule,
    ctx: DiagnosisContext,
    *,
    stage: str | None,
    confidence: float,
    summary: str,
    evidence: Iterable[Evidence],
    impact: float,
    metric: str | None = None,
    next_steps: Iterable[str] = (),
    moves: Iterable[StageMove] = (),
) -> Finding:
    d = ctx.decomposition
    return Finding(
        category=rule.category,
        stage=None if stage is None else as_stage(stage),
        confidence=round(min(max(confidence, 0.0), T.MAX_CONFIDENCE), 3),
        summary=summary,
        evidence=tuple(evidence),
        next_steps=tuple(next_steps),
        impact=max(impact, 0.0),
        metric=metric or (d.metric if d is not None else None),
        rule=rule.name,
        moves=tuple(moves),
    )
