"""Diagnosis: rules from analysis results and capture signals to ranked, evidence-backed
Findings (design sections 1.3 and 3.2)."""

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
