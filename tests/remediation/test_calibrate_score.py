"""The calibration's replay score: the user's SLOs over the incident weigh as much as the
whole capture's percentiles, so a step model that misses the SLO's own metric loses."""

from __future__ import annotations

import math

from tailtriage.remediation.calibrate.score import CHECK, bias_of, score_of

CAPTURE_KEYS = [f"{m}_p{p:g}" for m, p in CHECK]


def test_a_candidate_missing_the_slo_loses_to_one_missing_both_less() -> None:
    # the whole capture reproduced exactly, the SLO's TPOT 40 % fast ...
    exact_capture = dict.fromkeys(CAPTURE_KEYS, 0.0) | {"slo:tpot_p95": -40.0}
    # ... against 20 % slow everywhere and the SLO 10 % fast
    balanced = dict.fromkeys(CAPTURE_KEYS, 20.0) | {"slo:tpot_p95": -10.0}
    assert score_of(balanced) < score_of(exact_capture)


def test_without_a_target_the_capture_alone_scores() -> None:
    assert score_of(dict.fromkeys(CAPTURE_KEYS, 0.0)) == 0.0
    assert score_of({"slo:ttft_p95": 0.0}) == 0.0
    assert score_of({}) == math.inf
    # twice too slow and half as fast are equally wrong
    assert score_of({"ttft_p50": 100.0}) == score_of({"ttft_p50": -50.0})


def test_bias_says_which_way_the_replay_is_off() -> None:
    assert bias_of({"ttft_p50": 30.0, "slo:ttft_p95": 10.0}) > 0
    assert bias_of({"ttft_p50": -30.0, "slo:ttft_p95": -10.0}) < 0
    assert bias_of({}) == 0.0
