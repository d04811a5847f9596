"""Invariants of the whole simulation: conservation, causality, stage sums, determinism."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailtriage.model.capture import Capture
from tailtriage.model.vocabulary import EVENT_KINDS, PRE_FIRST_TOKEN_STAGES, STAGES
from tailtriage.simulator import apply_overrides, simulate
from tailtriage.simulator.config import from_dict


def small_config(**over: object) -> dict[str, object]:
    cfg: dict[str, object] = {
        "name": "t",
        "seed": 1,
        "hpa": {"enabled": True, "metric": "vllm:num_requests_waiting", "target": 2,
                "min_replicas": 1, "max_replicas": 3, "sync_period_s": 5,
                "scrape_interval_s": 5, "scrape_lag_s": 5},
        "pods": {"initial_replicas": 1, "load_gb_s": 20.0, "warmup_s": 2.0, "image_pull_s": 3,
                 "scheduling_delay_s": 0.5, "drain_s": 5},
        "output": {"engine_sample_interval_s": 5, "sample_interval_s": 5},
        "workload": [
            {"name": "healthy", "duration_s": 20, "arrivals": {"rate": 4},
             "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.8, "max": 4000},
             "output_tokens": {"kind": "lognormal", "median": 50, "sigma": 0.8, "max": 500}},
            {"name": "incident", "duration_s": 20, "arrivals": {"rate": 20}},
        ],
    }  # fmt: skip
    cfg.update(over)
    return cfg


def table_bytes(cap: Capture) -> bytes:
    sink = io.BytesIO()
    for name in ("requests", "stages", "token_times", "series", "events"):
        tab = cap.table(name)
        with pa.ipc.new_stream(sink, tab.schema) as writer:
            writer.write_table(tab)
    return sink.getvalue()


def check_invariants(cap: Capture) -> None:
    req = cap.requests
    n = req.num_rows
    ids = req["request_id"].to_pylist()
    assert len(set(ids)) == n  # one row per arrival
    status = req["status"].to_pylist()
    assert set(status) <= {"ok", "error", "timeout"}  # exactly one outcome each
    arrival = req["arrival"].to_numpy()
    finish = req["finish"].to_numpy()
    assert np.all(finish >= arrival)
    ok = np.array(status) == "ok"
    first = pc.fill_null(req["first_token"], np.nan).to_numpy()
    assert np.all(first[ok] >= arrival[ok]) and np.all(first[ok] <= finish[ok])
    # stages: contiguous from arrival, canonical names, sums = ttft and e2e
    st = cap.stages
    assert set(st["stage"].to_pylist()) <= set(STAGES)
    by: dict[str, list[tuple[float, float, str]]] = {}
    for r, s, start, dur in zip(st["request_id"].to_pylist(), st["stage"].to_pylist(),
                                st["start"].to_pylist(), st["duration"].to_pylist(), strict=True):  # fmt: skip
        assert dur >= 0
        by.setdefault(r, []).append((start, dur, s))
    ttft = pc.fill_null(req["ttft"], np.nan).to_numpy()
    e2e = req["e2e"].to_numpy()
    for i, rid in enumerate(ids):
        rows = sorted(by[rid])
        assert rows[0][0] == pytest.approx(arrival[i], abs=1e-9)
        for (s0, d0, _), (s1, _, _) in itertools.pairwise(rows):
            assert s0 + d0 == pytest.approx(s1, abs=1e-6)
        assert sum(d for _, d, _ in rows) == pytest.approx(e2e[i], abs=1e-6)
        if ok[i]:
            pre = sum(d for _, d, s in rows if s in PRE_FIRST_TOKEN_STAGES)
            assert pre == pytest.approx(ttft[i], abs=1e-6)
    # served only by a replica that was ready when the request reached it
    ready_at: dict[str, float] = {}
    for e in cap.events.to_pylist():
        assert e["kind"] in EVENT_KINDS
        if e["kind"] == "pod_ready":
            ready_at[e["object_name"]] = e["time"]
    starts = {(r, s): t for r, s, t in zip(st["request_id"].to_pylist(), st["stage"].to_pylist(),
                                            st["start"].to_pylist(), strict=True)}  # fmt: skip
    for i, (rid, replica) in enumerate(zip(ids, req["replica"].to_pylist(), strict=True)):
        if replica is None:
            assert status[i] != "ok"
            continue
        served_from = starts.get((rid, "api_server"))
        assert served_from is not None
        # pods without a pod_ready event were running before the capture began
        assert served_from >= ready_at.get(replica, -np.inf) - 1e-9


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    rate=st.floats(1.0, 40.0),
    routing=st.sampled_from(
        ["round_robin", "least_request", "least_outstanding", "prefix_aware", "weighted"]
    ),
    limit=st.sampled_from([0, 4, 16]),
    queue_limit=st.sampled_from([0, 10]),
    blocks=st.sampled_from([0, 400]),
    process=st.sampled_from(["poisson", "gamma", "constant"]),
)
def test_conservation_and_causality(
    seed: int, rate: float, routing: str, limit: int, queue_limit: int, blocks: int, process: str
) -> None:
    cfg = from_dict(small_config(seed=seed))
    cfg = apply_overrides(cfg, {
        "workload.1.arrivals.rate": rate,
        "workload.1.arrivals.process": process,
        "workload.1.prefix.groups": 3,
        "workload.1.prefix.shared_tokens": 64,
        "gateway.routing": routing,
        "gateway.weights": (3.0, 1.0),
        "gateway.weighted_from_s": 10.0,
        "gateway.concurrency_limit": limit,
        "gateway.queue_limit": queue_limit,
        "engine.num_gpu_blocks": blocks,
    })  # fmt: skip
    cap = simulate(cfg)
    check_invariants(cap)
    assert cap.metadata.seed == seed


def test_scale_down_mid_flight_and_rollout_keep_invariants() -> None:
    cfg = from_dict(small_config(rollouts=[{"at_s": 15, "max_surge": 1, "max_unavailable": 1,
                                            "set": {"engine.max_num_seqs": 64}}]))  # fmt: skip
    cfg = apply_overrides(cfg, {"workload.1.arrivals.rate": 2.0, "pods.initial_replicas": 3,
                                "hpa.scale_down.stabilization_s": 0})  # fmt: skip
    cap = simulate(cfg)
    check_invariants(cap)
    kinds = cap.events["kind"].to_pylist()
    assert "rollout" in kinds and "pod_killing" in kinds and "pod_ready" in kinds


def test_same_seed_same_bytes_different_seed_differs() -> None:
    cfg = from_dict(small_config())
    a, b = simulate(cfg), simulate(cfg)
    assert table_bytes(a) == table_bytes(b)
    assert a.metadata.to_dict() == b.metadata.to_dict()
    c = simulate(cfg, seed=2)
    assert table_bytes(a) != table_bytes(c)
    assert c.metadata.seed == 2


def test_token_times_match_first_token_and_finish() -> None:
    cap = simulate(from_dict(small_config()))
    tt = cap.token_times
    req = cap.requests.filter(pc.equal(cap.requests["status"], "ok"))
    counts = tt.group_by("request_id").aggregate([("index", "count"), ("time", "min"),
                                                  ("time", "max")])  # fmt: skip
    got = {r["request_id"]: r for r in counts.to_pylist()}
    for r in req.to_pylist():
        g = got[r["request_id"]]
        assert g["index_count"] == r["output_tokens"]
        assert g["time_min"] == pytest.approx(r["first_token"])
        assert g["time_max"] == pytest.approx(r["finish"])
    off = simulate(apply_overrides(from_dict(small_config()), {"output.token_times": "off"}))
    assert off.token_times.num_rows == 0


def test_series_use_real_metric_names_and_pod_labels() -> None:
    cap = simulate(from_dict(small_config()))
    names = set(cap.series["metric"].to_pylist())
    for expected in (
        "vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total", "vllm:time_to_first_token_seconds_bucket",
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
        "kube_horizontalpodautoscaler_status_current_replicas",
        "kube_horizontalpodautoscaler_status_desired_replicas",
        "kube_deployment_status_replicas_ready", "container_cpu_usage_seconds_total",
    ):  # fmt: skip
        assert expected in names, expected
    import json

    for row in cap.series.filter(pc.starts_with(cap.series["metric"], "vllm:")).to_pylist()[:50]:
        assert "pod" in json.loads(row["labels"])
    # cumulative histogram buckets never decrease with le
    ttft = [r for r in cap.series.to_pylist()
            if r["metric"] == "vllm:time_to_first_token_seconds_bucket"]  # fmt: skip
    t_last = max(r["time"] for r in ttft)
    last = [r for r in ttft if r["time"] == t_last]
    by_pod: dict[str, list[tuple[float, float]]] = {}
    for r in last:
        lab = json.loads(r["labels"])
        by_pod.setdefault(lab["pod"], []).append((float(lab["le"]), r["value"]))
    for vals in by_pod.values():
        counts = [v for _, v in sorted(vals)]
        assert counts == sorted(counts)


def test_ground_truth_only_in_metadata_extra() -> None:
    cap = simulate(from_dict(small_config(root_cause="scaling_lag")))
    extra = cap.metadata.extra
    assert extra["root_cause"] == "scaling_lag" and extra["scenario"] == "t"
    start, end = extra["incident"]
    assert end - start == pytest.approx(20.0)
    for name in ("requests", "stages", "series", "events"):
        tab = cap.table(name)
        for col in tab.column_names:
            if pa.types.is_string(tab.schema.field(col).type):
                assert "scaling_lag" not in set(tab[col].to_pylist())


def test_save_and_load_round_trip(tmp_path: object) -> None:
    from pathlib import Path

    cap = simulate(from_dict(small_config()))
    path = Path(str(tmp_path)) / "c.duckdb"
    cap.save(path)
    back = Capture.load(path)
    assert back.requests.equals(cap.requests)
    assert back.metadata.seed == cap.metadata.seed


def test_pods_starting_at_the_start_become_ready_when_told() -> None:
    # one pod serving, two more loading since before the run (Ready at 12 s and 25 s); no HPA,
    # so only they can add capacity: every request before 12 s goes to the first pod
    cfg = from_dict(small_config(hpa={"enabled": False}))
    cfg = apply_overrides(cfg, {"pods.starting_ready_s": [25.0, 12.0]})
    cap = simulate(cfg)
    check_invariants(cap)
    ev = cap.events
    ready = sorted(
        t
        for t, k in zip(ev["time"].to_pylist(), ev["kind"].to_pylist(), strict=True)
        if k == "pod_ready"
    )
    t0 = float(pc.min(cap.requests["arrival"]).as_py())
    assert [round(t - t0) for t in ready] == [12, 25]
    req = cap.requests.to_pylist()
    early = {r["replica"] for r in req if r["arrival"] < t0 + 11}
    late = {r["replica"] for r in req if r["arrival"] > t0 + 26}
    assert len(early) == 1 and len(late) == 3
    with pytest.raises(Exception, match="starting_ready_s"):
        apply_overrides(cfg, {"pods.starting_ready_s": [-1.0]})


def test_weighted_routing_gives_each_pod_its_share_from_its_start() -> None:
    # a hot key's consistent hash: pod 0 takes three shares from 20 s, least-outstanding before
    cfg = from_dict(small_config())
    cfg = apply_overrides(cfg, {
        "hpa.enabled": False, "pods.initial_replicas": 3, "workload.0.arrivals.rate": 30.0,
        "workload.1.arrivals.rate": 30.0, "gateway.routing": "weighted",
        "gateway.weights": (3.0, 1.0, 1.0), "gateway.weighted_from_s": 20.0,
    })  # fmt: skip
    cap = simulate(cfg)
    rq = cap.requests
    arrival = np.array(rq["arrival"].to_pylist(), dtype=float) - cfg.start_unix_s
    replica = np.array([str(r) for r in rq["replica"].to_pylist()])
    pods = sorted(set(replica))
    assert len(pods) == 3

    def shares(mask: np.ndarray) -> list[float]:
        return sorted((float(np.mean(replica[mask] == p)) for p in pods), reverse=True)

    late = shares(arrival >= 20.0)
    assert 0.5 < late[0] < 0.7 and late[2] > 0.12  # 3/5 and 1/5 each, ~600 requests
    early = shares((arrival > 2.0) & (arrival < 20.0))
    assert early[0] < 0.45  # balanced by load before the skew
