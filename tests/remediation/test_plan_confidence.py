"""The planner and a model that does not reproduce the incident: low-confidence predictions
do not rank the fixes, and a fix predicted to make things worse is never recommended."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from remediation.test_plan import Toy, _worked_example_ctx
from tailtriage.diagnosis import diagnose
from tailtriage.remediation import plan
from tailtriage.remediation.forecast import Forecast, ModelFacts, SloForecast
from tailtriage.remediation.whatif import MODEL_TOLERANCE_PCT

OBSERVED = 0.8  # the worked example's observed p95 TTFT (seconds)


class Erring(Toy):
    """The toy model, answering with the facts ``whatif.Prediction.forecast`` gives: its own
    error and whether that is beyond the tolerance."""

    def __init__(self, config: Mapping[str, Any], error_pct: float) -> None:
        super().__init__(config)
        self.error_pct = error_pct

    def predict(self, overrides: Mapping[str, Any]) -> Forecast:
        plain = super().predict(overrides)
        low = abs(self.error_pct) > MODEL_TOLERANCE_PCT
        value = plain.slos["ttft_p95"].value
        facts = ModelFacts(OBSERVED, value, self.error_pct, anchored=True, low_confidence=low)
        return replace(plain, slos={"ttft_p95": SloForecast(value, facts)})


CONFIG = {"hpa.metric": "cpu", "engine.max_num_batched_tokens": 256}


def test_a_model_within_tolerance_ranks_by_prediction_and_reports_its_error() -> None:
    ctx = _worked_example_ctx()
    rems = plan(ctx, diagnose(ctx), Erring(CONFIG, 8.0))
    assert rems[0].action == "combined"  # the best predicted fix, as with the plain toy
    for r in rems:
        assert r.model_error_pct == {"ttft_p95": 8.0}
        assert r.prediction_basis == "anchored"
        # the facts stay out of the predicted values
        assert set(r.predicted) == {"ttft_p95", "throughput_change_pct"}


def test_low_confidence_predictions_do_not_rank_the_fixes() -> None:
    ctx = _worked_example_ctx()
    findings = diagnose(ctx)
    confident = plan(ctx, findings, Erring(CONFIG, 8.0))
    unsure = plan(ctx, findings, Erring(CONFIG, -62.0))
    assert all(r.prediction_basis == "low_confidence" for r in unsure)
    assert all(any("Low confidence" in c and "-62%" in c for c in r.caveats) for r in unsure)
    # ranked by the finding each fix addresses (top finding first), not by predicted value:
    # the combined fix, predicted best, no longer jumps ahead of the top finding's own fix
    assert confident[0].action == "combined"
    assert unsure[0].action != "combined"
    assert "scaling_lag" in unsure[0].addresses


def test_a_fix_predicted_worse_than_observed_is_never_recommended() -> None:
    ctx = _worked_example_ctx()

    class Backfires(Erring):
        def predict(self, overrides: Mapping[str, Any]) -> Forecast:
            out = super().predict(overrides)
            if "hpa.metric" in overrides:  # this model says the HPA change backfires
                slo = replace(out.slos["ttft_p95"], value=1.5 * OBSERVED)
                out = replace(out, slos={"ttft_p95": slo})
            return out

    rems = plan(ctx, diagnose(ctx), Backfires(CONFIG, 3.0))
    worse = [r for r in rems if r.predicted["ttft_p95"] > OBSERVED]
    assert worse, "the stand-in model must predict some fix worse than observed"
    for r in worse:
        assert not r.recommended
        assert any(c.startswith("Not recommended") for c in r.caveats)
    assert rems[0].recommended and rems[0].predicted["ttft_p95"] < OBSERVED
    # the ones that are not recommended come last
    flags = [r.recommended for r in rems]
    assert flags == sorted(flags, reverse=True)


def test_a_fix_without_a_prediction_is_never_the_recommended_headline() -> None:
    """A what-if that fails (the stack has no such setting, the run raised) leaves the fix
    without a prediction: it must not be recommended, nor ranked above any predicted fix,
    however well its finding ranks (the rollout regression of the stop-13 merges)."""
    from tailtriage.remediation import headline

    ctx = _worked_example_ctx()
    findings = diagnose(ctx)

    class Fails(Erring):
        def predict(self, overrides: Mapping[str, Any]) -> Forecast | None:
            if "hpa.metric" in overrides:  # the top finding's own fix cannot be replayed
                return None
            return super().predict(overrides)

    rems = plan(ctx, findings, Fails(CONFIG, 3.0))
    blind = [r for r in rems if not r.predicted]
    assert blind, "the stand-in must leave some fix unpredicted"
    assert "scaling_lag" in blind[0].addresses
    for r in blind:
        assert not r.recommended
        assert any(c.startswith("Not recommended: no predicted effect") for c in r.caveats)
    first_blind = rems.index(blind[0])
    assert all(r.predicted for r in rems[:first_blind]) and first_blind > 0
    best = headline(rems, tuple(s.spec for s in ctx.slos))
    assert best is None or best.predicted
    assert next(r for r in rems if r.recommended).predicted


class Inert(Erring):
    """A low-confidence model whose replay of the top finding's own fix (the HPA metric) is
    its baseline replay, unchanged: the shape of FP8 weights on a step time fitted without
    the model's shape (the realistic corpus' ``quantization`` headlines, issue 15)."""

    def predict(self, overrides: Mapping[str, Any]) -> Forecast:
        out = super().predict(overrides)
        base = Toy.predict(self, {}).slos["ttft_p95"].value
        value = base if "hpa.metric" in overrides else out.slos["ttft_p95"].value
        facts = ModelFacts(OBSERVED, value, self.error_pct, True, True, baseline=base)
        return replace(out, slos={"ttft_p95": SloForecast(value, facts)})


def test_a_fix_predicted_to_change_nothing_is_never_the_headline() -> None:
    ctx = _worked_example_ctx()
    findings = diagnose(ctx)
    # without the HPA fix's no-change answer it ranks first (top finding's own fix)
    assert "hpa.metric" in plan(ctx, findings, Erring(CONFIG, -62.0))[0].parameters
    rems = plan(ctx, findings, Inert(CONFIG, -62.0))
    inert = [r for r in rems if r.action == "hpa_metric"]
    assert inert, "the stand-in must propose the HPA fix"
    for r in inert:
        assert not r.recommended
        assert any("predicts no change" in c for c in r.caveats)
    # every fix the model predicts to move the percentile ranks before every one it does not
    base = Toy(CONFIG).predict({}).slos["ttft_p95"].value
    moves = [r.predicted["ttft_p95"] != base for r in rems if r.predicted]
    assert any(moves) and moves == sorted(moves, reverse=True)
    assert rems[0].action != "hpa_metric" and rems[0].predicted["ttft_p95"] != base


def test_a_model_trusted_for_a_thin_sample_says_so_beside_each_fix() -> None:
    """Beyond the tolerance but inside the observed percentile's interval: ranked as
    confident, each fix saying how little the sample could check."""
    ctx = _worked_example_ctx()

    class ThinSample(Erring):
        def predict(self, overrides: Mapping[str, Any]) -> Forecast:
            out = super().predict(overrides)
            s = out.slos["ttft_p95"]
            assert s.facts is not None
            facts = replace(s.facts, low_confidence=False, within_interval=(0.5, 2.4))
            return replace(out, slos={"ttft_p95": replace(s, facts=facts)})

    rems = plan(ctx, diagnose(ctx), ThinSample(CONFIG, 60.0))
    assert rems[0].action == "combined"  # ranked by its prediction, as a confident model
    for r in rems:
        assert r.prediction_basis == "anchored"
        assert not any("Low confidence" in c for c in r.caveats)
        assert any("+60%" in c and "500-2400 ms" in c for c in r.caveats), r.caveats
