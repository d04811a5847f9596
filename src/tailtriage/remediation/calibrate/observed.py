"""Deployment facts read from what the engine and autoscaler did, not from names.

:mod:`.infer` reads what the telemetry *names* (model, GPU, HPA metric); this module reads
what the recorded behaviour *implies* when the names are missing or unknown to the simulator:

* :func:`infer_hpa_signal`: an HPA on a metric the simulator does not produce (a custom queue
  gauge, an External metric, a DCGM field other than ``DCGM_FI_DEV_GPU_UTIL``) is modelled from
  the metric's recorded series - a non-negative linear fit of it against the per-pod signals
  the simulator does produce (``simulator.config.HPA_SIGNALS``), so the replayed autoscaler
  reacts to the same signal the real one did;
* :func:`infer_kv_from_admission`: a KV-limited engine - it queued requests while running
  fewer sequences than ``max_num_seqs`` allows, or preempted - holds at most the blocks its
  requests held at those moments, which the request timelines give;
* :func:`infer_replica_groups`: multi-node replicas (LeaderWorkerSet: the leader pod
  ``<name>-<group>`` serves, its workers ``<name>-<group>-<i>`` only hold GPUs) from the pods
  DCGM reports GPUs for and the pods that served requests.

Each returns the settings it inferred (dotted keys of ``simulator.apply_overrides``) and a
record of the evidence, like the functions of :mod:`.infer`."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.optimize import nnls

from tailtriage.errors import InsufficientDataError
from tailtriage.model import Capture
from tailtriage.model.metric_catalog import canonical_metric, names_for
from tailtriage.remediation.calibrate.steps import engine_timings
from tailtriage.simulator.config import HPA_SIGNALS

#: a fitted HPA signal must explain at least this share of the metric's variance
SIGNAL_MIN_R2 = 0.5
#: samples of the metric (pod x scrape) needed for the signal fit
SIGNAL_MIN_SAMPLES = 10
#: a sample of a signal further than this (s) from the metric's scrape is not the same moment
SIGNAL_MATCH_S = 30.0
#: running below this share of max_num_seqs while requests waited: admission was KV-limited
KV_LIMITED_SHARE = 0.9
#: moments of queueing below the ceiling needed before a KV limit is inferred
KV_LIMITED_SAMPLES = 3
#: ... and their share of the engine's samples: a blip of waiting (arrivals between two
#: scheduler steps, 2 % of a gateway-limited engine's samples) is no limit
KV_LIMITED_SHARE_OF_SAMPLES = 0.1
#: a queue this large against the running batch is held back, not just arriving (a
#: gateway-limited engine shows 0.1-0.2; the KV-limited RTX 4090 run a median of 3.5)
KV_QUEUE_PER_RUNNING = 0.25
#: the held-blocks percentile over the queueing moments taken as the cache's size: the
#: timelines count a preempted request as holding its blocks while it waits, so not the max
KV_HELD_PERCENTILE = 95.0


def spellings(metric: str) -> list[str]:
    """``metric`` and every other exported spelling of the same concept with the same unit
    (the metric catalog's): vLLM before 0.9 exports ``vllm:gpu_cache_usage_perc`` for what
    later versions call ``vllm:kv_cache_usage_perc``."""
    concept = canonical_metric(metric)
    return [metric, *(n for n in names_for(concept) if n != metric)] if concept else [metric]


def per_pod_series(capture: Capture, metric: str) -> dict[str, tuple[Any, Any]]:
    """Per pod label ('' when the series has none): (sorted times, values); GPUs of one pod
    are averaged (DCGM writes one series per GPU).  Any spelling of ``metric`` counts."""
    se = capture.series
    if se.num_rows == 0:
        return {}
    sel = se.filter(pc.is_in(se["metric"], pa.array(spellings(metric))))
    rows: dict[str, dict[float, list[float]]] = {}
    for lab, t, v in zip(
        sel["labels"].to_pylist(), sel["time"].to_pylist(), sel["value"].to_pylist(), strict=True
    ):
        try:
            pod = str(json.loads(lab).get("pod", ""))
        except (TypeError, ValueError, AttributeError):
            pod = ""
        if v is not None and np.isfinite(v):
            rows.setdefault(pod, {}).setdefault(float(t), []).append(float(v))
    out = {}
    for pod, by_t in rows.items():
        times = np.array(sorted(by_t))
        out[pod] = (times, np.array([np.mean(by_t[t]) for t in times]))
    return out


def _at(series: tuple[Any, Any] | None, t: float) -> float | None:
    """The latest value at or before ``t`` within SIGNAL_MATCH_S, else None."""
    if series is None:
        return None
    times, values = series
    k = int(np.searchsorted(times, t + 1e-6, side="right")) - 1
    if k < 0 or t - times[k] > SIGNAL_MATCH_S:
        return None
    return float(values[k])


def _nearest(series: tuple[Any, Any] | None, t: float) -> float | None:
    """The value sampled nearest ``t``, before or after, within SIGNAL_MATCH_S, else None."""
    if series is None or len(series[0]) == 0:
        return None
    times, values = series
    k = int(np.argmin(np.abs(times - t)))
    return float(values[k]) if abs(times[k] - t) <= SIGNAL_MATCH_S else None


#: kube-state-metrics' record of the value an HPA read of each of its metrics
HPA_STATUS_METRIC = "kube_horizontalpodautoscaler_status_target_metric"


def hpa_status_series(capture: Capture, metric: str) -> tuple[tuple[Any, Any] | None, bool]:
    """The value the HPA read of ``metric`` as kube-state-metrics recorded it (its
    ``status_target_metric`` series labelled ``metric_name=metric``): (times, values) and
    whether it is a per-pod average (``metric_target_type="average"``: a Pods metric, a
    Knative KPA's concurrency) rather than a total; (None, False) when not recorded."""
    se = capture.series
    if se.num_rows == 0:
        return None, False
    sel = se.filter(pc.equal(se["metric"], HPA_STATUS_METRIC))
    by_t: dict[float, float] = {}
    average = False
    for lab, t, v in zip(
        sel["labels"].to_pylist(), sel["time"].to_pylist(), sel["value"].to_pylist(), strict=True
    ):
        try:
            d = json.loads(lab)
        except (TypeError, ValueError):
            continue
        if not isinstance(d, dict) or d.get("metric_name") != metric:
            continue
        if v is not None and np.isfinite(v):
            by_t[float(t)] = float(v)
            average = str(d.get("metric_target_type", "")).lower() in ("average", "averagevalue")
    if not by_t:
        return None, False
    times = np.array(sorted(by_t))
    return (times, np.array([by_t[t] for t in times])), average


#: autoscaler metrics whose meaning is documented, as ``hpa.signal_weights`` over
#: ``HPA_SIGNALS``: Knative's KPA ``concurrency`` is the requests in flight per pod (waiting
#: in front of or inside the engine, and running in it; knative.dev/docs/serving/autoscaling/
#: autoscaling-metrics) - a definition, not a fit to a series the KPA smooths over 60 s
NAMED_SIGNALS: dict[str, tuple[float, ...]] = {"concurrency": (1.0, 1.0, 0.0, 0.0, 0.0)}
#: ... and the window the autoscaler averages it over before deciding: the KPA's stable window
#: (``stable-window``, 60 s by default; knative.dev/docs/serving/autoscaling/kpa-specific).
#: Read instantly, a burst of a few seconds over a target set just above the baseline scales
#: the replay out minutes before the observed KPA did
STABLE_WINDOW_S: dict[str, float] = {"concurrency": 60.0}
#: ... and its control loop, for the same metric (config-autoscaler's defaults: tick-interval
#: 2s, max-scale-up-rate 1000, max-scale-down-rate 2.0 - at most half the pods per tick -,
#: scale-down-delay 0s; the queue-proxies are scraped every second).  An HPA's 15 s sync and
#: lag and its 300 s down-stabilization would scale the replay out and in minutes late.
#: Panic mode (``hpa.panic_window_s``: 6 s, 2x) is left off: on the tuning corpus it left the
#: confident share and model error as they were and worsened the after-fix error (18.9 ->
#: 21.5 %); a ``--base`` or ``--set hpa.panic_window_s=6`` turns it on
KPA_TIMING: dict[str, Any] = {
    "hpa.sync_period_s": 2.0,
    "hpa.scrape_interval_s": 1.0,
    "hpa.scrape_lag_s": 1.0,
    "hpa.scale_down.stabilization_s": 0.0,
    "hpa.scale_down.pods": 0,
    "hpa.scale_down.percent": 50.0,
    "hpa.scale_down.period_s": 2.0,
    "hpa.scale_up.pods": 1000,
    "hpa.scale_up.period_s": 2.0,
}


def infer_hpa_signal(capture: Capture, metric: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``hpa.signal_weights`` for an HPA ``metric`` the simulator does not produce: by its
    definition (``NAMED_SIGNALS``), else fitted to the metric's recorded series (per pod, or a
    total when the series names no pod) or, without one, to the value the HPA itself read
    (:func:`hpa_status_series`: a per-pod average is the total over the pods that reported,
    divided by their number)."""
    if metric in NAMED_SIGNALS:
        named = NAMED_SIGNALS[metric]
        settings: dict[str, Any] = {"hpa.signal_weights": list(named)}
        if metric in STABLE_WINDOW_S:
            settings["hpa.metric_window_s"] = STABLE_WINDOW_S[metric]
            settings.update(KPA_TIMING)
        return settings, {
            "weights": dict(zip(HPA_SIGNALS, named, strict=True)),
            "note": f"{metric}: by its definition",
        }
    target = per_pod_series(capture, metric)
    average = False
    if not target:
        status, average = hpa_status_series(capture, metric)
        if status is None:
            return {}, {"note": f"{metric} has no recorded series"}
        target = {"": status}
    signals = {name: per_pod_series(capture, name) for name in HPA_SIGNALS[:-1]}
    pods = sorted({p for s in signals.values() for p in s} - {""})
    rows: list[list[float]] = []
    y: list[float] = []
    for pod, (times, values) in target.items():
        members = [pod] if pod else pods  # a total over pods: the signals summed over them
        for t, v in zip(times, values, strict=True):
            x = []
            live = 0
            for name in HPA_SIGNALS[:-1]:
                vals = [_at(signals[name].get(m), float(t)) for m in members]
                seen = [u for u in vals if u is not None]
                live = max(live, len(seen))
                x.append(float(sum(seen)))
            if live == 0:
                continue
            rows.append([*x, float(live)])  # the constant, once per pod that reported
            y.append(float(v) * (live if average else 1))
    if len(y) < SIGNAL_MIN_SAMPLES:
        return {}, {"note": f"{metric}: {len(y)} samples matched to the engine's signals"}
    a, b = np.array(rows), np.array(y)
    used = a.any(axis=0)  # a signal the capture lacks is no column
    scale = np.maximum(np.abs(a[:, used]).max(axis=0), 1e-12)
    coef, _ = nnls(a[:, used] / scale, b)
    weights = np.zeros(a.shape[1])
    weights[used] = coef / scale
    pred = a @ weights
    ss_tot = float(((b - b.mean()) ** 2).sum()) or 1e-30
    r2 = 1.0 - float(((b - pred) ** 2).sum()) / ss_tot
    part = {
        "samples": len(y),
        "r2": round(r2, 4),
        "weights": dict(zip(HPA_SIGNALS, (round(float(w), 6) for w in weights), strict=True)),
    }
    if r2 < SIGNAL_MIN_R2:
        return {}, {**part, "note": f"{metric} is not explained by the engine's signals"}
    return {"hpa.signal_weights": [float(w) for w in weights]}, part


def infer_kv_from_admission(
    capture: Capture, max_num_seqs: int, block_size: int = 16
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``engine.num_gpu_blocks`` of a KV-limited engine: when requests waited while fewer
    than ``max_num_seqs`` ran (or the engine preempted), the scheduler had no free blocks for
    the next prompt, so the blocks the running requests held then (prompt prefilled so far
    plus tokens decoded, from the request timelines) were the cache's size."""
    running = per_pod_series(capture, "vllm:num_requests_running")
    waiting = per_pod_series(capture, "vllm:num_requests_waiting")
    preempted = per_pod_series(capture, "vllm:num_preemptions_total")
    preemptions = sum(float(v[-1] - v[0]) for _, v in preempted.values() if v.size)
    moments: list[tuple[str, float]] = []
    samples = 0
    for pod, (times, run) in running.items():
        samples += len(times)
        for t, r in zip(times, run, strict=True):
            w = _at(waiting.get(pod), float(t)) or 0.0
            held_back = w > 0 and w >= KV_QUEUE_PER_RUNNING * max(r, 1.0)
            if held_back and r < KV_LIMITED_SHARE * max_num_seqs:
                moments.append((pod, float(t)))
    part: dict[str, Any] = {"queued_below_ceiling": len(moments), "preemptions": preemptions}
    enough = max(KV_LIMITED_SAMPLES, KV_LIMITED_SHARE_OF_SAMPLES * samples)
    if len(moments) < enough and not (preemptions > 0 and len(moments) >= KV_LIMITED_SAMPLES):
        return {}, {**part, "note": "the engine never queued below its sequence ceiling"}
    try:
        t = engine_timings(capture)
    except InsufficientDataError as exc:
        return {}, {**part, "note": str(exc)}
    by_name = {name: i for i, name in enumerate(t.replicas)}
    held = []
    for pod, at in moments:
        r = by_name.get(pod, 0 if len(t.replicas) == 1 else -1)
        x = at - t.t0
        on = (t.replica == r) & (t.scheduled <= x) & (t.finish > x)
        if not on.any():
            continue
        s, f, e = t.scheduled[on], t.first_token[on], t.finish[on]
        p, o = t.prompt[on], t.output[on]
        prefilled = np.where(x >= f, p, p * (x - s) / np.maximum(f - s, 1e-9))
        decoded = np.where(x > f, o * (x - f) / np.maximum(e - f, 1e-9), 0.0)
        held.append(float(np.ceil((prefilled + decoded) / block_size).sum()))
    if len(held) < KV_LIMITED_SAMPLES:
        return {}, {**part, "note": "queueing moments not matched to the requests' timelines"}
    blocks = int(np.percentile(held, KV_HELD_PERCENTILE))
    part.update(blocks=blocks, held_p50=float(np.median(held)), samples=len(held))
    return {"engine.num_gpu_blocks": blocks}, part


_WORKER = re.compile(r"^(?P<leader>.+)-(?P<worker>\d+)$")


def infer_replica_groups(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """Multi-node replicas: pods with GPUs (DCGM's ``pod`` label) that served no request and
    are named ``<serving pod>-<i>`` are that replica's workers (LeaderWorkerSet naming), so a
    replica spans ``1 + workers`` pods - modelled as pipeline stages across them (vLLM's
    multi-node layout: tensor parallel inside a node, pipeline parallel across nodes)."""
    se = capture.series
    if se.num_rows == 0:
        return {}, {"note": "no series"}
    gpus: dict[str, set[str]] = {}
    sel = se.filter(pc.starts_with(se["metric"], "DCGM_"))
    for lab in pc.unique(sel["labels"]).to_pylist():
        try:
            d = json.loads(lab)
        except (TypeError, ValueError):
            continue
        if isinstance(d, dict) and d.get("pod"):
            gpus.setdefault(str(d["pod"]), set()).add(str(d.get("gpu", "")))
    serving = {r for r in capture.requests["replica"].to_pylist() if r}
    workers: dict[str, int] = {}
    for pod in gpus:
        m = _WORKER.match(pod)
        if pod not in serving and m and m.group("leader") in serving:
            workers[m.group("leader")] = workers.get(m.group("leader"), 0) + 1
    if not workers:
        return {}, {"note": "every pod with GPUs served requests: one pod per replica"}
    size = 1 + max(workers.values())
    per_pod = max(len(gpus.get(leader, set())) for leader in workers) or 1
    # the simulator schedules a replica as one unit: its group's GPUs count as one node
    out = {"gpu.tp": per_pod, "gpu.pp": size, "gpu.interconnect": "cross_node",
           "pods.gpus_per_node": per_pod * size}  # fmt: skip
    return out, {"groups": len(workers), "pods_per_replica": size, "gpus_per_pod": per_pod}


#: index of dispersion (variance / mean across pods) of the requests in each engine below
#: which the gateway balanced load: least outstanding keeps it near 0 (0.003 on a saturated
#: simulated stack), random routing near 1 (0.4 when running is capped at max_num_seqs)
BALANCED_DISPERSION = 0.2


def infer_routing_from_gauges(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """``gateway.routing`` from how evenly the requests in each engine (vLLM's running plus
    waiting gauges) spread over pods at each scrape - for sampled traces, whose requests in
    flight say too little about each replica's load."""
    running = per_pod_series(capture, "vllm:num_requests_running")
    waiting = per_pod_series(capture, "vllm:num_requests_waiting")
    by_time: dict[float, list[float]] = {}
    for pod, (times, values) in running.items():
        for t, v in zip(times, values, strict=True):
            queued = _at(waiting.get(pod), float(t)) or 0.0
            by_time.setdefault(round(float(t), 1), []).append(float(v) + queued)
    ratios = [
        float(np.var(v) / np.mean(v)) for v in by_time.values() if len(v) >= 2 and np.mean(v) >= 1
    ]
    if len(ratios) < SIGNAL_MIN_SAMPLES:
        return {}, {"note": "fewer than two pods with running sequences"}
    d = float(np.median(ratios))
    routing = "least_outstanding" if d < BALANCED_DISPERSION else "random"
    return {"gateway.routing": routing}, {"dispersion": d, "scrapes": len(ratios)}


def infer_limit_from_gauges(capture: Capture) -> tuple[dict[str, Any], dict[str, Any]]:
    """A per-replica concurrency limit from the engines' own gauges: with requests held at the
    gateway, the engines together hold no more than the limit lets through (running plus
    waiting) - for sampled traces, whose requests in flight under-count every replica's load.

    The limit is the most the pods held *on average* at one scrape: a pool-wide limit
    (Envoy's ``max_connections``) shares its slots over the pods, so one pod may hold a few
    more than its share while another holds fewer (125 slots over two pods: 65 and 60), and
    the largest single pod over-states the replica's share; a per-pod limit (Knative's
    ``containerConcurrency``) holds every pod at it while requests wait, the same figure."""
    running = per_pod_series(capture, "vllm:num_requests_running")
    waiting = per_pod_series(capture, "vllm:num_requests_waiting")

    def held(pod: str, t: float) -> float | None:
        r = _nearest(running.get(pod), t)
        return None if r is None else r + (_nearest(waiting.get(pod), t) or 0.0)

    # at each pod's scrape, every pod's nearest sample (targets are scraped at their own offsets)
    means: list[float] = []
    most = 0.0
    for times in (times for times, _ in running.values()):
        for t in times:
            now = [h for h in (held(pod, float(t)) for pod in running) if h is not None]
            means.append(float(np.mean(now)))
            most = max(most, *now)
    if len(means) < SIGNAL_MIN_SAMPLES:
        return {}, {"note": "no running/waiting gauges"}
    per_pod = max(means)
    limit = int(np.floor(per_pod + 0.5))
    part = {"max_in_engine": most, "max_mean_per_pod": round(per_pod, 2)}
    return ({"gateway.concurrency_limit": limit} if limit >= 1 else {}), part
