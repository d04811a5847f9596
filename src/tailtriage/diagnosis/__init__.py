"""Diagnosis: rules from analysis results and capture signals to ranked, evidence-backed
Findings (design sections 1.3 and 3.2).

``diagnose.diagnose(ctx)`` runs every registered rule and ranks what they find; its parts:

* ``diagnose``          build the context, run the rules, rank the findings
* ``context``           what a rule sees (SLO results, windows, decomposition, signals)
* ``signals``           the facts rules reason over, read once from the capture by SQL
* ``metrics``           which exported metric names carry each signal
* ``rule``              the Rule protocol, its registry and the helpers rules share
* ``findings``          Findings and the evidence behind them
* ``ranking``           rank findings by what they explain, and say why the first is first
* ``thresholds``        every threshold the rules decide with, named, with why
* ``rules_path``        the request path before the engine: ingress, gateway, API server
* ``rules_capacity``    when capacity arrived: scaling lag, cold start, rollout
* ``rules_saturation``  the replicas that exist are used up
* ``rules_engine``      inside the engine: prefill, KV cache, decode, TP overhead
* ``rules_disagg``      disaggregated and cache-aware serving: KV transfer, prefix cache
* ``rules_metrics``     what engine histograms and Kubernetes decide without traces
* ``rules_metrics_engine``  engine causes from histograms alone: per-replica load, prompt tail
* ``engine_limits``     which engine resource runs out when several look stretched
* ``envoy``             Envoy time: an upstream connection queue, or the network
* ``imbalance``         load spread over replicas beyond the routing's chance spread
* ``rollout``           a rolling update, or only scaling, from kubectl output
* ``startup``           how long new replicas took to serve, and where the time went
"""

from tailtriage.diagnosis.context import DiagnosisContext, StageView
from tailtriage.diagnosis.diagnose import build_context, diagnose, rank
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rule import Rule, get, register, registered
from tailtriage.diagnosis.rules_capacity import load_aware
from tailtriage.diagnosis.rules_saturation import SaturationProof, saturation_proof
from tailtriage.diagnosis.signals import Signals, gather

__all__ = [
    "DiagnosisContext",
    "Evidence",
    "Finding",
    "Rule",
    "SaturationProof",
    "Signals",
    "StageView",
    "build_context",
    "diagnose",
    "gather",
    "get",
    "load_aware",
    "rank",
    "register",
    "registered",
    "saturation_proof",
]
