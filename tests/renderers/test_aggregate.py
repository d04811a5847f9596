"""Chart thinning keeps what matters for the tail and bounds the size."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.analyses.results import PercentilePoint
from tailtriage.renderers import _aggregate as agg


def cdf(n: int) -> tuple[tuple[float, float], ...]:
    vals = np.sort(np.random.default_rng(0).lognormal(0, 1, n))
    return tuple(zip(vals.tolist(), ((np.arange(n) + 1) / n).tolist(), strict=True))


def test_small_inputs_pass_through() -> None:
    pts = cdf(50)
    assert agg.thin_cdf(pts) is pts


@settings(max_examples=30, deadline=None)
@given(n=st.integers(agg.MAX_CDF_POINTS + 1, 20_000))
def test_thin_cdf_is_bounded_monotone_and_keeps_the_extremes(n: int) -> None:
    pts = cdf(n)
    out = agg.thin_cdf(pts)
    assert len(out) <= agg.MAX_CDF_POINTS
    assert out[0] == pts[0] and out[-1] == pts[-1]
    assert all(a[0] <= b[0] and a[1] < b[1] for a, b in itertools.pairwise(out))
    # the extreme tail is kept point for point
    k = agg.MAX_CDF_POINTS // 4
    assert out[-k:] == pts[-k:]


def test_thin_series_keeps_a_one_sample_spike() -> None:
    t = np.arange(100_000, dtype=float)
    v = np.ones_like(t)
    v[77_777] = 500.0
    out = agg.thin_series(tuple(zip(t.tolist(), v.tolist(), strict=True)))
    assert len(out) <= agg.MAX_SERIES_POINTS
    assert (77_777.0, 500.0) in out
    assert [p[0] for p in out] == sorted(p[0] for p in out)


def test_thin_percentile_series_keeps_the_worst_bin() -> None:
    pts = tuple(
        PercentilePoint(i, i + 1, 2, ((95.0, 0.1 if i != 1234 else 9.0),)) for i in range(3000)
    )
    out = agg.thin_percentile_series(pts)
    assert len(out) <= agg.MAX_PERCENTILE_BINS
    assert max(v for p in out for _, v in p.values) == 9.0
    assert sum(p.count for p in out) == 6000
    assert out[0].start == 0 and out[-1].end == 3000


def test_thin_events_keeps_every_kind() -> None:
    events = tuple((float(i), "pod_ready", f"pod/{i}", "") for i in range(10_000))
    events += ((5.5, "failed_scheduling", "pod/x", "0/3 nodes"),)
    out, note = agg.thin_events(events)
    assert len(out) == agg.MAX_EVENTS
    assert any(e[1] == "failed_scheduling" for e in out)
    assert "10,001" in note


def test_thin_replicas_keeps_the_slowest() -> None:
    reps = {f"r{i}": {"count": 1.0, "ttft_p95": float(i)} for i in range(500)}
    out, note = agg.thin_replicas(reps)
    assert set(out) == {f"r{i}" for i in range(500 - agg.MAX_REPLICAS, 500)}
    assert "ttft_p95" in note


def test_thin_waterfall_keeps_the_longest_in_time_order() -> None:
    rows = tuple(("decode", i * 0.01, 0.001 if i != 42 else 5.0, f"s{i}") for i in range(1000))
    out, _ = agg.thin_waterfall(rows)
    assert len(out) == agg.MAX_WATERFALL
    assert ("decode", 0.42, 5.0, "s42") in out
    assert [r[1] for r in out] == sorted(r[1] for r in out)
