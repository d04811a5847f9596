"""A remediation: a concrete change with its predicted effect and the config to apply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Remediation:
    action: str  # one of model.ACTIONS
    addresses: tuple[str, ...]  # categories it fixes
    summary: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    #: predicted values: "<metric>_p<N>" -> seconds, and "throughput_change_pct" -> percent
    predicted: Mapping[str, float] = field(default_factory=dict)
    config: str = ""  # YAML / flags to copy
    caveats: tuple[str, ...] = ()  # e.g. accuracy risk of quantization, TTFT cost of bigger batches
