"""Remediation: a catalog of actions with preconditions, each evaluated on the simulator
calibrated to the user's capture (``calibrate``, ``whatif``), ranked by predicted effect.

* ``actions``         a Remediation: the change, its predicted effect, the config to apply
* ``catalog``         the actions: findings addressed, preconditions, simulator overrides
* ``disagg_actions``  actions for disaggregated and cache-aware serving (registered on import)
* ``configs``         the config to copy per action: Kubernetes YAML, engine flags
* ``calibrate``       fit the simulator to the capture (a package with its own map)
* ``whatif``          replay the calibrated simulator with and without a set of changes
* ``plan``            ranked findings -> ranked remediations with predicted effects
"""

from tailtriage.remediation import disagg_actions as disagg_actions  # registers its actions
from tailtriage.remediation.actions import Remediation
from tailtriage.remediation.catalog import (
    BIGGER_BATCH_CAVEAT,
    QUANTIZATION_CAVEAT,
    Action,
    Candidate,
    candidates_for,
    for_category,
    register,
    registered,
)
from tailtriage.remediation.configs import Target
from tailtriage.remediation.plan import (
    Predictor,
    headline,
    overrides_of,
    plan,
    slo_key,
    worst_ratio,
)

__all__ = [
    "BIGGER_BATCH_CAVEAT",
    "QUANTIZATION_CAVEAT",
    "Action",
    "Candidate",
    "Predictor",
    "Remediation",
    "Target",
    "candidates_for",
    "for_category",
    "headline",
    "overrides_of",
    "plan",
    "register",
    "registered",
    "slo_key",
    "worst_ratio",
]
