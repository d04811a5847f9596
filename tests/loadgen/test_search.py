"""--find-max-rate: doubling then bisection over trial runs (a fake run stands in)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tailtriage.analyses.results import SloSpec
from tailtriage.errors import ConfigError
from tailtriage.loadgen import LoadConfig
from tailtriage.loadgen.results import MetricSummary, SloOutcome, Summary
from tailtriage.loadgen.search import find_max_rate

SLO = SloSpec("ttft", 95.0, 0.5)


def _summary(ttft: float, ok_share: float = 1.0) -> Summary:
    m = MetricSummary(100, ((95.0, ttft),), ttft)
    return Summary(
        requests=100, ok=int(100 * ok_share), errors={}, duration=10.0, request_rate=10.0,
        output_token_rate=100.0, metrics={"ttft": m},
        slos=(SloOutcome(SLO, ttft, ttft < SLO.threshold),),
    )  # fmt: skip


def _cfg() -> LoadConfig:
    return LoadConfig(url="http://127.0.0.1:9", model="m", rate=1.0, duration=5.0, slos=(SLO,))


@given(st.floats(min_value=1.5, max_value=5000.0))
def test_finds_the_knee_of_a_monotone_system(capacity: float) -> None:
    """p95 TTFT explodes above ``capacity`` req/s: the answer lies below it, within the
    bisection's resolution."""
    seen: list[float] = []

    def run(cfg: LoadConfig) -> Summary:
        assert cfg.rate is not None and cfg.concurrency is None
        seen.append(cfg.rate)
        return _summary(0.1 if cfg.rate <= capacity else 2.0)

    res = find_max_rate(_cfg(), run, start_rate=1.0, bisections=6)
    assert res.best_rate is not None
    assert res.best_rate <= capacity
    # doubling brackets it in [lo, 2 lo] with lo <= c; six halvings leave lo / 64 <= c / 64
    assert capacity - res.best_rate <= capacity / 64 + 1e-9
    assert len(seen) == len(res.trials) == math.floor(math.log2(capacity)) + 2 + 6


def test_errors_fail_a_trial_and_nothing_passes() -> None:
    res = find_max_rate(_cfg(), lambda c: _summary(0.1, ok_share=0.9), start_rate=2.0)
    assert res.best_rate is None and len(res.trials) == 1


def test_needs_an_slo() -> None:
    cfg = LoadConfig(url="http://127.0.0.1:9", model="m", rate=1.0, duration=5.0)
    with pytest.raises(ConfigError):
        find_max_rate(cfg, lambda c: _summary(0.1))
