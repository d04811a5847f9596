"""The serving-stack simulator: arrivals, ingress, gateway, autoscaler and pod start-up,
continuous-batching engines with a KV cache, and a GPU step-time model; emits a Capture.

Start with :func:`simulate` (``simulate("canonical-example")``); scenarios are YAML files
(``docs/scenarios.md``); :func:`apply_overrides` changes settings by dotted key.

* ``config``      scenario configuration: frozen dataclasses loaded from YAML
* ``catalog``     the built-in scenarios (``scenarios/``) and :func:`simulate`
* ``workload``    arrivals and request sizes, generated up front (seeded)
* ``simulation``  the discrete-event loop over the whole stack
* ``fastforward`` decode-only stretches of an engine's steps run as one event (same capture)
* ``cluster``     pods, nodes and per-pod engine state
* ``autoscaler``  the Kubernetes HPA algorithm with KEDA-style activation
* ``batching``    a vLLM-V1-like continuous-batching scheduler with a paged KV cache
* ``steptime``    GPU step-time models: how long one engine iteration takes
* ``recorder``    what the simulation observes
* ``output``      the recorder's observations into a Capture
* ``parallel``    several independent runs at once, in forked worker processes
* ``summary``     the compact summary ``tailtriage simulate --json`` writes
* ``bundle``      a Capture written as an incident bundle in real formats
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
