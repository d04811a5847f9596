"""The queue-depth HPA sees requests parked in front of the engines, not only vLLM's gauge.

With a per-pod queue-proxy limit below ``max_num_seqs`` every wait happens in the proxy, so
``vllm:num_requests_waiting`` stays at most 1; the autoscaler's queue depth (docs/scenarios.md,
"Autoscaler") still counts the backlog, as a KEDA trigger over the proxy's queue gauge does.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.compute as pc

from tailtriage.model.capture import Capture
from tailtriage.remediation.calibrate.infer import rescale_events
from tailtriage.simulator import simulate
from tailtriage.simulator.config import apply_overrides, from_dict


def _config(routing: str) -> dict[str, object]:
    return {
        "name": "queue-depth",
        "seed": 3,
        "engine": {"max_num_seqs": 8},
        "gateway": {"routing": routing, "concurrency_limit": 2},
        "hpa": {"enabled": True, "metric": "vllm:num_requests_waiting", "target": 1,
                "min_replicas": 1, "max_replicas": 3, "sync_period_s": 5,
                "scrape_interval_s": 5, "scrape_lag_s": 5},
        "pods": {"initial_replicas": 1, "load_gb_s": 20.0, "warmup_s": 2.0, "image_pull_s": 3,
                 "scheduling_delay_s": 0.5, "drain_s": 5},
        "output": {"engine_sample_interval_s": 5, "sample_interval_s": 5, "token_times": "off"},
        "workload": [
            {"name": "busy", "duration_s": 60, "arrivals": {"rate": 6},
             "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.5, "max": 2000},
             "output_tokens": {"kind": "lognormal", "median": 80, "sigma": 0.5, "max": 400}},
        ],
    }  # fmt: skip


def scale_ups(cap: Capture) -> list[int]:
    ev = cap.events
    kinds = ev["kind"].to_pylist()
    attrs = ev["attributes"].to_pylist()
    out = []
    for kind, a in zip(kinds, attrs, strict=True):
        if kind == "hpa_rescale":
            out.append(int(json.loads(a)["replicas"] if isinstance(a, str) else a["replicas"]))
    return out


def _waiting_gauge(cap: Capture) -> np.ndarray:
    s = cap.series
    rows = s.filter(pc.equal(s["metric"], "vllm:num_requests_waiting"))
    return np.asarray(rows["value"].to_numpy(), dtype=float)


def test_backlog_in_the_queue_proxy_scales_the_deployment() -> None:
    cap = simulate(from_dict(_config("random"), source="test"))
    # precondition: vLLM's own gauge (at most 2 in flight < 8 seqs) never exceeds the target of
    # 1 per pod, so an HPA on it alone would never scale up ...
    waiting = _waiting_gauge(cap)
    assert waiting.size > 0 and float(waiting.max()) <= 1.0
    # ... yet requests do wait, in the proxies, and the queue-depth HPA adds pods for them
    stages = cap.stages
    held = pc.sum(pc.filter(stages["duration"], pc.equal(stages["stage"], "pending"))).as_py()
    assert held is not None and held > 0.0
    assert scale_ups(cap) and max(scale_ups(cap)) > 1


def test_requests_held_at_the_gateway_count_too() -> None:
    cap = simulate(from_dict(_config("least_outstanding"), source="test"))
    assert float(_waiting_gauge(cap).max()) <= 1.0
    assert scale_ups(cap) and max(scale_ups(cap)) > 1


def test_metrics_off_drops_the_series_and_nothing_the_autoscaler_reads() -> None:
    # the what-if replays run without series: the HPA must still see its own scrapes
    cfg = from_dict(_config("random"), source="test")
    on = simulate(cfg)
    off = simulate(apply_overrides(cfg, {"output.metrics": False}))
    assert on.series.num_rows > 0 and off.series.num_rows == 0
    assert scale_ups(on)  # the HPA acted on the scraped queue in this run
    for name in ("requests", "stages", "token_times", "events"):
        assert off.table(name).equals(on.table(name)), name


def _burst(window_s: float) -> dict[str, object]:
    """One pod at 1 request/s, a 10 s burst at 12/s, then 1/s again; an HPA on the running
    gauge at 4 per pod, averaged over ``window_s``."""
    lengths = {
        "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.3, "max": 2000},
        "output_tokens": {"kind": "lognormal", "median": 120, "sigma": 0.3, "max": 400},
    }
    cfg = _config("random")
    cfg["gateway"] = {"routing": "random"}
    cfg["hpa"] = {"enabled": True, "metric": "vllm:num_requests_running", "target": 4,
                  "min_replicas": 1, "max_replicas": 3, "sync_period_s": 5,
                  "scrape_interval_s": 5, "scrape_lag_s": 5, "metric_window_s": window_s}  # fmt: skip
    cfg["workload"] = [
        {"name": "calm", "duration_s": 60, "arrivals": {"rate": 1}, **lengths},
        {"name": "burst", "duration_s": 10, "arrivals": {"rate": 12}, **lengths},
        {"name": "after", "duration_s": 60, "arrivals": {"rate": 1}, **lengths},
    ]
    return cfg


def test_a_stable_window_rides_out_a_burst_an_instant_gauge_scales_on() -> None:
    """Knative's KPA decides on concurrency averaged over its 60 s stable window
    (``hpa.metric_window_s``); an HPA on the instant gauge scales on a 10 s burst."""
    instant = simulate(from_dict(_burst(0.0), source="test"))
    averaged = simulate(from_dict(_burst(60.0), source="test"))
    assert scale_ups(instant) and max(scale_ups(instant)) > 1
    assert scale_ups(averaged) == []


def _on_a_new_node(node_image: bool) -> Capture:
    """The queue-depth scene with no free GPU: every added pod waits for a node to join."""
    cfg = _config("random")
    cfg["pods"] = {"initial_replicas": 1, "load_gb_s": 20.0, "warmup_s": 2.0,
                   "scheduling_delay_s": 0.5, "drain_s": 5, "gpus_per_node": 1, "nodes": 1,
                   "max_nodes": 4, "node_provision_s": 5.0, "image_pull_s": 20.0,
                   "image_cached": True, "node_image_cached": node_image}  # fmt: skip
    return simulate(from_dict(cfg, source="test"))


def _pulls(cap: Capture) -> list[str]:
    ev = cap.events
    msgs = ev.filter(pc.equal(ev["kind"], "image_pulled"))["message"].to_pylist()
    return [m for m in msgs if "Successfully pulled" in str(m)]


def test_a_node_that_joins_pulls_the_image_unless_its_node_image_has_it() -> None:
    """``pods.image_cached`` keeps the image on nodes that pulled it; a node the cluster
    autoscaler adds has pulled nothing, unless the image is baked into the node image
    (``pods.node_image_cached``, what the prewarm fix asks for)."""
    plain, baked = _on_a_new_node(False), _on_a_new_node(True)
    assert scale_ups(plain) and scale_ups(baked)
    assert _pulls(plain) and not _pulls(baked)


def _rescales(cap: Capture, t0: float) -> list[tuple[float, int, int]]:
    """(seconds after ``t0``, replicas before, replicas after) of every rescale."""
    return [(t - t0, prev, size) for t, size, prev in rescale_events(cap) if prev is not None]


def test_a_knative_kpa_as_calibrated_scales_in_after_its_window_not_after_five_minutes() -> None:
    """The KPA (Knative's default autoscaler) ticks every 2 s, scales in as soon as its 60 s
    window's concurrency allows, at most halving the pods per tick; the HPA defaults it was
    replayed with before held every pod for the 300 s down-stabilization."""
    from tailtriage.remediation.calibrate.observed import infer_hpa_signal

    kpa, _ = infer_hpa_signal(Capture(), "concurrency")
    cfg = _config("random")
    cfg["gateway"] = {"routing": "random"}
    cfg["hpa"] = {"enabled": True, "metric": "concurrency", "target": 4, "min_replicas": 1,
                  "max_replicas": 4, "signal_weights": kpa["hpa.signal_weights"],
                  "metric_window_s": kpa["hpa.metric_window_s"]}  # fmt: skip
    lengths = {
        "prompt_tokens": {"kind": "lognormal", "median": 300, "sigma": 0.3, "max": 2000},
        "output_tokens": {"kind": "lognormal", "median": 120, "sigma": 0.3, "max": 400},
    }
    cfg["workload"] = [
        {"name": "busy", "duration_s": 120, "arrivals": {"rate": 12}, **lengths},
        {"name": "calm", "duration_s": 240, "arrivals": {"rate": 0.2}, **lengths},
    ]
    base = from_dict(cfg, source="test")
    as_kpa = apply_overrides(base, kpa)
    for run in (base, as_kpa):  # precondition: the burst scales both out
        assert any(b > a for _, a, b in _rescales(simulate(run), base.start_unix_s))
    downs = [r for r in _rescales(simulate(as_kpa), base.start_unix_s) if r[2] < r[1]]
    assert downs and downs[0][0] < 120.0 + 120.0, downs  # the window, the lag, a few ticks
    assert all(after >= before / 2 for _, before, after in downs), downs
    held = [r for r in _rescales(simulate(base), base.start_unix_s) if r[2] < r[1]]
    assert not held or held[0][0] >= 120.0 + 240.0, held


def test_a_kpa_panics_on_a_burst_its_stable_window_would_smooth_away() -> None:
    """Knative's panic mode: a 10 s burst at 12x the calm rate scales out within seconds on
    the 6 s panic window, where the 60 s stable window alone rides it out; and no pod is
    removed while the panic holds."""
    from tailtriage.remediation.calibrate.observed import infer_hpa_signal

    kpa, _ = infer_hpa_signal(Capture(), "concurrency")
    cfg = _burst(60.0)
    hpa = cfg["hpa"]
    assert isinstance(hpa, dict)
    hpa["metric"] = "concurrency"
    hpa["target"] = 16  # the 60 s window's mean stays under it, the 6 s window's is 2x over
    hpa["signal_weights"] = kpa["hpa.signal_weights"]
    base = from_dict(cfg, source="test")
    calm = apply_overrides(base, kpa)
    panics = apply_overrides(base, {**kpa, "hpa.panic_window_s": 6.0, "hpa.panic_threshold": 2.0})
    burst = 60.0  # the burst's start, seconds into the run
    up_calm = [t for t, a, b in _rescales(simulate(calm), base.start_unix_s) if b > a]
    rescales = _rescales(simulate(panics), base.start_unix_s)
    up = [t for t, a, b in rescales if b > a]
    assert up and up[0] < burst + 12.0, rescales  # the lag, a tick, the short window
    assert up_calm == []
    down = [t for t, a, b in rescales if b < a]
    assert all(t > up[-1] + 60.0 for t in down), rescales  # calm for the stable window first
