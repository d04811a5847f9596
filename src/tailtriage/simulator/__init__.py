"""The serving-stack simulator: arrivals, ingress, gateway, autoscaler and pod start-up,
continuous-batching engines with a KV cache, and a GPU step-time model; emits a Capture.

Start with :func:`simulate` (``simulate("canonical-example")``); scenarios are YAML files
(``docs/scenarios.md``); :func:`apply_overrides` changes settings by dotted key.
"""

from tailtriage.simulator.batching import BatchLimits, ContinuousBatcher, Sequence
from tailtriage.simulator.catalog import builtin_scenarios, resolve_scenario, simulate
from tailtriage.simulator.config import (
    ScenarioConfig,
    apply_overrides,
    load_scenario,
    parse_override,
)
from tailtriage.simulator.steptime import (
    FittedStepTime,
    RooflineStepTime,
    StepTimeModel,
)

__all__ = [
    "BatchLimits",
    "ContinuousBatcher",
    "FittedStepTime",
    "RooflineStepTime",
    "ScenarioConfig",
    "Sequence",
    "StepTimeModel",
    "apply_overrides",
    "builtin_scenarios",
    "load_scenario",
    "parse_override",
    "resolve_scenario",
    "simulate",
]
