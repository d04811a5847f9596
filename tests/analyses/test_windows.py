"""Percentiles over time bins, and the incident / baseline windows."""

from __future__ import annotations

import numpy as np
import pytest
from chdb_store import ChdbStore
from hypothesis import given
from hypothesis import strategies as st

from builders import T0, capture_from_arrays
from tailtriage.analyses import windows as W
from tailtriage.analyses.metrics import metric_source
from tailtriage.analyses.results import PercentilePoint, SloSpec
from tailtriage.store import DuckDBStore


@pytest.mark.parametrize(
    ("n", "duration", "expected"),
    [
        (100_000, 3600.0, 30.0),  # plenty of requests: the default 30 s
        (1_000, 3600.0, 120.0),  # ~20 requests per bin at least: 72 s -> 120 s
        (300, 29.0, 5.0),  # a short run: at least 8 bins when requests allow (3.6 s -> 5 s)
        (10_000_000, 864_000.0, 7_200.0),  # ten days: at most 200 bins (4320 s -> 2 h)
    ],
)
def test_bin_width_adapts(n: int, duration: float, expected: float) -> None:
    assert W.bin_width(n, duration) == expected


@given(st.integers(1, 10**7), st.floats(1.0, 10**6))
def test_bin_width_bounds(n: int, duration: float) -> None:
    w = W.bin_width(n, duration)
    assert duration / w <= W.MAX_BINS + 1e-9
    assert w >= min(W.DEFAULT_BIN, duration / W.MIN_BINS) - 1e-9
    assert w in W.NICE_WIDTHS or (w % 86400 == 0)


def _capture(n: int = 3000, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    arrival = T0 + np.sort(rng.uniform(0, 600, n))
    bad = (arrival - T0 >= 300) & (arrival - T0 < 450)
    stages = {
        "ingress": np.full(n, 0.02),
        "prefill": np.where(bad, rng.uniform(0.6, 1.0, n), rng.uniform(0.1, 0.3, n)),
        "decode": np.full(n, 1.0),
    }
    return capture_from_arrays(arrival, stages), arrival, stages


@pytest.mark.parametrize("engine", ["duckdb", "clickhouse"])
def test_series_bins_equal_numpy_per_bin(engine: str) -> None:
    cap, arrival, stages = _capture()
    store = DuckDBStore(cap) if engine == "duckdb" else ChdbStore(cap)
    src = metric_source(store, "ttft")
    series = W.percentile_series(store, src, [50, 95, 99], T0, 30.0)
    ttft = stages["ingress"] + stages["prefill"]
    assert len(series) == 20
    for pt in series:
        inside = (arrival >= pt.start) & (arrival < pt.end)
        assert pt.count == int(inside.sum())
        want = np.percentile(ttft[inside], [50, 95, 99])
        assert [v for _, v in pt.values] == pytest.approx(list(want), rel=1e-12)


def test_detects_the_breaching_stretch_and_the_healthy_baseline_before_it() -> None:
    cap, _, _ = _capture()
    store = DuckDBStore(cap)
    src = metric_source(store, "ttft")
    series = W.percentile_series(store, src, [95], T0, 30.0)
    rng = W.arrival_range(store, src)
    assert rng is not None
    spec = SloSpec("ttft", 95.0, 0.5)
    found = W.detect_windows(series, W.bin_breaches(series, [spec]), rng)
    assert found.windows.incident == (T0 + 300, T0 + 450)
    assert found.windows.baseline == (T0, T0 + 300)
    assert found.windows.detected


def _pts(flags: list[bool], counts: list[int] | None = None) -> list[PercentilePoint]:
    counts = counts or [10] * len(flags)
    return [
        PercentilePoint(T0 + 10 * i, T0 + 10 * (i + 1), c, ((95.0, 1.0 if f else 0.1),))
        for i, (f, c) in enumerate(zip(flags, counts, strict=True))
    ]


def _detect(flags: list[bool], counts: list[int] | None = None) -> W.DetectedWindows:
    pts = _pts(flags, counts)
    rng = W.TimeRange(pts[0].start, pts[-1].end - 1, sum(p.count for p in pts))
    return W.detect_windows(pts, W.bin_breaches(pts, [SloSpec("ttft", 95.0, 0.5)]), rng)


def test_one_healthy_bin_does_not_split_an_incident() -> None:
    got = _detect([False, False, True, False, True, True, False])
    assert got.windows.incident == (T0 + 20, T0 + 60)
    assert got.windows.baseline == (T0, T0 + 20)


def test_the_incident_with_most_requests_wins() -> None:
    got = _detect([True, False, False, True, True, False], [50, 10, 10, 10, 10, 10])
    assert got.windows.incident == (T0, T0 + 10)


def test_noise_just_over_the_line_loses_to_a_real_breach() -> None:
    """Two busy baseline bins 1-10 % over the threshold must not win over a quieter stretch at
    twice it (a cold start's last minute, after a noisy baseline)."""
    spec = SloSpec("ttft", 95.0, 0.44)
    values = [0.30, 0.444, 0.30, 0.491, 0.30, 0.30, 0.30, 0.82, 1.54]
    counts = [200, 212, 208, 234, 220, 400, 450, 508, 139]
    pts = [
        PercentilePoint(T0 + 30 * i, T0 + 30 * (i + 1), c, ((95.0, v),))
        for i, (v, c) in enumerate(zip(values, counts, strict=True))
    ]
    rng = W.TimeRange(pts[0].start, pts[-1].end - 1, sum(counts))
    got = W.detect_windows(pts, W.bin_breaches(pts, [spec]), rng, spec)
    assert got.windows.incident == (T0 + 210, T0 + 270)
    # without the SLO the stretch with more requests wins, as before
    plain = W.detect_windows(pts, W.bin_breaches(pts, [spec]), rng)
    assert plain.windows.incident == (T0 + 30, T0 + 120)


def test_a_load_rise_absorbed_before_the_breach_is_not_baseline() -> None:
    """Arrivals doubled 60 s before the SLO broke: the baseline is the load before the rise,
    and a note says so (the surge is what every capacity rule compares against)."""
    got = _detect([False] * 10 + [True] * 3, [200] * 4 + [400] * 6 + [400] * 3)
    assert got.windows.incident == (T0 + 100, T0 + 130)
    assert got.windows.baseline == (T0, T0 + 40)
    assert any("arrivals rose 60 s before" in n for n in got.notes)


def test_poisson_noise_and_a_short_history_keep_the_whole_baseline() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        counts = [int(c) for c in rng.poisson(30, 10)] + [30, 30]
        got = _detect([False] * 10 + [True] * 2, counts)
        assert got.windows.baseline == (T0, T0 + 100), counts
    # a rise after fewer than MIN_BASELINE_BINS bins leaves too little before it to compare
    got = _detect([False] * 4 + [True] * 2, [100, 100, 400, 400, 400, 400])
    assert got.windows.baseline == (T0, T0 + 40)


def test_incident_at_the_start_takes_the_baseline_after_it_and_says_so() -> None:
    got = _detect([True, True, False, False])
    assert got.windows.incident == (T0, T0 + 20)
    assert got.windows.baseline == (T0 + 20, T0 + 40)
    assert any("after" in n for n in got.notes)


def test_breach_everywhere_leaves_no_baseline_and_says_so() -> None:
    got = _detect([True, True, True])
    assert got.windows.baseline is None
    assert any("no healthy baseline" in n for n in got.notes)


def test_no_breach_makes_the_whole_capture_the_incident() -> None:
    got = _detect([False, False, False])
    assert got.windows.incident[0] == T0 and got.windows.baseline is None
    assert any("no time bin breaches" in n for n in got.notes)


def test_empty_bins_do_not_make_a_baseline() -> None:
    got = _detect([False, True, True], [0, 10, 10])
    assert got.windows.baseline is None


def test_baseline_before_a_given_incident() -> None:
    pts = _pts([False, False, True, False, True, True])
    breaches = W.bin_breaches(pts, [SloSpec("ttft", 95.0, 0.5)])
    got = W.baseline_before(pts, breaches, (T0 + 40, T0 + 60))
    assert got.windows.baseline == (T0 + 30, T0 + 40)
    assert not got.windows.detected
    none = W.baseline_before(pts, breaches, (T0 + 5, T0 + 60))
    assert none.windows.baseline is None and none.notes
