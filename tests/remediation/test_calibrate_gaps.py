"""Calibration never aborts on a deployment it does not recognise: it models what the
telemetry shows (an HPA on any metric, a KV-limited engine, multi-node replicas) and lists
what it could not read as typed gaps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from builders import make_capture, make_request
from support import DATA
from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S
from tailtriage.remediation.calibrate import Gap, calibrate
from tailtriage.remediation.calibrate.deployment import inferred_base
from tailtriage.remediation.calibrate.infer import infer_kv_blocks
from tailtriage.remediation.calibrate.observed import (
    infer_hpa_signal,
    infer_kv_from_admission,
    infer_limit_from_gauges,
    infer_replica_groups,
)
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import ScenarioConfig, apply_overrides
from tailtriage.store.input import load_capture

GPU_HPA = {
    "workload.0.duration_s": 60,
    "workload.1.duration_s": 120,
    "hpa.metric": "DCGM_FI_DEV_GPU_UTIL",
    "hpa.target": 70,
}


@pytest.fixture(scope="module")
def gpu_hpa_bundle(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    """scaling_lag, shortened, with its HPA on DCGM's GPU utilisation, read back."""
    out = tmp_path_factory.mktemp("gpu_hpa")
    write_bundle(simulate(apply_overrides(resolve_scenario("scaling_lag"), GPU_HPA)), out)
    return load_capture(out)


@pytest.mark.slow
def test_an_hpa_on_gpu_utilisation_is_inferred_not_refused(gpu_hpa_bundle: Capture) -> None:
    config, evidence, gaps = inferred_base(gpu_hpa_bundle)
    assert config.hpa.metric == "DCGM_FI_DEV_GPU_UTIL", evidence["hpa_settings"]
    assert config.hpa.target == pytest.approx(70, rel=0.25)
    assert not [g for g in gaps if g.part.startswith("hpa.")], gaps


def _with_custom_metric(cap: Capture, name: str) -> Capture:
    """The bundle as if its HPA had scaled on ``name`` = 2 x waiting + running per pod."""
    se = cap.series
    per: dict[tuple[str, float], dict[str, float]] = {}
    for metric in ("vllm:num_requests_waiting", "vllm:num_requests_running"):
        sel = se.filter(pc.equal(se["metric"], metric))
        for lab, t, v in zip(*(sel[c].to_pylist() for c in ("labels", "time", "value")), strict=True):  # fmt: skip
            per.setdefault((json.loads(lab)["pod"], t), {})[metric] = v
    rows = [
        (json.dumps({"pod": pod}), t, 2 * d["vllm:num_requests_waiting"] + d["vllm:num_requests_running"])
        for (pod, t), d in per.items() if len(d) == 2
    ]  # fmt: skip
    custom = make_table(
        S.SERIES,
        {"metric": [name] * len(rows), "labels": [r[0] for r in rows],
         "time": [r[1] for r in rows], "value": [r[2] for r in rows]},
    )  # fmt: skip
    keep = se.filter(pc.invert(pc.starts_with(se["metric"], "DCGM_")))
    ev = cap.events
    msgs = [str(m).replace("DCGM_FI_DEV_GPU_UTIL", name) for m in ev["message"].to_pylist()]
    events = ev.set_column(ev.schema.get_field_index("message"), "message", pa.array(msgs))
    return cap.replace(series=pa.concat_tables([keep, custom]), events=events)


@pytest.mark.slow
def test_a_custom_hpa_metric_is_modelled_from_its_recorded_series(
    gpu_hpa_bundle: Capture,
) -> None:
    cap = _with_custom_metric(gpu_hpa_bundle, "app:queue_pressure")
    found, part = infer_hpa_signal(cap, "app:queue_pressure")
    waiting, running, kv, util, const = found["hpa.signal_weights"]
    assert waiting == pytest.approx(2.0, rel=0.1), part
    assert running == pytest.approx(1.0, rel=0.1), part
    assert max(kv, util, const) < 0.1, part
    config, _, gaps = inferred_base(cap)
    assert config.hpa.metric == "app:queue_pressure"
    assert len(config.hpa.signal_weights) == 5
    assert not [g for g in gaps if g.part.startswith("hpa.metric")], gaps


@pytest.mark.slow
def test_an_hpa_metric_without_series_is_a_gap_not_an_abort(gpu_hpa_bundle: Capture) -> None:
    cap = _with_custom_metric(gpu_hpa_bundle, "app:queue_pressure")
    se = cap.series
    cap = cap.replace(series=se.filter(pc.not_equal(se["metric"], "app:queue_pressure")))
    config, _, gaps = inferred_base(cap)
    assert config.hpa.metric == "cpu"
    gap = next(g for g in gaps if g.part == "hpa.metric")
    assert "app:queue_pressure" in gap.reason and "app:queue_pressure" in gap.telemetry
    assert gap.line().startswith("calibration: hpa.metric not inferred")


def _with_kpa_status(cap: Capture, name: str) -> Capture:
    """The bundle as if a Knative-style autoscaler had scaled on ``name``, the per-pod average
    of waiting + running that only kube-state-metrics' ``status_target_metric`` records (no
    series of its own), its rescale events naming it."""
    se = cap.series
    per: dict[float, dict[str, float]] = {}  # scrape time -> pod -> waiting + running
    for metric in ("vllm:num_requests_waiting", "vllm:num_requests_running"):
        sel = se.filter(pc.equal(se["metric"], metric))
        for lab, t, v in zip(*(sel[c].to_pylist() for c in ("labels", "time", "value")), strict=True):  # fmt: skip
            pods = per.setdefault(t, {})
            pods[json.loads(lab)["pod"]] = pods.get(json.loads(lab)["pod"], 0.0) + v
    times = sorted(per)
    avg = [sum(per[t].values()) / len(per[t]) for t in times]
    lab = json.dumps({"horizontalpodautoscaler": "vllm", "metric_name": name,
                      "metric_target_type": "average"}, sort_keys=True)  # fmt: skip
    status = make_table(
        S.SERIES,
        {"metric": ["kube_horizontalpodautoscaler_status_target_metric"] * len(times),
         "labels": [lab] * len(times), "time": times, "value": avg},
    )  # fmt: skip
    keep = se.filter(pc.invert(pc.starts_with(se["metric"], "DCGM_")))
    ev = cap.events
    msgs = [str(m).replace("DCGM_FI_DEV_GPU_UTIL", name) for m in ev["message"].to_pylist()]
    events = ev.set_column(ev.schema.get_field_index("message"), "message", pa.array(msgs))
    return cap.replace(series=pa.concat_tables([keep, status]), events=events)


@pytest.mark.slow
def test_an_hpa_metric_only_the_hpa_status_records_is_modelled_from_it(
    gpu_hpa_bundle: Capture,
) -> None:
    """An autoscaler on a per-pod average no exporter writes a series of (an External metric,
    a KPA's): kube-state-metrics records the value the autoscaler read, and the signal is
    fitted to it (where it fell back to CPU, the corpus' knative bundles replayed at 2
    replicas where 8 served: +27,893 %)."""
    cap = _with_kpa_status(gpu_hpa_bundle, "app:inflight")
    found, part = infer_hpa_signal(cap, "app:inflight")
    waiting, running, kv, util, const = found["hpa.signal_weights"]
    assert waiting == pytest.approx(1.0, rel=0.15), part
    assert running == pytest.approx(1.0, rel=0.15), part
    assert max(kv, util, const) < 0.2, part
    config, _, gaps = inferred_base(cap)
    assert config.hpa.metric == "app:inflight"
    assert not [g for g in gaps if g.part.startswith("hpa.metric")], gaps


def test_knative_concurrency_is_modelled_by_its_definition_without_any_series() -> None:
    """The KPA's ``concurrency`` is the requests in flight per pod: waiting plus running,
    whatever the capture recorded of it."""
    from tailtriage.simulator.config import HPA_SIGNALS

    found, part = infer_hpa_signal(Capture(), "concurrency")
    weights = dict(zip(HPA_SIGNALS, found["hpa.signal_weights"], strict=True))
    assert weights == {
        "vllm:num_requests_waiting": 1.0,
        "vllm:num_requests_running": 1.0,
        "vllm:kv_cache_usage_perc": 0.0,
        "DCGM_FI_DEV_GPU_UTIL": 0.0,
        "1": 0.0,
    }, part
    assert infer_hpa_signal(Capture(), "app:inflight")[0] == {}  # no definition, no series


KV_LIMITED = DATA / "vllm_runs" / "RTX4090_Llama-3.1-8B"
REAL_BLOCKS = 2588  # meta.json of that run: what the real engine allocated


def test_kv_cache_size_of_a_kv_limited_real_engine() -> None:
    """The RTX 4090 run never ran more than 49 of 256 allowed sequences while up to 234
    waited: a KV-limited engine; both readings land near the 2,588 blocks it had."""
    cap = load_capture(KV_LIMITED)
    from_usage, part = infer_kv_blocks(cap)
    assert from_usage["engine.num_gpu_blocks"] == pytest.approx(REAL_BLOCKS, rel=0.1), part
    from_admission, part = infer_kv_from_admission(cap, max_num_seqs=256)
    assert from_admission["engine.num_gpu_blocks"] == pytest.approx(REAL_BLOCKS, rel=0.25), part
    # an engine that queued only at its sequence ceiling says nothing about its cache
    found, _ = infer_kv_from_admission(load_capture(DATA / "vllm_runs" / "RTXPRO6000_Llama-3.1-8B"), 128)  # fmt: skip
    assert found == {}


@pytest.mark.slow
def test_a_gateway_limited_engine_is_not_read_as_kv_limited(tmp_path: Path) -> None:
    """gateway_queue caps each engine at 12 requests: waiting shows only in blips between
    scheduler steps, which say nothing about the cache (and the cap is in the gauges)."""
    cfg = apply_overrides(
        resolve_scenario("gateway_queue"),
        {"workload.0.duration_s": 60, "workload.1.duration_s": 120},
    )
    write_bundle(simulate(cfg), tmp_path)
    cap = load_capture(tmp_path)
    found, part = infer_kv_from_admission(cap, cfg.engine.max_num_seqs)
    assert found == {}, part
    # what sampled traces fall back on: no engine ever held more than the gateway let through
    found, part = infer_limit_from_gauges(cap)
    assert found == {"gateway.concurrency_limit": cfg.gateway.concurrency_limit}, part


def test_a_base_without_kv_size_or_known_hardware_gets_the_observed_cache() -> None:
    cap = load_capture(KV_LIMITED)
    base = apply_overrides(
        ScenarioConfig(),
        {"step_time.mode": "fitted", "hpa.enabled": False, "pods.initial_replicas": 1,
         "engine.max_num_seqs": 256, "engine.max_num_batched_tokens": 2048},
    )  # fmt: skip
    cal = calibrate(cap, base)
    assert cal.config.engine.num_gpu_blocks == pytest.approx(REAL_BLOCKS, rel=0.1)
    assert not cal.fit.gaps


def _lws_capture() -> Capture:
    """Two LeaderWorkerSet groups of two pods with 8 GPUs each; only leaders serve."""
    t = np.arange(20, dtype=float)
    rows = [
        (json.dumps({"gpu": str(g), "pod": pod, "modelName": "NVIDIA H100 80GB HBM3"}), ts)
        for pod in ("vllm-0", "vllm-0-1", "vllm-1", "vllm-1-1") for g in range(8) for ts in t
    ]  # fmt: skip
    series = make_table(
        S.SERIES,
        {"metric": ["DCGM_FI_DEV_GPU_UTIL"] * len(rows), "labels": [r[0] for r in rows],
         "time": [r[1] for r in rows], "value": [50.0] * len(rows)},
    )  # fmt: skip
    n = 40
    requests = make_table(
        S.REQUESTS,
        {"request_id": [f"r{i}" for i in range(n)], "arrival": t.tolist() * 2,
         "status": ["ok"] * n, "replica": ["vllm-0", "vllm-1"] * (n // 2)},
    )  # fmt: skip
    return Capture(requests=requests, series=series)


def test_multi_node_replicas_from_pod_names() -> None:
    found, part = infer_replica_groups(_lws_capture())
    assert (found["gpu.tp"], found["gpu.pp"]) == (8, 2), part
    assert found["pods.gpus_per_node"] == 16
    assert part["groups"] == 2
    # a plain deployment (every pod with GPUs serves) is one pod per replica
    cap = _lws_capture()
    plain = cap.replace(requests=cap.requests.filter(pc.equal(cap.requests["replica"], "vllm-0")))
    assert infer_replica_groups(plain.replace(series=plain.series.filter(
        pc.match_substring(plain.series["labels"], '"vllm-0"'))))[0] == {}  # fmt: skip


def test_a_setting_the_simulator_refuses_becomes_a_gap() -> None:
    from tailtriage.remediation.calibrate.deployment import _apply_what_fits

    config, gaps = _apply_what_fits(
        ScenarioConfig(), {"engine.max_num_seqs": 64, "engine.max_num_batched_tokens": 16}
    )
    assert config.engine.max_num_seqs == 64
    assert [g.part for g in gaps] == ["engine.max_num_batched_tokens"]
    assert isinstance(gaps[0], Gap) and "refuses" in gaps[0].reason


def test_a_what_if_naming_a_simulated_metric_ignores_fitted_weights() -> None:
    """A calibrated custom metric keeps its weights in the config; a what-if that switches the
    HPA to a metric the simulator produces must scale on that metric alone."""
    short = {"workload.0.duration_s": 30, "workload.1.duration_s": 90,
             "hpa.metric": "vllm:num_requests_waiting", "hpa.target": 2}  # fmt: skip
    cfg = apply_overrides(resolve_scenario("scaling_lag"), short)
    plain = simulate(cfg)
    weighted = simulate(apply_overrides(cfg, {"hpa.signal_weights": [0, 0, 0, 0, 1000.0]}))
    custom = simulate(
        apply_overrides(cfg, {"hpa.metric": "app:q", "hpa.signal_weights": [0, 0, 0, 0, 1000.0]})
    )
    rescales = [
        [(round(t, 3), m.split(";")[0]) for t, k, m in zip(c.events["time"].to_pylist(),
         c.events["kind"].to_pylist(), c.events["message"].to_pylist(), strict=True)
         if k == "hpa_rescale"]
        for c in (plain, weighted, custom)
    ]  # fmt: skip
    assert rescales[0] == rescales[1]
    assert rescales[2] and rescales[2] != rescales[0]  # the constant scales it at once


def _gauges(held: dict[str, list[float]], offset_s: float) -> Capture:
    """vllm running gauges (nothing waiting) of pods scraped every 15 s, each pod ``offset_s``
    after the one before (Prometheus scrapes every target at its own offset)."""
    rows = [
        (metric, json.dumps({"pod": pod}), 15.0 * i + k * offset_s, v if metric.endswith("running") else 0.0)
        for k, (pod, values) in enumerate(held.items())
        for i, v in enumerate(values)
        for metric in ("vllm:num_requests_running", "vllm:num_requests_waiting")
    ]  # fmt: skip
    series = make_table(
        S.SERIES,
        {"metric": [r[0] for r in rows], "labels": [r[1] for r in rows],
         "time": [r[2] for r in rows], "value": [r[3] for r in rows]},
    )  # fmt: skip
    return Capture(series=series)


def test_a_pool_wide_limit_is_shared_over_the_pods() -> None:
    # Envoy lets 125 requests through to two pods: one holds a few more than its share
    a = [65.0] * 6 + [60.0] * 6
    b = [60.0] * 6 + [65.0] * 6
    found, part = infer_limit_from_gauges(_gauges({"p-a": a, "p-b": b}, offset_s=4.0))
    assert found == {"gateway.concurrency_limit": 63}, part  # 62.5 a replica, not the 65 peak
    # a per-pod limit (Knative containerConcurrency) holds every pod at it
    full = [51.0] * 12
    found, part = infer_limit_from_gauges(_gauges({"p-a": full, "p-b": full}, offset_s=4.0))
    assert found == {"gateway.concurrency_limit": 51}, part


def _prompts(*tokens: int) -> Capture:
    return make_capture(
        make_request(arrival=1_767_261_600.0 + i, prompt_tokens=n) for i, n in enumerate(tokens)
    )


def test_an_unseen_token_budget_is_a_gap_when_prompts_outgrow_the_default() -> None:
    # 9k-token prompts with no tokens-per-step histogram: whether they were chunked at the
    # default budget or prefilled whole decides what chunking fixes do; say it was assumed
    _, _, gaps = inferred_base(_prompts(500, 700, 9000))
    budget = [g for g in gaps if g.part == "engine.max_num_batched_tokens"]
    assert budget and "vllm:iteration_tokens_total" in budget[0].telemetry
    assert "chunked prefill" in budget[0].assumed
    # every prompt fits the default budget: the budget does not decide anything here
    _, _, gaps = inferred_base(_prompts(500, 700, 900))
    assert not [g for g in gaps if g.part == "engine.max_num_batched_tokens"]


def _interference_capture(budget: int, folder: Path) -> Capture:
    """The built-in prefill-interference scenario, shortened, on an engine with ``budget``
    tokens per step, read back without vLLM's tokens-per-step histogram."""
    config = apply_overrides(
        resolve_scenario("prefill_interference"),
        {
            "workload.0.duration_s": 90,
            "workload.1.duration_s": 150,
            "engine.max_num_batched_tokens": budget,
        },
    )
    write_bundle(simulate(config), folder)
    cap = load_capture(folder)
    se = cap.series
    keep = pc.invert(pc.starts_with(se["metric"], "vllm:iteration_tokens"))
    return cap.replace(series=se.filter(keep))


@pytest.mark.slow
@pytest.mark.parametrize("budget", [2048, 16384])
def test_the_token_budget_is_fitted_by_replay_where_long_prompts_make_it_matter(
    budget: int, tmp_path: Path
) -> None:
    # 10k-token prompts joined: prefilled whole (16384) every decode beside them stalls, which
    # the default budget's replay cannot reproduce; at the default itself it stays assumed
    fit = calibrate(_interference_capture(budget, tmp_path)).fit
    part = fit.parts["token_budget"]
    assert part["tried"] == 16384
    assert part["chosen"] == budget, part
    assumed = [g for g in fit.gaps if g.part == "engine.max_num_batched_tokens"]
    assert bool(assumed) == (budget == 2048)
