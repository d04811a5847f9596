"""The test builders lay captures out the way every source does (so tests of others can trust
them)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import (
    T0,
    capture_from_arrays,
    make_capture,
    make_events,
    make_request,
    make_series,
)
from tailtriage.model.vocabulary import PRE_FIRST_TOKEN_STAGES, STAGES


def test_stages_run_back_to_back_and_decode_starts_at_first_token() -> None:
    r = make_request("a", T0, {"decode": 1.0, "prefill": 0.3, "ingress": 0.05, "pending": 0.2})
    cap = make_capture([r])
    rows = {s["stage"]: s for s in cap.stages.to_pylist()}
    assert rows["ingress"]["start"] == T0
    assert rows["pending"]["start"] == pytest.approx(T0 + 0.05)
    assert rows["prefill"]["start"] == pytest.approx(T0 + 0.25)
    req = cap.requests.to_pylist()[0]
    assert req["ttft"] == pytest.approx(0.55) and req["e2e"] == pytest.approx(1.55)
    assert rows["decode"]["start"] == pytest.approx(req["first_token"])


def test_token_times_span_decode() -> None:
    cap = make_capture(
        [make_request("a", T0, {"prefill": 0.1, "decode": 0.9}, output_tokens=10, token_times=True)]
    )
    times = cap.token_times["time"].to_pylist()
    assert len(times) == 10 and times[0] == pytest.approx(T0 + 0.1)
    assert times[-1] == pytest.approx(T0 + 1.0)


def test_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown stages"):
        make_request(stages={"gpu": 1.0})


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 50), st.integers(0, 2**32 - 1))
def test_arrays_builder_keeps_ttft_the_sum_of_pre_first_token_stages(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    stages = {s: rng.exponential(0.1, n) * rng.integers(0, 2, n) for s in STAGES}
    cap = capture_from_arrays(T0 + rng.uniform(0, 10, n), stages)
    ttft = cap.requests["ttft"].to_numpy()
    want = sum(stages[s] for s in PRE_FIRST_TOKEN_STAGES)
    assert ttft == pytest.approx(want)
    assert cap.stages.num_rows == sum(int((v > 0).sum()) for v in stages.values())


def test_series_and_events() -> None:
    s = make_series("vllm:num_requests_waiting", [(T0, 1), (T0 + 15, 9)], pod="p", model="m")
    assert json.loads(s["labels"][0].as_py()) == {"model": "m", "pod": "p"}
    e = make_events(
        [(T0, "pod_pending"), (T0 + 1, "hpa_rescale", {"replicas": 3})], durations={0: 42.0}
    )
    rows = e.to_pylist()
    assert rows[0]["duration"] == 42.0 and json.loads(rows[1]["attributes"])["replicas"] == 3
    assert json.loads(rows[0]["attributes"]) == {"pod": "pod-0"}
