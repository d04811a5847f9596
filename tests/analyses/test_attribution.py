"""Attribution: counterfactual percentiles and Shapley values over stages."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tailtriage.analyses.attribution import attribute, shapley_values, subset_percentiles


def _brute_shapley(v: dict[frozenset[int], float], k: int) -> list[float]:
    """Shapley values by the permutation definition (independent of the implementation)."""
    phi = [0.0] * k
    perms = list(itertools.permutations(range(k)))
    for order in perms:
        seen: set[int] = set()
        for s in order:
            before = v[frozenset(seen)]
            seen.add(s)
            phi[s] += v[frozenset(seen)] - before
    return [x / len(perms) for x in phi]


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 5), st.data())
def test_shapley_matches_the_permutation_definition(k: int, data: st.DataObject) -> None:
    vals = data.draw(st.lists(st.floats(-10, 10), min_size=2**k, max_size=2**k))
    v = np.array(vals)
    by_set = {frozenset(i for i in range(k) if m >> i & 1): v[m] for m in range(2**k)}
    assert list(shapley_values(v, k)) == pytest.approx(_brute_shapley(by_set, k), abs=1e-9)


def test_subset_percentiles_gray_code_equals_brute_force() -> None:
    rng = np.random.default_rng(2)
    base, delta = rng.random(500), rng.normal(0, 0.1, (500, 4))
    got = subset_percentiles(base, delta, 95)
    for m in range(16):
        cols = [i for i in range(4) if m >> i & 1]
        want = np.percentile(base + delta[:, cols].sum(axis=1), 95)
        assert got[m] == pytest.approx(want, abs=1e-12)


def _windows(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Baseline and incident stage matrices: incident adds a pending stage to 40 % of requests."""
    ingress = rng.gamma(4, 0.01, (2, n))
    prefill = rng.lognormal(np.log(0.3), 0.2, (2, n))
    pending = np.zeros((2, n))
    pending[1] = np.where(rng.random(n) < 0.4, rng.uniform(0.2, 0.4, n), 0.0)
    return (
        np.column_stack([ingress[0], pending[0], prefill[0]]),
        np.column_stack([ingress[1], pending[1], prefill[1]]),
    )


def test_known_answer_puts_the_breach_on_the_stage_that_changed() -> None:
    rng = np.random.default_rng(7)
    base, inc = _windows(4000, rng)
    a = attribute(
        "ttft",
        95.0,
        ("ingress", "pending", "prefill"),
        (inc.sum(1), inc),
        (base.sum(1), base),
        seed=1,
    )
    assert a is not None
    shap = dict(zip(a.stages, a.shapley, strict=True))
    cf = dict(zip(a.stages, a.counterfactual, strict=True))
    gap = a.observed - a.baseline
    assert gap > 0.2
    assert shap["pending"] == pytest.approx(gap, rel=0.1)  # pending explains the breach
    assert abs(shap["ingress"]) < 0.05 * gap and abs(shap["prefill"]) < 0.1 * gap
    assert cf["pending"] == pytest.approx(a.baseline, rel=0.05)  # pending healthy -> baseline
    assert cf["ingress"] == pytest.approx(a.observed, rel=0.05)
    # the honest resampled "all stages at baseline" lands on the baseline percentile
    assert a.resampled_baseline == pytest.approx(a.baseline, rel=0.02)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(2, 4),
    st.integers(5, 300),
    st.integers(5, 300),
    st.sampled_from([50.0, 90.0, 95.0, 99.0]),
    st.integers(0, 2**32 - 1),
)
def test_shapley_sums_to_delta_and_all_at_baseline_is_baseline(
    k: int, n: int, m: int, p: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.exponential(0.1, (n, k)) * rng.integers(0, 2, (n, k))
    y = rng.exponential(0.05, (m, k))
    names = tuple(f"s{i}" for i in range(k))
    a = attribute("ttft", p, names, (x.sum(1), x), (y.sum(1), y), seed=seed % 1000)
    assert a is not None
    assert math.fsum(a.shapley) == pytest.approx(a.observed - a.baseline, abs=1e-12)
    assert a.observed == np.percentile(x.sum(1), p)
    assert a.baseline == np.percentile(y.sum(1), p)
    # all stages at baseline is the baseline percentile: exactly by definition, and the honest
    # resampled estimate lies within the stratification step of the baseline's order statistics
    ys = np.sort(y.sum(1))
    h = p / 100 * (m - 1)
    step = math.ceil(m / len(x)) + 1
    lo_i, hi_i = max(0, math.floor(h) - step), min(m - 1, math.ceil(h) + step)
    assert a.resampled_baseline is not None
    assert ys[lo_i] - 1e-12 <= a.resampled_baseline <= ys[hi_i] + 1e-12
    # counterfactual percentiles stay inside the range the swapped samples can produce
    lo = min(x.sum(1).min(), y.sum(1).min()) - 1e-12
    hi = x.sum(1).max() + y.sum(1).max() + 1e-12
    assert all(lo <= c <= hi for c in a.counterfactual)


@settings(max_examples=25, deadline=None)
@given(arrays(np.float64, (60, 3), elements=st.floats(0, 5)))
def test_attribution_is_deterministic_for_a_seed(x: np.ndarray) -> None:
    y = x[::-1] * 0.5
    one = attribute("e2e", 95.0, ("a", "b", "c"), (x.sum(1), x), (y.sum(1), y), seed=3)
    two = attribute("e2e", 95.0, ("a", "b", "c"), (x.sum(1), x), (y.sum(1), y), seed=3)
    assert one == two


def test_no_requests_on_either_side_gives_none() -> None:
    x = np.ones((5, 2))
    assert (
        attribute("ttft", 95.0, ("a", "b"), (x.sum(1), x), (np.zeros(0), np.zeros((0, 2)))) is None
    )


def test_stages_absent_from_both_windows_are_left_out() -> None:
    x = np.column_stack([np.linspace(0.1, 1, 50), np.zeros(50)])
    y = np.column_stack([np.linspace(0.1, 0.5, 50), np.zeros(50)])
    a = attribute("ttft", 95.0, ("prefill", "pending"), (x.sum(1), x), (y.sum(1), y))
    assert a is not None and a.stages == ("prefill",)
    assert a.shapley[0] == pytest.approx(a.observed - a.baseline)
