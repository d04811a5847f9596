"""The whole tail analysis: known answers, real vLLM timelines, and DuckDB/ClickHouse parity."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest
from chdb_store import ChdbStore
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import T0, capture_from_arrays, make_capture, make_request
from support import DATA
from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.slo import parse_slos
from tailtriage.analyses.tail import TailOptions, analyze_tail
from tailtriage.model import Capture
from tailtriage.store import DuckDBStore

VLLM_RUNS = sorted(p for p in (DATA / "vllm_runs").iterdir() if p.is_dir())


def _incident_capture(n: int = 6000, seed: int = 0) -> tuple[Capture, dict[str, np.ndarray]]:
    """Healthy for 300 s, then 300 s where 40 % of requests wait ~200 ms for a pod and prefill
    doubles: the known answer of every test below."""
    rng = np.random.default_rng(seed)
    arrival = T0 + np.sort(rng.uniform(0, 600, n))
    bad = arrival - T0 >= 300
    stages = {
        "ingress": np.full(n, 0.05),
        "pending": np.where(bad & (rng.random(n) < 0.4), rng.uniform(0.15, 0.25, n), 0.0),
        "engine_queue": rng.exponential(0.02, n),
        "prefill": np.where(bad, rng.normal(0.5, 0.05, n), rng.normal(0.25, 0.03, n)),
        "decode": rng.uniform(1, 2, n),
    }
    cap = capture_from_arrays(arrival, stages, output_tokens=rng.integers(50, 300, n))
    return cap, {"arrival": arrival, **stages}


def test_known_incident_end_to_end() -> None:
    cap, t = _incident_capture()
    res = analyze_tail(DuckDBStore(cap), parse_slos("p95 ttft < 500ms, p99 e2e < 10s"))
    w = res.bin_width
    (i0, i1), base = res.windows.incident, res.windows.baseline
    assert abs(i0 - (T0 + 300)) < w and i1 >= T0 + 600  # bins are whole multiples of w
    assert base is not None and base[1] == i0 and base[0] <= T0
    ttft = t["ingress"] + t["pending"] + t["engine_queue"] + t["prefill"]
    inc = (t["arrival"] >= i0) & (t["arrival"] < i1)
    healthy = (t["arrival"] >= base[0]) & (t["arrival"] < base[1])
    slo = res.slos[0]
    assert slo.observed == pytest.approx(np.percentile(ttft[inc], 95), rel=1e-12)
    assert slo.breached and slo.count == int(inc.sum())
    assert not res.slos[1].breached
    d = res.decomposition
    assert d is not None and d.metric == "ttft" and d.band == (94.0, 96.0)
    assert math.fsum(s.seconds for s in d.stages) == pytest.approx(slo.observed, rel=1e-12)
    assert d.baseline_total == pytest.approx(np.percentile(ttft[healthy], 95), rel=1e-12)
    stages = {s.stage: s for s in d.stages}
    assert stages["pending"].baseline_seconds == 0.0 and stages["pending"].seconds > 0.1
    assert stages["ingress"].seconds == pytest.approx(0.05, rel=0.02)
    a = res.attribution
    assert a is not None
    contrib = dict(zip(a.stages, a.shapley, strict=True))
    assert math.fsum(contrib.values()) == pytest.approx(slo.observed - d.baseline_total)
    top2 = sorted(contrib, key=lambda s: -contrib[s])[:2]
    assert set(top2) == {"pending", "prefill"}
    assert abs(contrib["ingress"]) < 0.005
    assert res.series and res.series_metric == "ttft" and res.bin_width == 30.0
    assert res.waterfall and res.waterfall_request_id is not None
    assert res.throughput["requests"] == int(inc.sum())
    assert set(res.cdfs) == {"ttft", "tpot", "e2e"}  # no token times: no "itl" curve
    assert len(res.cdfs["ttft"]) <= 200


def test_given_windows_are_used_as_given() -> None:
    cap, t = _incident_capture()
    opts = TailOptions(incident=(T0 + 400, T0 + 500), baseline=(T0 + 100, T0 + 200))
    res = analyze_tail(DuckDBStore(cap), parse_slos("p90 ttft < 500ms"), opts)
    assert res.windows.incident == (T0 + 400, T0 + 500) and not res.windows.detected
    inside = (t["arrival"] >= T0 + 400) & (t["arrival"] < T0 + 500)
    ttft = t["ingress"] + t["pending"] + t["engine_queue"] + t["prefill"]
    assert res.slos[0].observed == pytest.approx(np.percentile(ttft[inside], 90), rel=1e-12)


def test_whole_capture_breaching_has_no_baseline_and_says_so() -> None:
    reqs = [make_request(arrival=T0 + i, stages={"prefill": 1.0 + i / 1000}) for i in range(400)]
    res = analyze_tail(DuckDBStore(make_capture(reqs)), parse_slos("p95 ttft < 500ms"))
    assert res.windows.baseline is None and res.attribution is None
    assert any("no healthy baseline" in n for n in res.notes)
    assert res.decomposition is not None and res.decomposition.baseline_total is None


def test_p99_of_50_requests_warns_with_the_minimum_count() -> None:
    reqs = [make_request(arrival=T0 + i, stages={"prefill": 0.1}) for i in range(50)]
    res = analyze_tail(DuckDBStore(make_capture(reqs)), parse_slos("p99 ttft < 500ms"))
    assert any("368" in w and "50" in w for w in res.warnings)


def test_itl_with_token_times_is_per_gap() -> None:
    reqs = [
        make_request(
            arrival=T0 + i,
            stages={"prefill": 0.1, "decode": 0.99},
            output_tokens=100,
            token_times=True,
        )
        for i in range(30)
    ]
    res = analyze_tail(DuckDBStore(make_capture(reqs)), parse_slos("p99 itl < 5ms"))
    slo = res.slos[0]
    # absolute unix times in float64 resolve ~0.24 us, hence abs=1e-6
    assert slo.count == 30 * 99 and slo.observed == pytest.approx(0.01, abs=1e-6)
    assert slo.breached and slo.definition.startswith("itl: one sample per inter-token gap")
    assert "itl" in res.percentiles and res.decomposition is not None  # default p95 ttft


def _vllm_capture(run: Path) -> Capture:
    rows = [orjson.loads(line) for line in (run / "requests.jsonl").read_bytes().splitlines()]
    col = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0] if k != "request_id"}
    # the engine's monotonic clock throughout (arrival_time is another clock: SOURCES.md)
    return capture_from_arrays(
        col["queued_ts"],
        {
            "engine_queue": col["scheduled_ts"] - col["queued_ts"],
            "prefill": col["first_token_ts"] - col["scheduled_ts"],
            "decode": col["last_token_ts"] - col["first_token_ts"],
        },
        output_tokens=col["output_toks"].astype(np.int64),
        prompt_tokens=col["input_toks"].astype(np.int64),
    )


def _golden(run: Path) -> dict[tuple[str, str], float]:
    names = {"TTFT": "ttft", "TPOT": "tpot", "Latency": "e2e"}
    stats = {"Median": "p50", "P90": "p90", "P95": "p95", "P99": "p99"}
    out = {}
    for line in (run / "validation_summary.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in names and parts[1] in stats:
            out[(names[parts[0]], stats[parts[1]])] = float(parts[2]) / 1000.0
    return out


@pytest.mark.parametrize("run", VLLM_RUNS, ids=lambda p: p.name)
def test_real_vllm_runs_reproduce_upstream_percentiles(run: Path) -> None:
    cap = _vllm_capture(run)
    lo, hi = cap.time_range or (0.0, 0.0)
    res = analyze_tail(
        DuckDBStore(cap), parse_slos("p95 ttft < 500ms"), TailOptions(incident=(lo, hi + 1))
    )
    golden = _golden(run)
    assert len(golden) == 12
    for (metric, p), want in golden.items():
        assert res.percentiles[metric][p] == pytest.approx(want, abs=0.06e-3), (metric, p)
    d = res.decomposition
    assert d is not None and {s.stage for s in d.stages} <= {"engine_queue", "prefill"}


def test_clickhouse_engine_gives_the_same_analysis() -> None:
    cap, _ = _incident_capture(n=1500, seed=3)
    slos = parse_slos("p95 ttft < 500ms, p99 tpot < 20ms")
    duck = analyze_tail(DuckDBStore(cap), slos)
    store = ChdbStore(cap)
    try:
        click = analyze_tail(store, slos)
    finally:
        store.close()
    assert click.windows == duck.windows
    for a, b in zip(click.slos, duck.slos, strict=True):
        assert a.observed == pytest.approx(b.observed, rel=1e-12)
        assert (a.ci_low, a.ci_high, a.count) == pytest.approx((b.ci_low, b.ci_high, b.count))
    assert click.decomposition is not None and duck.decomposition is not None
    for sa, sb in zip(click.decomposition.stages, duck.decomposition.stages, strict=True):
        assert sa.stage == sb.stage and sa.seconds == pytest.approx(sb.seconds, rel=1e-9)
    assert click.percentiles.keys() == duck.percentiles.keys()
    for m, vals in duck.percentiles.items():
        assert click.percentiles[m] == pytest.approx(vals, rel=1e-12)
    assert click.stage_percentiles.keys() == duck.stage_percentiles.keys()
    assert click.attribution is not None and duck.attribution is not None
    assert click.attribution.shapley == pytest.approx(duck.attribution.shapley, rel=1e-9)


def test_a_chronic_tpot_breach_does_not_swallow_the_acute_ttft_incident() -> None:
    cap, _ = _incident_capture(n=3000, seed=5)
    acute = analyze_tail(DuckDBStore(cap), parse_slos("p95 ttft < 500ms"))
    both = analyze_tail(DuckDBStore(cap), parse_slos("p99 tpot < 1ms, p95 ttft < 500ms"))
    assert both.slos[0].breached  # TPOT breaches everywhere ...
    assert both.windows == acute.windows  # ... but the TTFT incident decides the windows
    assert both.series_metric == "ttft" and both.windows.baseline is not None


def test_requests_without_stages_are_unattributed_and_say_so() -> None:
    reqs = [make_request(arrival=T0 + i, stages={}) for i in range(100)]
    cap = make_capture(reqs)
    rq = cap.requests  # only the engine's TTFT is known, no spans
    ttft = [0.2 + i / 1000 for i in range(100)]
    cap = cap.replace(requests=rq.set_column(rq.schema.get_field_index("ttft"), "ttft", [ttft]))
    res = analyze_tail(DuckDBStore(cap), parse_slos("p95 ttft < 1s"))
    d = res.decomposition
    assert d is not None and [s.stage for s in d.stages] == ["unattributed"]
    assert d.stages[0].seconds == pytest.approx(np.percentile(ttft, 95))
    assert any("whole ttft is unattributed" in n for n in res.notes)


@settings(max_examples=8, deadline=None)
@given(
    st.integers(200, 1500),
    st.floats(0.2, 0.8),
    st.sampled_from([90.0, 95.0, 99.0]),
    st.integers(0, 2**32 - 1),
)
def test_invariants_on_random_incidents(n: int, onset: float, p: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    arrival = T0 + np.sort(rng.uniform(0, 600, n))
    bad = arrival - T0 >= 600 * onset
    stages = {
        "ingress": rng.gamma(3, 0.01, n),
        "gateway_queue": np.where(bad, rng.exponential(0.2, n), rng.exponential(0.01, n)),
        "prefill": rng.lognormal(np.log(0.2), 0.3, n),
        "decode": rng.uniform(0.5, 1, n),
    }
    cap = capture_from_arrays(arrival, stages)
    ttft = stages["ingress"] + stages["gateway_queue"] + stages["prefill"]
    res = analyze_tail(DuckDBStore(cap), [SloSpec("ttft", p, 0.4)])
    slo, w = res.slos[0], res.windows
    inside = (arrival >= w.incident[0]) & (arrival < w.incident[1])
    assert slo.count == int(inside.sum())
    assert slo.observed == pytest.approx(np.percentile(ttft[inside], p), rel=1e-12)
    d = res.decomposition
    assert d is not None
    assert math.fsum(s.seconds for s in d.stages) == pytest.approx(slo.observed, rel=1e-9)
    if w.baseline is not None:
        assert w.baseline[1] <= w.incident[0] or w.baseline[0] >= w.incident[1]
        healthy = (arrival >= w.baseline[0]) & (arrival < w.baseline[1])
        assert d.baseline_total == pytest.approx(np.percentile(ttft[healthy], p), rel=1e-12)
        assert math.fsum(s.baseline_seconds or 0.0 for s in d.stages) == pytest.approx(
            d.baseline_total, rel=1e-9
        )
        a = res.attribution
        assert a is not None
        assert math.fsum(a.shapley) == pytest.approx(slo.observed - d.baseline_total, abs=1e-9)
