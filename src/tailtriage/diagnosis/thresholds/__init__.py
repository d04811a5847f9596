"""Every threshold the rules decide with, each named and with why it has that value.

They are set from what the mechanisms do, not fitted to one capture: a significance level where
a statistical test decides, a physical limit (a KV cache at 95 % has no room for a new
sequence), or the smallest effect worth a user's attention.  A ``W_`` name is an evidence
weight: how strongly one sign alone points at the cause (a finding's confidence combines them,
``rule.combine``, so no single weaker sign decides it); a ``*_KEEP_*`` name is the share of a
confidence kept when another cause explains the same signs better.

One module per rule family; read them all as one namespace
(``from tailtriage.diagnosis import thresholds as T``; ``T.KV_FULL``):

========== ===========================================================================
shared     the evidence facts several rules test (stages, ranking, imbalance, engine
           limits, Envoy pool, start-ups), the signals gathering, the telemetry gaps
capacity   scaling lag, cold start, rollout, and their metrics-only forms
engine     compute saturation, prefill compute, KV-cache pressure, memory-bound decode,
           tensor-parallel overhead, prefill interference
path       ingress, gateway queue, API server, load imbalance, KV transfer, prefix-cache
           misses, admission control
metrics    engine causes read from histograms without traces (per-replica counts,
           the prompt-length histogram's tail)
========== ===========================================================================

A name is defined in exactly one module (``tests/diagnosis/test_thresholds.py``)."""

from __future__ import annotations

from tailtriage.diagnosis.thresholds.capacity import *  # noqa: F403
from tailtriage.diagnosis.thresholds.engine import *  # noqa: F403
from tailtriage.diagnosis.thresholds.metrics import *  # noqa: F403
from tailtriage.diagnosis.thresholds.path import *  # noqa: F403
from tailtriage.diagnosis.thresholds.shared import *  # noqa: F403
