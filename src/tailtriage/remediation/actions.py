"""A remediation: a concrete change with its predicted effect and the config to apply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tailtriage.model.vocabulary import ActionName, Category


@dataclass(frozen=True)
class Remediation:
    action: ActionName
    addresses: tuple[Category, ...]  # categories it fixes
    summary: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    #: predicted values: "<metric>_p<N>" -> seconds, and "throughput_change_pct" -> percent
    predicted: Mapping[str, float] = field(default_factory=dict)
    config: str = ""  # YAML / flags to copy
    caveats: tuple[str, ...] = ()  # e.g. accuracy risk of quantization, TTFT cost of bigger batches
    #: per SLO key (``ttft_p95``): the calibrated baseline against the observed value, percent
    #: (the model's own error, which the prediction carries)
    model_error_pct: Mapping[str, float] = field(default_factory=dict)
    #: how ``predicted`` was obtained: "anchored" (observed x replay_after / replay_before),
    #: "raw" (the replay itself), "low_confidence" (anchored, but the model misses the
    #: observation by more than the tolerance: not used for ranking); "" without a model
    prediction_basis: str = ""
    #: False when the prediction says the change makes an SLO percentile worse than observed
    recommended: bool = True
