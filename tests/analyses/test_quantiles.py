"""Quantiles: exact percentiles with order-statistic CIs, PromQL histogram_quantile."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from support import DATA
from tailtriage.analyses import quantiles as Q

CASES_FILE = DATA / "prometheus" / "histogram_quantile_cases.json"


def _f(v: Any) -> float:
    return float(v.replace("Inf", "inf")) if isinstance(v, str) else float(v)


def _cases() -> list[dict[str, Any]]:
    return list(json.loads(Path(CASES_FILE).read_text())["cases"])


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_histogram_quantile_matches_prometheus(case: dict[str, Any]) -> None:
    got = Q.histogram_quantile(_f(case["q"]), case["buckets"])
    want = _f(case["expected"])
    if math.isnan(want):
        assert math.isnan(got.value)
    elif math.isinf(want):
        assert got.value == want
    else:  # promqltest's relative epsilon
        assert got.value == want or abs(got.value - want) / (abs(got.value) + abs(want)) < 1e-6
    if case["annotation"] == "info":  # Prometheus flags the non-monotonic input it repaired
        assert got.forced_monotonic


def test_all_77_prometheus_cases_are_present() -> None:
    assert len(_cases()) == 77


def test_histogram_quantile_bounds_the_true_value() -> None:
    rng = np.random.default_rng(3)
    samples = rng.lognormal(np.log(0.3), 0.6, 20_000)
    les = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5, 7.5, 10]
    buckets = [(le, float((samples <= le).sum())) for le in les] + [("+Inf", float(samples.size))]
    for p in (50, 90, 95, 99):
        est = Q.histogram_quantile(p / 100, buckets)
        true = np.percentile(samples, p)
        assert est.lower <= true <= est.upper
        assert est.lower <= est.value <= est.upper
    wide = Q.histogram_quantile(0.99, buckets)  # lands in vLLM's 1.0 .. 2.5 s bucket
    assert (wide.lower, wide.upper) == (1.0, 2.5)
    assert wide.relative_width > 0.5


def test_histogram_quantile_in_inf_bucket_reports_open_upper_bound() -> None:
    est = Q.histogram_quantile(0.99, [(0.5, 10.0), (1.0, 50.0), ("+Inf", 100.0)])
    assert est.value == 1.0 and est.lower == 1.0 and math.isinf(est.upper)


def test_exact_percentile_is_numpy_type7() -> None:
    x = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert Q.percentile(x, 50) == 3.0
    assert Q.percentile(x, 90) == pytest.approx(4.6)  # 1 + 0.9*4 = 4.6 -> between 4 and 5
    assert math.isnan(Q.percentile([], 95))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=300),
    st.lists(st.floats(0, 100), min_size=2, max_size=8),
)
def test_quantiles_are_monotone_in_p(values: list[float], ps: list[float]) -> None:
    ps = sorted(ps)
    got = Q.percentiles(values, ps)
    assert all(a <= b for a, b in itertools.pairwise(got))
    assert min(values) <= got[0] and got[-1] <= max(values)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2000), st.sampled_from([50.0, 90.0, 95.0, 99.0]))
def test_ci_ranks_agree_with_scipy_quantile_test(n: int, p: float) -> None:
    x = np.arange(1, n + 1, dtype=float)  # the r-th order statistic is r
    lo, hi = Q.ci_ranks(n, p)
    ci = stats.quantile_test(x, q=float(np.percentile(x, p)), p=p / 100).confidence_interval()
    # scipy reports an end that does not exist as NaN or an infinity; we report None
    assert lo == (int(ci.low) if math.isfinite(ci.low) else None)
    assert hi == (int(ci.high) if math.isfinite(ci.high) else None)


def test_ci_covers_the_true_quantile_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(11)
    true = float(np.exp(stats.norm.ppf(0.95)))  # p95 of a standard lognormal
    hits = 0
    for _ in range(400):
        est = Q.estimate(rng.lognormal(0, 1, 500), 95)
        assert est.ci_low is not None and est.ci_high is not None
        hits += est.ci_low <= true <= est.ci_high
    assert hits / 400 >= 0.91  # nominal >= 0.95; a loose bound keeps the test honest, not flaky


@pytest.mark.parametrize(("p", "need"), [(95.0, 72), (99.0, 368), (50.0, 6)])
def test_min_count_is_where_the_two_sided_ci_starts_to_exist(p: float, need: int) -> None:
    assert Q.min_count(p) == need
    assert None in Q.ci_ranks(need - 1, p)
    assert None not in Q.ci_ranks(need, p)


def test_too_few_samples_warn_with_the_minimum_count() -> None:
    est = Q.estimate(np.linspace(0.1, 1.0, 50), 99)
    assert est.warning is not None and "368" in est.warning and "50" in est.warning
    assert est.ci_high is None  # no order statistic can bound p99 from above with 50 samples
    assert Q.estimate(np.linspace(0.1, 1.0, 400), 99).warning is None
