"""The new pods' warm-up as the replay's ``pods.ready_warmup_*``: its span ends with the last
slow slice after Ready, and one pod's burst does not set it for the build."""

from __future__ import annotations

from tailtriage.analyses.rollout import RolloutAnalysis, WarmUp
from tailtriage.remediation.calibrate.rollout import fit_warmup

STEADY = 0.1  # seconds of engine queue + prefill at p95 after the warm-up window


def _warmup(pod: str, *slices: float | None) -> WarmUp:
    return WarmUp(pod, 0.0, 60.0, 100, max(s or 0.0 for s in slices), 100, STEADY, slices)


def _found(*warmups: WarmUp) -> RolloutAnalysis:
    return RolloutAnalysis(0.0, 1.0, "new", ("old",), (), (), warmups, None, 1, 0)


def test_span_ends_with_the_last_slow_slice() -> None:
    w = _warmup("a", 0.4, None, 0.2, 0.1, 0.1, 0.1)  # an empty slice inside the warm-up
    seconds, factor = w.slow_span(1.5) or (0.0, 0.0)
    assert seconds == 30.0
    assert 2.0 < factor < 4.0  # between the slices it covers
    assert _warmup("b", 0.1, 0.12, 0.1, 0.1, 0.1, 0.1).slow_span(1.5) is None
    assert WarmUp("c", 0.0, 60.0, 5, None, 0, None).slow_span(1.5) is None


def test_the_median_pod_sets_the_warm_up() -> None:
    fit = fit_warmup(
        _found(
            _warmup("a", 0.3, 0.3, 0.1, 0.1, 0.1, 0.1),
            _warmup("b", 0.3, 0.3, 0.1, 0.1, 0.1, 0.1),
            _warmup("burst", 0.9, 0.9, 0.9, 0.9, 0.9, 0.9),
            _warmup("warm", 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
        )
    )
    assert fit is not None
    assert fit.pods == 3  # the pod without a slow slice shows no warm-up
    assert (fit.seconds, fit.factor) == (20.0, 3.0)


def test_no_slow_pod_no_warm_up() -> None:
    assert fit_warmup(_found(_warmup("a", 0.1, 0.1, 0.11, 0.1, 0.1, 0.1))) is None
    assert fit_warmup(_found()) is None
