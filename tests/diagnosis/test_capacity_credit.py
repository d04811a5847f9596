"""A full KV cache that is load-driven (more requests per replica, none heavier) is how a
replica shortfall shows in the engine: beside a capacity cause it must not outrank it
(issue 14, repair 2: rank by what explains the excess)."""

from __future__ import annotations

from dataclasses import dataclass

from builders import T0, make_capture, make_request
from diagnosis.scenes import context, decomposition, slo
from tailtriage.diagnosis import diagnose
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.diagnosis.rules_engine import LOAD_DRIVEN
from tailtriage.model.vocabulary import Category

BASE = {"ingress": 0.003, "engine_queue": 0.005, "prefill": 0.09}
INC = {"ingress": 0.003, "engine_queue": 0.15, "prefill": 0.09}


@dataclass(frozen=True)
class Fixed:
    """A rule that reports one prepared finding (the two rules' outputs, as measured)."""

    found: Finding
    name: str = "fixed"
    category: Category = "kv_cache_pressure"

    def evaluate(self, ctx: DiagnosisContext) -> tuple[Finding, ...]:
        return (self.found,)


def _kv(load_driven: bool) -> Finding:
    ev = [Evidence("vllm:kv_cache_usage_perc", 0.99, "KV-cache usage", source="metric")]
    if load_driven:
        ev.append(Evidence(LOAD_DRIVEN, True, "arrivals per replica grew", source="metric"))
    return Finding("kv_cache_pressure", "engine_queue", 0.47, "KV full", tuple(ev), impact=0.145)


def _lag() -> Finding:
    # a capacity rule claims only part of the queue (the rest it leaves to the engine causes)
    return Finding("scaling_lag", "engine_queue", 0.66, "HPA late", impact=0.07)


def _rank(load_driven: bool) -> list[Finding]:
    ctx = context(
        make_capture([make_request("r", T0 + 400.0)]),
        [slo("ttft", 0.13, sum(INC.values()))],
        decomposition(INC, BASE),
    )
    return list(diagnose(ctx, [Fixed(_kv(load_driven)), Fixed(_lag())]))


def test_a_load_driven_full_cache_ranks_below_the_capacity_cause() -> None:
    found = _rank(load_driven=True)
    assert [f.category for f in found] == ["scaling_lag", "kv_cache_pressure"]
    lag = found[0]
    assert lag.explained_share == found[1].explained_share  # it explains the cache's wait
    ev = {e.signal: e for e in lag.evidence}
    assert "replicas were short" in ev["kv_cache_pressure.load_driven"].detail


def test_a_full_cache_with_heavier_requests_keeps_its_own_rank() -> None:
    # not load-driven: the cache is its own cause, and it explains more of the excess
    found = _rank(load_driven=False)
    assert [f.category for f in found] == ["kv_cache_pressure", "scaling_lag"]
    assert all(e.signal != "kv_cache_pressure.load_driven" for e in found[1].evidence)
