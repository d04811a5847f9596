"""Per-request metrics in SQL: exact percentiles equal numpy's on the same values, on DuckDB and
on the ClickHouse engine (chDB), with the definition that was available."""

from __future__ import annotations

import numpy as np
import pytest
from chdb_store import ChdbStore

from builders import T0, capture_from_arrays, make_capture, make_request
from tailtriage.analyses.metrics import (
    evaluate_slo,
    metric_percentiles,
    metric_source,
)
from tailtriage.analyses.results import SloSpec
from tailtriage.model import Capture
from tailtriage.store import DuckDBStore
from tailtriage.store.dialect import ClickHouseDialect, DuckDBDialect, literal, window_filter


def _random_capture(n: int = 600, seed: int = 1) -> tuple[Capture, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    stages = {
        "ingress": rng.gamma(2.0, 0.01, n),
        "pending": np.where(rng.random(n) < 0.1, rng.exponential(0.3, n), 0.0),
        "engine_queue": rng.exponential(0.05, n),
        "prefill": rng.lognormal(np.log(0.2), 0.3, n),
        "decode": rng.lognormal(np.log(2.0), 0.2, n),
    }
    out_tokens = rng.integers(1, 400, n)
    cap = capture_from_arrays(
        T0 + np.sort(rng.uniform(0, 300, n)), stages, output_tokens=out_tokens
    )
    ttft = sum(v for k, v in stages.items() if k != "decode")
    e2e = ttft + stages["decode"]
    truth = {"ttft": ttft, "e2e": e2e, "arrival": cap.requests["arrival"].to_numpy()}
    ok = out_tokens > 1
    truth["tpot"] = (e2e[ok] - ttft[ok]) / (out_tokens[ok] - 1)
    return cap, truth


@pytest.fixture(params=["duckdb", "clickhouse"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _store(engine: str, cap: Capture) -> DuckDBStore | ChdbStore:
    return DuckDBStore(cap) if engine == "duckdb" else ChdbStore(cap)


def test_percentiles_equal_numpy_on_both_engines(engine: str) -> None:
    cap, truth = _random_capture()
    store = _store(engine, cap)
    for metric in ("ttft", "e2e", "tpot"):
        got = metric_percentiles(store, metric_source(store, metric), [50, 95, 99, 99.9])
        assert got.count == len(truth[metric])
        want = np.percentile(truth[metric], [50, 95, 99, 99.9])
        assert [v for _, v in got.values] == pytest.approx(list(want), rel=1e-12)


def test_window_selects_requests_by_arrival(engine: str) -> None:
    cap, truth = _random_capture()
    store = _store(engine, cap)
    window = (T0 + 100.0, T0 + 200.0)
    inside = (truth["arrival"] >= window[0]) & (truth["arrival"] < window[1])
    got = metric_percentiles(store, metric_source(store, "ttft"), [95], window)
    assert got.count == int(inside.sum())
    assert got.get(95) == pytest.approx(np.percentile(truth["ttft"][inside], 95), rel=1e-12)


def test_slo_observed_and_ci_are_exact_order_statistics(engine: str) -> None:
    cap, truth = _random_capture()
    res = evaluate_slo(_store(engine, cap), SloSpec("ttft", 95.0, 0.5), None)
    x = np.sort(truth["ttft"])
    assert res.observed == pytest.approx(np.percentile(x, 95), rel=1e-12)
    assert res.breached == (np.percentile(x, 95) > 0.5)
    assert res.ci_low in x and res.ci_high in x  # order statistics, not interpolations
    assert res.ci_low is not None and res.ci_high is not None
    assert res.ci_low <= res.observed <= res.ci_high
    assert res.warning is None and res.definition.startswith("ttft")


def _token_capture() -> Capture:
    reqs = [
        make_request(
            "a",
            T0,
            {"prefill": 0.1, "decode": 0.6},
            output_tokens=4,
            token_times=True,
            token_gaps=(0.1, 0.2, 0.3),
        ),
        make_request(
            "b",
            T0 + 1,
            {"prefill": 0.1, "decode": 0.4},
            output_tokens=3,
            token_times=True,
            token_gaps=(0.05, 0.35),
        ),
        make_request(
            "c", T0 + 2, {"prefill": 0.1, "decode": 0.1}, output_tokens=1, token_times=True
        ),
    ]
    return make_capture(reqs)


def test_itl_is_one_sample_per_gap(engine: str) -> None:
    store = _store(engine, _token_capture())
    src = metric_source(store, "itl")
    assert src.definition == "itl" and src.warning is None and not src.per_request
    got = metric_percentiles(store, src, [50, 100])
    gaps = [0.1, 0.2, 0.3, 0.05, 0.35]
    assert got.count == len(gaps)
    assert got.get(50) == pytest.approx(np.percentile(gaps, 50))
    assert got.get(100) == pytest.approx(0.35)


def test_multi_token_chunks_spread_their_gap_over_their_tokens() -> None:
    cap = _token_capture()
    # request "a": replace its chunks by [first token, one chunk of 3 tokens 0.6 s later]
    tt = cap.token_times.to_pylist()
    tt = [r for r in tt if r["request_id"] != "a"] + [
        {"request_id": "a", "index": 0, "time": T0 + 0.1, "tokens": 1},
        {"request_id": "a", "index": 1, "time": T0 + 0.7, "tokens": 3},
    ]
    import pyarrow as pa

    from tailtriage.model import schema as S

    cap = cap.replace(token_times=pa.Table.from_pylist(tt, schema=S.TOKEN_TIMES))
    store = DuckDBStore(cap)
    got = metric_percentiles(store, metric_source(store, "itl"), [0, 100])
    assert got.count == 3 + 2
    assert got.get(0) == pytest.approx(0.05) and got.get(100) == pytest.approx(0.35)


def test_itl_without_token_times_is_labelled_never_silent(engine: str) -> None:
    cap, truth = _random_capture()
    store = _store(engine, cap)
    res = evaluate_slo(store, SloSpec("itl", 95.0, 0.05), None)
    assert "itl_request_mean" in res.definition
    assert res.warning is not None and "no token times" in res.warning
    assert res.observed == pytest.approx(np.percentile(truth["tpot"], 95))


def test_failed_requests_do_not_count_as_latency_samples() -> None:
    reqs = [make_request(arrival=T0 + i, stages={"prefill": 0.1 * (i + 1)}) for i in range(10)]
    reqs.append(make_request(arrival=T0 + 11, stages={"prefill": 99.0}, status="error"))
    store = DuckDBStore(make_capture(reqs))
    got = metric_percentiles(store, metric_source(store, "ttft"), [100])
    assert got.count == 10 and got.get(100) == pytest.approx(1.0)


def test_p99_of_50_requests_warns_with_minimum_count() -> None:
    reqs = [make_request(arrival=T0 + i, stages={"prefill": 0.01 * (i + 1)}) for i in range(50)]
    res = evaluate_slo(DuckDBStore(make_capture(reqs)), SloSpec("ttft", 99.0, 1.0), None)
    assert res.count == 50
    assert res.warning is not None and "at least 368" in res.warning
    assert res.ci_high is None


def test_empty_window_gives_no_observation_and_says_so() -> None:
    store = DuckDBStore(make_capture([make_request(arrival=T0)]))
    res = evaluate_slo(store, SloSpec("ttft", 95.0, 0.5), (T0 + 10, T0 + 20))
    assert res.observed is None and not res.breached and res.count == 0
    assert res.warning is not None and "no ttft requests" in res.warning


def test_dialects_spell_quantiles_differently_but_literals_the_same() -> None:
    assert DuckDBDialect().quantile("x", 0.95) == "quantile_cont(x, 0.95)"
    assert (
        ClickHouseDialect().quantiles("x", [0.5, 0.95]) == "quantilesExactInclusive(0.5, 0.95)(x)"
    )
    assert literal("it's") == "'it''s'" and literal(1e-7) == "1e-07"
    assert window_filter("arrival", None) == "TRUE"
    with pytest.raises(ValueError):
        literal(float("nan"))
    with pytest.raises(ValueError):
        DuckDBDialect().quantiles("x", [1.5])
