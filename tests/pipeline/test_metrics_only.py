"""Metrics-only triage: a bundle of Prometheus ``query_range`` files (no traces) triages from
the engines' histograms, and the same incident reads the same whichever engine exported it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from builders import capture_from_arrays
from prometheus_files import (
    SGLANG_QUEUE,
    SGLANG_STAGE,
    SGLANG_TTFT,
    VLLM_ITL,
    VLLM_PHASE,
    VLLM_TTFT,
    gauge_rows,
    histogram_rows,
    write_query_range,
)
from tailtriage.errors import InsufficientDataError
from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze
from tailtriage.pipeline.triage import triage
from tailtriage.simulator import simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.store.input import load_capture

T0 = 1_767_261_600.0
STEP = 15.0
SCRAPES = 60  # 15 minutes
SLOW = range(30, 42)  # scrapes whose requests queue in the engine (minutes 7.5 to 10.5)
PER_SCRAPE = 150


def _incident(seed: int = 7) -> dict[str, list[np.ndarray]]:
    """Per scrape: the requests' frontend overhead, queue and prefill times (seconds)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[np.ndarray]] = {"overhead": [], "queue": [], "prefill": []}
    for i in range(SCRAPES):
        n = 0 if i == 0 else PER_SCRAPE
        slow = i in SLOW
        out["overhead"].append(rng.uniform(0.002, 0.01, n))
        out["queue"].append(rng.uniform(0.8, 2.5, n) if slow else rng.uniform(0.001, 0.02, n))
        out["prefill"].append(rng.uniform(0.04, 0.12, n))
    return out


def _times() -> list[float]:
    return [T0 + i * STEP for i in range(SCRAPES)]


def _ttft(inc: dict[str, list[np.ndarray]]) -> list[np.ndarray]:
    return [
        o + q + p for o, q, p in zip(inc["overhead"], inc["queue"], inc["prefill"], strict=True)
    ]


def _queue_gauge(name: str, labels: dict[str, str]) -> list[dict[str, object]]:
    values = [40.0 if i in SLOW else 1.0 for i in range(SCRAPES)]
    return gauge_rows(name, labels, _times(), values)


def vllm_bundle(folder: Path, inc: dict[str, list[np.ndarray]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lab = {"engine": "0", "model_name": "llama", "namespace": "llm", "pod": "vllm-0"}
    t = _times()
    write_query_range(
        folder / "a.json",
        histogram_rows("vllm:time_to_first_token_seconds", lab, VLLM_TTFT, t, _ttft(inc)),
    )
    write_query_range(
        folder / "b.json",
        histogram_rows("vllm:request_queue_time_seconds", lab, VLLM_PHASE, t, inc["queue"]),
    )
    write_query_range(
        folder / "c.json",
        histogram_rows("vllm:request_prefill_time_seconds", lab, VLLM_PHASE, t, inc["prefill"]),
    )
    write_query_range(folder / "d.json", _queue_gauge("vllm:num_requests_waiting", lab))
    return folder


def sglang_bundle(folder: Path, inc: dict[str, list[np.ndarray]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lab = {"model_name": "llama", "tp_rank": "0", "pod": "sglang-0"}
    t = _times()
    stage = "sglang:per_stage_req_latency_seconds"
    rows = [
        *histogram_rows("sglang:time_to_first_token_seconds", lab, SGLANG_TTFT, t, _ttft(inc)),
        *histogram_rows("sglang:queue_time_seconds", lab, SGLANG_QUEUE, t, inc["queue"]),
        *histogram_rows(
            stage, {**lab, "stage": "prefill_forward"}, SGLANG_STAGE, t, inc["prefill"]
        ),
        *histogram_rows(
            stage,
            {**lab, "stage": "decode_loop"},
            SGLANG_STAGE,
            t,
            [p * 20 for p in inc["prefill"]],
        ),
        *_queue_gauge("sglang:num_queue_reqs", lab),
    ]
    write_query_range(folder / "sglang.json", rows)
    return folder


def dynamo_bundle(folder: Path, inc: dict[str, list[np.ndarray]]) -> Path:
    """Dynamo: the frontend's TTFT (from the HTTP frontend) and the vLLM worker's own metrics
    passed through on the worker port; the frontend adds its routing time."""
    folder.mkdir(parents=True, exist_ok=True)
    front = {"model": "llama", "dynamo_namespace": "dynamo", "dynamo_component": "frontend"}
    worker = {
        "engine": "0",
        "model_name": "llama",
        "dynamo_component": "backend",
        "worker_id": "w0",
    }
    t = _times()
    routing = [np.full(len(o), 0.003) for o in inc["overhead"]]
    engine_ttft = _ttft(inc)
    front_ttft = [e + r for e, r in zip(engine_ttft, routing, strict=True)]
    rows = [
        *histogram_rows(
            "dynamo_frontend_time_to_first_token_seconds", front, VLLM_TTFT, t, front_ttft
        ),
        *histogram_rows("vllm:time_to_first_token_seconds", worker, VLLM_TTFT, t, engine_ttft),
        *histogram_rows("vllm:request_queue_time_seconds", worker, VLLM_PHASE, t, inc["queue"]),
        *histogram_rows("vllm:request_prefill_time_seconds", worker, VLLM_PHASE, t, inc["prefill"]),
        *_queue_gauge("vllm:num_requests_waiting", worker),
    ]
    write_query_range(folder / "dynamo.json", rows)
    return folder


def test_metrics_only_bundle_gives_an_observed_percentile_window_and_engine_breakdown(
    tmp_path: Path,
) -> None:
    inc = _incident()
    cap = load_capture(vllm_bundle(tmp_path / "b", inc))
    assert cap.requests.num_rows == 0 and cap.spans.num_rows == 0
    rep = triage(cap, "p95 ttft < 500ms", whatif=False)
    slo = rep.slos[0]
    assert slo.source == "engine_histograms" and slo.breached
    lo, hi = rep.windows.incident
    assert lo > T0 and T0 + SLOW.start * STEP - 60 <= lo <= T0 + SLOW.start * STEP + 60
    assert T0 + SLOW.stop * STEP - 60 <= hi <= T0 + SLOW.stop * STEP + 60
    # the bucket that bounds the p95 holds the true p95 of the incident's requests
    truth = np.concatenate([x for i, x in enumerate(_ttft(inc)) if lo < T0 + i * STEP <= hi])
    assert slo.ci_low is not None and slo.ci_high is not None
    assert slo.ci_low <= float(np.percentile(truth, 95)) <= slo.ci_high
    assert slo.ci_low <= slo.observed <= slo.ci_high
    d = rep.decomposition
    assert d is not None and d.source == "engine_histograms" and "engine-side" in d.basis
    assert sum(s.seconds for s in d.stages) == pytest.approx(d.total)
    shares = {s.stage: s.seconds / d.total for s in d.stages}
    assert max(shares, key=lambda s: shares[s]) == "engine_queue"
    assert {"ingress", "gateway_queue", "pending"}.isdisjoint(shares)
    cats = [f.category for f in rep.findings]
    assert "insufficient_telemetry" in cats
    gap = next(f for f in rep.findings if f.rule == "metrics_traces_missing")
    assert any("--otlp-traces-endpoint" in s for s in gap.next_steps)
    assert not {"gateway_queue", "ingress_network"} & set(cats)  # never guessed


def test_counter_resets_and_new_pods_keep_every_observation(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    t = _times()
    obs = [rng.uniform(0.05, 0.2, 0 if i == 0 else 40) for i in range(SCRAPES)]
    lab = {"model_name": "m", "pod": "p0"}
    # p0 restarts at scrape 20: its counters start again from zero
    first = histogram_rows("vllm:time_to_first_token_seconds", lab, VLLM_TTFT, t[:20], obs[:20])
    again = histogram_rows("vllm:time_to_first_token_seconds", lab, VLLM_TTFT, t[20:], obs[20:])
    for a, b in zip(first, again, strict=True):
        a["values"] = [*a["values"], *b["values"]]  # type: ignore[misc]
    # p1 is created at scrape 40 and served 25 requests before its first scrape
    late = [rng.uniform(0.05, 0.2, 25 if i == 0 else 10) for i in range(SCRAPES - 40)]
    newer = histogram_rows(
        "vllm:time_to_first_token_seconds", {**lab, "pod": "p1"}, VLLM_TTFT, t[40:], late
    )
    write_query_range(tmp_path / "q.json", [*first, *newer])
    rep = analyze(load_capture(tmp_path), "p99 ttft < 5s", incident=(T0 - 1, T0 + SCRAPES * STEP))
    want = sum(len(o) for o in obs) + sum(len(o) for o in late)
    assert rep.slos[0].count == want
    assert rep.slos[0].source == "engine_histograms"


@pytest.mark.parametrize("slo", ["p95 ttft < 500ms", "p99 ttft < 1s"])
def test_the_same_incident_reads_the_same_from_vllm_sglang_and_dynamo(
    tmp_path: Path, slo: str
) -> None:
    inc = _incident(seed=11)
    reports = {
        name: triage(load_capture(make(tmp_path / name, inc)), slo, whatif=False)
        for name, make in (
            ("vllm", vllm_bundle),
            ("sglang", sglang_bundle),
            ("dynamo", dynamo_bundle),
        )
    }
    top = {n: r.findings[0].category for n, r in reports.items()}
    assert len(set(top.values())) == 1, top
    assert all(r.slos[0].breached for r in reports.values())
    shares = {}
    for name, rep in reports.items():
        d = rep.decomposition
        assert d is not None and d.source == "engine_histograms"
        shares[name] = {s.stage: s.seconds / d.total for s in d.stages}
    for stage in ("engine_queue", "prefill"):
        got = [s.get(stage, 0.0) for s in shares.values()]
        assert max(got) - min(got) <= 0.05, (stage, shares)
    assert shares["dynamo"].get("routing", 0.0) > 0  # the frontend's own share, named


def test_gauges_without_latency_histograms_say_what_to_export(tmp_path: Path) -> None:
    write_query_range(
        tmp_path / "g.json",
        gauge_rows("vllm:num_requests_waiting", {"pod": "p"}, _times(), [1.0] * SCRAPES),
    )
    rep = analyze(load_capture(tmp_path), "p95 ttft < 500ms")
    assert rep.slos[0].observed is None or math.isnan(rep.slos[0].observed)
    assert rep.windows is not None and rep.windows.incident[0] >= T0  # never the epoch
    assert any("vllm:time_to_first_token_seconds" in w for w in rep.data_quality.warnings)


def test_nothing_at_all_is_an_analysis_error() -> None:
    with pytest.raises(InsufficientDataError, match="nothing to triage"):
        triage(Capture(), "p95 ttft < 500ms", whatif=False)


def _mixed_bundle(folder: Path) -> Path:
    """Traces (a pending wait before the engine) plus the engine's TTFT and ITL histograms
    of the same requests; no token times."""
    rng = np.random.default_rng(5)
    n = 1200
    arrival = T0 + np.sort(rng.uniform(0, SCRAPES * STEP - STEP, n))
    engine = {
        "api_server": rng.uniform(0.002, 0.01, n),
        "engine_queue": rng.uniform(0.01, 0.05, n),
        "prefill": rng.uniform(0.04, 0.12, n),
    }
    stages = {"pending": rng.uniform(0.3, 0.6, n), **engine, "decode": rng.uniform(1.0, 2.0, n)}
    write_bundle(capture_from_arrays(arrival, stages, output_tokens=np.full(n, 100)), folder)
    engine_ttft = engine["api_server"] + engine["engine_queue"] + engine["prefill"]
    first = arrival + stages["pending"] + engine_ttft
    scrape = np.ceil((first - T0) / STEP).astype(int)
    per_scrape = [engine_ttft[scrape == i] for i in range(SCRAPES)]
    # per-gap ITL: mostly 15 ms with stalls of 300 ms that a per-request mean hides
    gaps = [np.where(rng.random(len(x) * 99) < 0.03, 0.3, 0.015) for x in per_scrape]
    lab = {"engine": "0", "model_name": "llama", "pod": "vllm-0"}
    rows = [
        *histogram_rows("vllm:time_to_first_token_seconds", lab, VLLM_TTFT, _times(), per_scrape),
        *histogram_rows("vllm:inter_token_latency_seconds", lab, VLLM_ITL, _times(), gaps),
    ]
    write_query_range(folder / "engine.json", rows)
    return folder


def test_a_mixed_bundle_uses_both_and_says_where_edge_and_engine_disagree(
    tmp_path: Path,
) -> None:
    rep = analyze(
        load_capture(_mixed_bundle(tmp_path / "mixed")), "p95 ttft < 500ms, p99 itl < 100ms"
    )
    ttft, itl = rep.slos
    assert ttft.source == "requests" and ttft.breached  # what the user sees stands
    assert itl.source == "engine_histograms" and "inter_token_latency" in itl.definition
    assert itl.breached  # the stalls show per gap; the per-request mean (~18 ms) hides them
    rows = rep.to_dict()["extra"]["engine_histograms"]["edge_vs_engine"]
    p95 = next(r for r in rows if r["metric"] == "ttft" and r["percentile"] == 95)
    assert p95["engine_ms"] < p95["edge_ms"]
    assert p95["before_engine_ms"] == pytest.approx(p95["edge_ms"] - p95["engine_ms"], abs=0.01)
    assert any("before the engine sees the request" in n for n in rep.data_quality.warnings)


def test_the_real_sglang_snapshot_reads_as_sglang_since_start(shared_data: Path) -> None:
    """SGLang's own /metrics exposition (one snapshot): its histograms give percentiles since
    the engine started, and the bucket bounds the value."""
    rep = analyze(
        load_capture(shared_data / "engines" / "sglang_metrics_sample.txt"), "p95 ttft < 500ms"
    )
    slo = rep.slos[0]
    assert slo.source == "engine_histograms" and slo.count > 0
    assert "sglang:time_to_first_token_seconds" in slo.definition
    assert slo.ci_low is not None and slo.observed is not None and slo.observed >= slo.ci_low
    assert any("since the engine started" in w for w in rep.data_quality.warnings)


def test_a_simulated_bundle_without_its_traces_still_finds_the_cause(tmp_path: Path) -> None:
    """The realistic bundle (Prometheus query_range files + kubectl output) of a built-in
    scenario, with the trace file left out as a cluster without tracing would have it."""
    full = simulate("scaling_lag")  # the time goes before the engine: Kubernetes decides
    no_traces = full.replace(requests=full.requests.slice(0, 0))
    write_bundle(no_traces, tmp_path)
    assert not list(tmp_path.glob("traces*"))
    rep = triage(load_capture(tmp_path), "p95 ttft < 500ms", whatif=False)
    assert rep.slos[0].observed is not None and rep.slos[0].source == "engine_histograms"
    lo, _hi = rep.windows.incident
    assert lo > 1e9  # a real time, not the epoch
    assert rep.findings[0].category == "scaling_lag"
    assert rep.findings[0].stage == "pending"
    assert not {"gateway_queue", "ingress_network"} & {f.category for f in rep.findings}


def _sampled_traces_beside_histograms(folder: Path, share: float, pending: float) -> Path:
    """The engine histograms of every request (``vllm_bundle``), and traces of ``share`` of
    the same requests (head sampling) that also wait ``pending`` seconds before the engine."""
    inc = _incident()
    vllm_bundle(folder, inc)
    rng = np.random.default_rng(3)
    arrival = np.concatenate(
        [T0 + (i - 1) * STEP + rng.uniform(0, STEP, len(q)) for i, q in enumerate(inc["queue"])]
    )
    stages = {
        "pending": np.full(len(arrival), pending),
        "api_server": np.concatenate(inc["overhead"]),
        "engine_queue": np.concatenate(inc["queue"]),
        "prefill": np.concatenate(inc["prefill"]),
    }
    keep = rng.random(len(arrival)) < share
    stages = {k: v[keep] for k, v in stages.items()} | {"decode": np.full(int(keep.sum()), 1.0)}
    cap = capture_from_arrays(arrival[keep], stages, output_tokens=np.full(int(keep.sum()), 50))
    write_bundle(cap, folder / "traces")
    return folder


def test_traces_too_sparse_to_place_the_incident_take_the_histograms_windows(
    tmp_path: Path,
) -> None:
    """3 % of requests traced, each waiting 0.3 s at the edge: every sparse time bin breaches
    (no healthy baseline), the engine's acute queueing hides in them.  The engine's full-rate
    histograms place the incident and its baseline; the requests are analysed over those."""
    slo = "p95 ttft < 300ms"
    rep = analyze(load_capture(_sampled_traces_beside_histograms(tmp_path / "s", 0.03, 0.3)), slo)
    hist = analyze(load_capture(vllm_bundle(tmp_path / "h", _incident())), slo)
    assert rep.slos[0].source == "requests"  # what the user sees stays the traced requests
    assert rep.windows.incident == hist.windows.incident
    assert rep.windows.baseline == hist.windows.baseline and rep.windows.detected
    lo, hi = rep.windows.incident
    assert abs(lo - (T0 + (SLOW.start - 1) * STEP)) <= STEP
    assert abs(hi - (T0 + (SLOW.stop - 1) * STEP)) <= STEP
    assert any("too sparse to place the incident" in n for n in rep.data_quality.warnings)
    # traced densely, the requests decide (here: a breach throughout, no baseline)
    dense = analyze(load_capture(_sampled_traces_beside_histograms(tmp_path / "d", 0.6, 0.3)), slo)
    assert dense.windows.baseline is None
    assert not any("too sparse" in n for n in dense.data_quality.warnings)
    # an incident the sparse requests placed themselves stands
    own = analyze(load_capture(_sampled_traces_beside_histograms(tmp_path / "o", 0.03, 0.0)), slo)
    assert own.windows.baseline is not None
    assert not any("too sparse" in n for n in own.data_quality.warnings)


def _gap_with_envoy(folder: Path, pending_in_incident: bool) -> tuple[Any, Any]:
    """The traces-missing finding (and the report) of the vLLM incident beside Envoy's pending
    gauge, queueing 4 requests in the slow scrapes or never, and its request counter."""
    vllm_bundle(folder, _incident())
    gateway = {"cluster_name": "outbound|8000||vllm.llm.svc.cluster.local",
               "pod": "istio-ingressgateway-7d9f8-abcde"}  # fmt: skip
    queued = [4.0 if pending_in_incident and i in SLOW else 0.0 for i in range(SCRAPES)]
    served = [float(PER_SCRAPE * i) for i in range(SCRAPES)]  # the cluster's request counter
    write_query_range(
        folder / "envoy.json",
        [
            *gauge_rows("envoy_cluster_upstream_rq_pending_active", gateway, _times(), queued),
            *gauge_rows("envoy_cluster_upstream_rq_total", gateway, _times(), served),
        ],
    )
    rep = triage(load_capture(folder), "p95 ttft < 500ms", whatif=False)
    return next(f for f in rep.findings if f.rule == "metrics_traces_missing"), rep


def test_envoy_queueing_raises_the_missing_traces_finding_without_guessing_a_gateway_cause(
    tmp_path: Path,
) -> None:
    """Envoy's own pending gauge queueing in the incident is gateway evidence that part of the
    time is before the engine: the traces-missing finding says so, weighs the pool's wait, and
    still names no gateway cause (only gateway spans can measure the wait)."""
    queued, rep = _gap_with_envoy(tmp_path / "queued", True)
    calm, calm_rep = _gap_with_envoy(tmp_path / "calm", False)
    pending = "envoy_cluster_upstream_rq_pending_active"
    named = [e for e in queued.evidence if e.signal == pending]
    assert "Envoy" in queued.summary and named and named[0].value == 4.0
    assert not [e for e in calm.evidence if e.signal == pending] and "Envoy" not in calm.summary
    # its impact is the pool's mean wait by Little's law (at most 4 pending / 10 requests per
    # second over the baseline's none), not the whole engine-side tail
    d = rep.decomposition
    assert d is not None and 0.1 < queued.impact <= 0.4 + 1e-9 < d.total
    assert queued.confidence > calm.confidence
    for report in (rep, calm_rep):
        assert not {"gateway_queue", "ingress_network"} & {f.category for f in report.findings}
