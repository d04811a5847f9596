"""A fix predicted to make the tail worse says why when its replay shows it: the autoscaler
removed pods sooner (a pod that starts faster leaves capacity idle sooner, and a scale-down
then meets the next burst with fewer pods)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from remediation.test_plan import Toy, _worked_example_ctx
from tailtriage.analyses.results import SloSpec
from tailtriage.diagnosis import diagnose
from tailtriage.model import Capture
from tailtriage.model import schema as S
from tailtriage.model.schema import make_table
from tailtriage.remediation import plan
from tailtriage.remediation.forecast import Forecast
from tailtriage.remediation.whatif import Prediction, SloPrediction, Throughput, scaled_in

SLO = SloSpec("ttft", 95.0, 0.5)


def _rescales(rows: list[tuple[float, int, int]]) -> Capture:
    """hpa_rescale events (time, replicas before, after), as the simulator records them."""
    n = len(rows)
    events = make_table(
        S.EVENTS,
        {
            "time": [t for t, _, _ in rows],
            "kind": ["hpa_rescale"] * n,
            "object_kind": ["HorizontalPodAutoscaler"] * n,
            "object_name": ["vllm"] * n,
            "reason": ["SuccessfulRescale"] * n,
            "message": [""] * n,
            "attributes": [json.dumps({"previous": a, "replicas": b}) for _, a, b in rows],
        },
    )
    return Capture(events=events)


def test_pods_scaled_in_are_counted_within_the_window_only() -> None:
    cap = _rescales([(50.0, 2, 8), (150.0, 8, 6), (160.0, 6, 3), (400.0, 3, 2)])
    assert scaled_in(cap) == 6  # 2 + 3 + 1 removed; the scale-up adds nothing
    assert scaled_in(cap, (100.0, 300.0)) == 5
    assert scaled_in(Capture()) == 0


def _prediction(baseline: float, predicted: float, scale_ins: tuple[int, int]) -> Prediction:
    tp = Throughput(served_rps=1.0, capacity_tps=1.0, requests=1, output_tokens=1)
    slo = SloPrediction(SLO, observed=baseline, baseline=baseline, predicted=predicted)
    return Prediction({}, (slo,), tp, tp, tp, seed=0, scale_ins=scale_ins)


def test_a_slower_replay_with_more_scale_ins_says_so() -> None:
    notes = _prediction(1.0, 13.0, (0, 5)).forecast(corrected=True).notes
    assert len(notes) == 1 and "removes pods sooner" in notes[0] and "5 pod(s)" in notes[0]
    # not when the autoscaler removed no more pods, nor when the change helps
    assert _prediction(1.0, 13.0, (5, 5)).forecast().notes == ()
    assert _prediction(1.0, 0.6, (0, 5)).forecast().notes == ()


def test_the_note_reaches_the_fix_it_explains() -> None:
    ctx = _worked_example_ctx()
    why = "Predicted slower because the autoscaler removes pods sooner."

    class ScalesInSooner(Toy):
        def predict(self, overrides: Mapping[str, Any]) -> Forecast:
            out: Forecast = super().predict(overrides)
            return replace(out, notes=(why,)) if "hpa.metric" in overrides else out

    rems = plan(ctx, diagnose(ctx), ScalesInSooner({"hpa.metric": "cpu",
                                                    "engine.max_num_batched_tokens": 256}))  # fmt: skip
    noted = [r for r in rems if why in r.caveats]
    assert noted and all("hpa.metric" in str(r.parameters) for r in noted)
