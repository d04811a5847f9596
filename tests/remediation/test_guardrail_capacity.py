"""Guardrail (issue 14, repair 8): a fix that adds GPUs never ranks first without proven
compute saturation, and a fix predicted to leave the SLO breached is never the headline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnosis.scenes import context, decomposition, slo
from diagnosis.stack import FLEET_HASH, fleet_requests, in_incident, pod_gauge, pods
from tailtriage.diagnosis import diagnose, saturation_proof
from tailtriage.model.vocabulary import ActionName
from tailtriage.remediation import headline, plan
from tailtriage.remediation.actions import Remediation
from tailtriage.remediation.forecast import Forecast
from tailtriage.remediation.plan import tentative
from tailtriage.renderers import render
from tailtriage.report import Report

FLEET = pods(FLEET_HASH, 2, seed=5)
STAGES = {"ingress": 0.03, "engine_queue": 0.02, "prefill": 0.12}


class GpuHungry:
    """A model of the stack in which only more GPUs meet the TPOT SLO: a wider tensor-parallel
    group halves it; smaller batches and FP8 help, but not enough."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {"gpu.tp": 2, "engine.max_num_seqs": 256}

    def current(self, key: str) -> Any:
        return self.config.get(key)

    def predict(self, overrides: Mapping[str, Any]) -> Forecast:
        tpot = 0.045
        if int(overrides.get("gpu.tp", 2)) > 2:
            tpot = 0.018
        if "engine.max_num_seqs" in overrides:
            tpot = 0.034
        if "model.dtype" in overrides or "model.kv_dtype" in overrides:
            tpot = min(tpot, 0.031)
        return Forecast.of({"tpot_p95": tpot, "throughput_change_pct": -3.0})


def _memory_bound_decode_on_tp2() -> Any:
    """A TPOT breach on a TP=2 fleet (two DCGM ``gpu`` labels per pod): HBM busy, the running
    batch doubled, GPUs far from saturated in the compute sense (no queue)."""
    cap = fleet_requests(
        FLEET,
        per_window=600,
        baseline_stages={**STAGES, "decode": 3.0},
        incident_stages={**STAGES, "decode": 9.0},
        seed=9,
    )
    rows = []
    for gpu in ("0", "1"):
        rows += pod_gauge(
            "DCGM_FI_PROF_DRAM_ACTIVE",
            FLEET,
            lambda p, t, r: 0.86 if in_incident(t) else 0.5,
            extra_labels={"gpu": gpu, "modelName": "NVIDIA A100-SXM4-80GB"},
        )
        rows += pod_gauge(
            "DCGM_FI_PROF_SM_ACTIVE",
            FLEET,
            lambda p, t, r: 0.55,
            extra_labels={"gpu": gpu, "modelName": "NVIDIA A100-SXM4-80GB"},
        )
    rows += pod_gauge(
        "vllm:num_requests_running", FLEET, lambda p, t, r: 120.0 if in_incident(t) else 50.0
    )
    rows += pod_gauge("vllm:num_requests_waiting", FLEET, lambda p, t, r: 0.0)
    return context(cap, [slo("tpot", 0.03, 0.045)], decomposition(STAGES, STAGES), series_rows=rows)


def test_more_gpus_never_rank_first_without_proven_saturation() -> None:
    ctx = _memory_bound_decode_on_tp2()
    findings = diagnose(ctx)
    assert findings[0].category == "decode_memory_bound", [f.category for f in findings]
    assert not saturation_proof(ctx).proven
    rems = plan(ctx, findings, GpuHungry())
    tp = next(r for r in rems if r.action == "tensor_parallel")
    assert tp.parameters["gpu.tp"] == 4
    # predicted best by far, yet ranked after every fix that keeps the fleet's GPUs
    assert tp.predicted["tpot_p95"] == min(r.predicted["tpot_p95"] for r in rems)
    assert rems[-1] is tp
    assert not tp.recommended
    assert any("compute saturation is not proven" in c for c in tp.caveats)
    for r in rems:
        assert "tensor_parallel" not in r.parameters.get("combined", ())


def test_no_headline_fix_when_none_is_predicted_to_meet_the_slo() -> None:
    ctx = _memory_bound_decode_on_tp2()
    findings = diagnose(ctx)
    rems = plan(ctx, findings, GpuHungry())
    assert headline(rems, [s.spec for s in ctx.slos]) is None
    report = Report("triage", ctx.slos, ctx.windows, None, findings=findings, remediations=rems)
    assert "No fix predicted to meet the SLO" in render(report, "terminal")
    page = render(report, "html")
    assert "No fix predicted to meet the SLO" in page and "Top recommended fix" not in page


def _rem(action: ActionName, tpot: float, basis: str) -> Remediation:
    return Remediation(
        action,
        ("decode_memory_bound",),
        f"{action} (test)",
        predicted={"tpot_p95": tpot},
        model_error_pct={"tpot_p95": -48.0 if basis == "low_confidence" else 3.0},
        prediction_basis=basis,
    )


def test_a_low_confidence_fix_that_meets_the_slo_is_named_as_a_direction() -> None:
    # the model misses the incident, so nothing is headlined - but the report must not say
    # "no fix predicted to meet the SLO" beside a listed fix that meets it
    ctx = _memory_bound_decode_on_tp2()
    rems = (_rem("max_num_seqs", 0.025, "low_confidence"), _rem("kv_cache_dtype", 0.04, "anchored"))
    slos = [s.spec for s in ctx.slos]
    assert headline(rems, slos) is None
    assert tentative(rems, slos) is rems[0]
    report = Report("triage", ctx.slos, ctx.windows, None, remediations=rems)
    text = render(report, "terminal")
    assert "No confident prediction" in text and "No fix predicted" not in text
    assert "max_num_seqs is predicted to meet the SLO" in " ".join(text.split())
    page = render(report, "html")
    assert "No confident prediction" in page and "No fix predicted" not in page


def test_a_confident_fix_is_headlined_before_any_tentative_one() -> None:
    ctx = _memory_bound_decode_on_tp2()
    rems = (
        _rem("max_num_seqs", 0.025, "low_confidence"),
        _rem("kv_cache_dtype", 0.028, "anchored"),
    )
    slos = [s.spec for s in ctx.slos]
    assert headline(rems, slos) is rems[1]
    assert tentative(rems, slos) is None
    text = render(Report("triage", ctx.slos, ctx.windows, None, remediations=rems), "terminal")
    assert "Recommended fix: kv_cache_dtype" in text and "No confident prediction" not in text


def test_a_fix_held_only_by_the_accuracy_gate_is_named_with_the_gate() -> None:
    """An FP8 KV cache is the only fix predicted to meet the SLO, and it waits for an accuracy
    check: the report names it with that check, not "no fix predicted to meet the SLO" above
    a listed fix that meets it; a partial fix that needs no check changes nothing."""
    from dataclasses import replace

    from tailtriage.remediation.plan import ACCURACY_GATE_CAVEAT, accuracy_held

    ctx = _memory_bound_decode_on_tp2()
    gated = replace(
        _rem("kv_cache_dtype", 0.025, "anchored"),
        recommended=False,
        caveats=(ACCURACY_GATE_CAVEAT,),
    )
    rems = (gated, _rem("max_num_seqs", 0.04, "anchored"))
    slos = [s.spec for s in ctx.slos]
    assert headline(rems, slos) is None and tentative(rems, slos) is None
    assert accuracy_held(rems, slos) is gated
    report = Report("triage", ctx.slos, ctx.windows, None, remediations=rems)
    text = " ".join(render(report, "terminal").split())
    assert "Accuracy check first: kv_cache_dtype is predicted to meet the SLO" in text
    assert "tailtriage quantgate" in text
    page = render(report, "html")
    assert "Accuracy check first" in page
    # the same fix predicted to leave the SLO breached: nothing meets it, and the report says so
    short = (replace(gated, predicted={"tpot_p95": 0.04}), rems[1])
    assert accuracy_held(short, slos) is None
    assert "No fix predicted to meet the SLO" in render(
        Report("triage", ctx.slos, ctx.windows, None, remediations=short), "terminal"
    )
