"""Tail decomposition: band stage means that add up to the percentile; per-stage percentiles;
breakdowns by replica and prompt length."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import T0, capture_from_arrays, make_capture, make_request
from tailtriage.analyses import decomposition as D
from tailtriage.analyses.metrics import metric_percentiles, metric_source
from tailtriage.analyses.results import Decomposition, StageMove, StageValue
from tailtriage.store import DuckDBStore

PRE = ("ingress", "pending", "engine_queue", "prefill")


def _known(n: int = 5000, seed: int = 4):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    stages = {
        "ingress": rng.gamma(4, 0.0125, n),  # ~50 ms
        "pending": np.where(rng.random(n) < 0.3, rng.uniform(0.1, 0.3, n), 0.0),
        "engine_queue": rng.exponential(0.03, n),
        "prefill": rng.lognormal(np.log(0.4), 0.25, n),
        "decode": rng.uniform(1, 3, n),
    }
    cap = capture_from_arrays(T0 + np.sort(rng.uniform(0, 100, n)), stages)
    return cap, stages


def test_band_stage_means_match_the_truth_within_5_percent_or_5_ms() -> None:
    cap, stages = _known()
    store = DuckDBStore(cap)
    src = metric_source(store, "ttft")
    p95 = metric_percentiles(store, src, [95]).get(95)
    shares = D.band_shares(store, src, 95.0, p95, None)
    assert shares is not None
    # the truth, computed independently: requests between the numpy p94 and p96
    ttft = sum(stages[s] for s in PRE)
    lo, hi = np.percentile(ttft, [94, 96])
    band = (ttft >= lo) & (ttft <= hi)
    assert shares.band.count == int(band.sum()) and shares.band.band == (94.0, 96.0)
    assert p95 == pytest.approx(np.percentile(ttft, 95), rel=1e-12)
    for s in PRE:
        truth = float(stages[s][band].mean())
        assert abs(shares.shares[s] - truth) <= max(0.05 * truth, 0.005), s
    assert math.fsum(shares.shares.values()) == pytest.approx(p95, rel=1e-12)


def test_uncovered_time_goes_to_unattributed_never_dropped() -> None:
    # the engine reports a TTFT 100 ms longer than the stages cover
    reqs = [
        make_request(arrival=T0 + i, stages={"ingress": 0.05, "prefill": 0.2 + i / 1000})
        for i in range(100)
    ]
    cap = make_capture(reqs)
    rq = cap.requests
    cap = cap.replace(
        requests=rq.set_column(
            rq.schema.get_field_index("ttft"), "ttft", [[t + 0.1 for t in rq["ttft"].to_pylist()]]
        )
    )
    store = DuckDBStore(cap)
    src = metric_source(store, "ttft")
    p95 = metric_percentiles(store, src, [95]).get(95)
    shares = D.band_shares(store, src, 95.0, p95, None)
    assert shares is not None
    assert shares.shares["unattributed"] == pytest.approx(0.1, rel=0.02)
    assert shares.shares["ingress"] == pytest.approx(0.05, rel=0.02)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from((*PRE, "unattributed")), st.floats(0, 10), min_size=0),
    st.floats(0, 20),
    st.floats(0.001, 20),
)
def test_fit_to_total_adds_up_exactly(
    means: dict[str, float], band_mean: float, total: float
) -> None:
    out = D.fit_to_total(means, band_mean, total)
    assert math.fsum(out.values()) == pytest.approx(total, rel=1e-12, abs=1e-12)
    assert all(v >= -1e-12 for v in out.values())


@settings(max_examples=15, deadline=None)
@given(st.integers(20, 400), st.sampled_from([50.0, 90.0, 95.0, 99.0]), st.integers(0, 10**6))
def test_decomposition_sums_to_the_percentile(n: int, p: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    stages = {s: rng.exponential(0.1, n) * rng.integers(0, 2, n) for s in PRE}
    cap = capture_from_arrays(T0 + rng.uniform(0, 60, n), stages)
    store = DuckDBStore(cap)
    src = metric_source(store, "ttft")
    value = metric_percentiles(store, src, [p]).get(p)
    shares = D.band_shares(store, src, p, value, None)
    assert shares is not None and shares.band.count >= min(D.band_size(n), n)
    dec = D.decompose("ttft", p, shares, None)
    assert math.fsum(s.seconds for s in dec.stages) == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_stage_percentiles_are_per_stage_over_requests_that_have_it() -> None:
    cap, stages = _known()
    got = D.stage_percentiles(DuckDBStore(cap), (50.0, 95.0), None)
    pending = stages["pending"][stages["pending"] > 0]
    assert got["pending"]["p95"] == pytest.approx(np.percentile(pending, 95), rel=1e-12)
    assert got["prefill"]["p50"] == pytest.approx(np.percentile(stages["prefill"], 50), rel=1e-12)
    assert list(got) == ["ingress", "pending", "engine_queue", "prefill", "decode"]


def test_breakdown_shows_a_slow_replica_over_represented_in_the_tail() -> None:
    rng = np.random.default_rng(9)
    n = 2000
    replica = np.where(rng.random(n) < 0.1, "pod-slow", "pod-ok")
    prefill = np.where(replica == "pod-slow", 0.9, 0.2) + rng.uniform(0, 0.05, n)
    prompt = np.where(replica == "pod-slow", 3000, 200)
    cap = capture_from_arrays(
        T0 + np.arange(n) * 0.1, {"prefill": prefill}, replica=replica, prompt_tokens=prompt
    )
    store = DuckDBStore(cap)
    src = metric_source(store, "ttft")
    p95 = metric_percentiles(store, src, [95]).get(95)
    rows = {r.key: r for r in D.breakdown(store, src, "replica", (50.0, 95.0), p95, None).rows}
    slow = rows["pod-slow"]
    assert slow.share == pytest.approx((replica == "pod-slow").mean())
    assert slow.tail_share == 1.0  # every tail request came from the slow pod
    assert dict(slow.values)[50.0] > dict(rows["pod-ok"].values)[95.0]
    buckets = {r.key for r in D.breakdown(store, src, "prompt_bucket", (95.0,), p95, None).rows}
    assert buckets == {"2048-4095 tokens", "128-255 tokens"}


def test_representative_request_and_its_waterfall() -> None:
    reqs = [
        make_request(f"r{i}", T0 + i, {"ingress": 0.01, "pending": 0.001 * i, "prefill": 0.2})
        for i in range(100)
    ]
    store = DuckDBStore(make_capture(reqs))
    src = metric_source(store, "ttft")
    p95 = metric_percentiles(store, src, [95]).get(95)
    band = D.find_band(store, src, 95.0, None)
    assert band is not None
    rid = D.representative_request(store, src, band, p95)
    assert rid in ("r94", "r95")  # p95 of 0.211..0.31 lies between them
    wf = D.waterfall(store, rid)
    assert [w[0] for w in wf] == ["ingress", "pending", "prefill"]
    assert wf[0][1] == pytest.approx(0.0, abs=1e-6) and wf[1][1] == pytest.approx(0.01, abs=1e-6)


def test_only_ttft_and_e2e_decompose() -> None:
    assert "decode" not in D.stages_for("ttft") and "decode" in D.stages_for("e2e")
    with pytest.raises(ValueError):
        D.stages_for("itl")


@pytest.mark.parametrize(("n", "size"), [(10, 3), (48, 3), (100, 5), (200, 10), (10_000, 10)])
def test_band_size_scales_down_for_few_requests(n: int, size: int) -> None:
    assert D.band_size(n) == size


def _dec() -> Decomposition:
    return Decomposition(
        metric="ttft",
        percentile=95.0,
        total=1.0,
        stages=(
            StageValue("ingress", 0.05, 0.04),
            StageValue("pending", 0.6, 0.01),
            StageValue("prefill", 0.35, 0.2),
        ),
        baseline_total=0.25,
    )


def test_reclassify_moves_band_time_and_keeps_the_sum() -> None:
    move = StageMove("pending", "gateway_queue", 0.6, 0.01, "activator on a fixed fleet")
    got = D.reclassify(_dec(), [move])
    stages = {s.stage: (s.seconds, s.baseline_seconds) for s in got.stages}
    # gateway_queue sits in path order, between ingress and prefill; pending is gone
    assert [s.stage for s in got.stages] == ["ingress", "gateway_queue", "prefill"]
    assert stages["gateway_queue"] == pytest.approx((0.6, 0.01))
    assert math.fsum(s.seconds for s in got.stages) == pytest.approx(got.total)
    assert got.moves == (move,)
    assert "pending read as gateway_queue" in got.basis


def test_reclassify_takes_at_most_what_the_source_holds() -> None:
    # a move larger than the stage (an estimate from the mean, applied to the band) is capped
    got = D.reclassify(_dec(), [StageMove("ingress", "gateway_queue", 0.3, 0.0, "pool")])
    stages = {s.stage: s.seconds for s in got.stages}
    assert stages["gateway_queue"] == pytest.approx(0.05)
    assert stages["ingress"] == 0.0  # kept: its baseline time was not moved
    assert got.moves[0].seconds == pytest.approx(0.05)
    # nothing to take: the decomposition is returned as it was, no move recorded
    same = D.reclassify(_dec(), [StageMove("api_server", "gateway_queue", 0.2, 0.0, "none")])
    assert same == _dec()
