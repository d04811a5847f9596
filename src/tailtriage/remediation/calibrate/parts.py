"""Fits of the parts of the stack outside the engine: workload, per-stage latencies, pod
start-up, replicas and HPA settings."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow.compute as pc
from scipy import stats

from tailtriage.errors import InsufficientDataError
from tailtriage.model import Capture
from tailtriage.model import metric_catalog as M
from tailtriage.remediation.calibrate.gaps import Gap
from tailtriage.remediation.calibrate.observed import per_pod_series
from tailtriage.remediation.calibrate.steps import FloatArray
from tailtriage.simulator.config import (
    Arrivals,
    Dist,
    HpaConfig,
    ModelConfig,
    Phase,
    PodsConfig,
    ScenarioConfig,
)
from tailtriage.simulator.steptime import weight_bytes
from tailtriage.simulator.workload import Workload


def _lognormal(values: FloatArray) -> tuple[float, float, float]:
    """(median, sigma, KS statistic) of a lognormal fitted by log-moments to positive values."""
    v = values[np.isfinite(values) & (values > 0)]
    if v.size == 0:
        return 0.0, 0.0, math.nan
    logs = np.log(v)
    mu, sigma = float(np.median(logs)), float(logs.std())
    if v.size < 3 or sigma <= 0:
        return math.exp(mu), 0.0, math.nan
    ks = float(stats.kstest(logs, "norm", args=(float(logs.mean()), sigma)).statistic)
    return math.exp(mu), sigma, ks


def stage_samples(capture: Capture, stage: str) -> FloatArray:
    st = capture.stages
    if st.num_rows == 0:
        return np.zeros(0)
    mask = pc.equal(st["stage"], stage)
    return np.asarray(st.filter(mask)["duration"].to_numpy(zero_copy_only=False), dtype=np.float64)


def _event_durations(capture: Capture, kind: str, *, any_time: bool = False) -> FloatArray:
    """Durations of ``kind`` events during the capture (pods started long before it, e.g.
    listed by ``kubectl get pods``, are what a start-up took then, not during this incident:
    ``any_time`` takes them too)."""
    ev = capture.events
    if ev.num_rows == 0:
        return np.zeros(0)
    span = capture.time_range
    since = span[0] - 600.0 if span and not any_time else -math.inf
    ev = ev.filter(pc.greater_equal(ev["time"], since))
    sel = ev.filter(pc.equal(ev["kind"], kind))["duration"]
    arr = np.asarray(sel.to_numpy(zero_copy_only=False), dtype=np.float64)
    return np.asarray(arr[np.isfinite(arr)], dtype=np.float64)


def _series_last(capture: Capture, metric: str) -> float | None:
    se = capture.series
    if se.num_rows == 0:
        return None
    sel = se.filter(pc.equal(se["metric"], metric))
    if sel.num_rows == 0:
        return None
    order = np.argsort(sel["time"].to_numpy(zero_copy_only=False))
    return float(sel["value"].to_numpy(zero_copy_only=False)[order[-1]])


def _series_first(capture: Capture, metric: str) -> float | None:
    se = capture.series
    if se.num_rows == 0:
        return None
    sel = se.filter(pc.equal(se["metric"], metric))
    if sel.num_rows == 0:
        return None
    order = np.argsort(sel["time"].to_numpy(zero_copy_only=False))
    return float(sel["value"].to_numpy(zero_copy_only=False)[order[0]])


def observed_workload(capture: Capture) -> tuple[Workload, float]:
    """Every request that arrived (failed ones too: they loaded the stack), relative to the
    first arrival; sizes missing from failed requests get the median of the others."""
    rq = capture.requests.sort_by("arrival")
    if rq.num_rows == 0:
        raise InsufficientDataError("the capture has no requests to calibrate on")
    arrival = rq["arrival"].to_numpy(zero_copy_only=False).astype(np.float64)
    t0 = float(arrival[0])
    sizes = []
    for col in ("prompt_tokens", "output_tokens"):
        v = rq[col].to_numpy(zero_copy_only=False).astype(np.float64)
        ok = np.isfinite(v) & (v >= 1)
        fill = float(np.median(v[ok])) if ok.any() else 1.0
        sizes.append(np.where(ok, v, fill).round().astype(np.int64))
    n = arrival.size
    none = np.full(n, -1, dtype=np.int64)
    return (
        Workload(arrival - t0, sizes[0], sizes[1], none, np.zeros(n, dtype=np.int64), none * 0),
        t0,
    )


def fit_arrivals(rel: FloatArray) -> tuple[Arrivals, dict[str, Any]]:
    gaps = np.diff(rel)
    span = float(rel[-1] - rel[0]) if rel.size > 1 else 0.0
    rate = (rel.size - 1) / span if span > 0 else float(rel.size)
    cv = float(gaps.std() / gaps.mean()) if gaps.size > 1 and gaps.mean() > 0 else 1.0
    # rate over time in one-minute bins shows ramps and bursts the overall rate hides
    bins = np.arange(0.0, max(span, 60.0) + 60.0, 60.0)
    per_min = np.histogram(rel, bins=bins)[0] / 60.0
    process: Any = "poisson" if abs(cv - 1.0) < 0.1 else "gamma"
    part = {
        "n": int(rel.size),
        "rate_rps": rate,
        "cv": cv,
        "rate_per_minute_rps": [round(float(x), 4) for x in per_min],
    }
    return Arrivals(process=process, rate=rate, cv=max(cv, 1e-3)), part


def fit_lengths(w: Workload) -> tuple[Dist, Dist, dict[str, Any]]:
    out: list[Dist] = []
    part: dict[str, Any] = {}
    for name, v in (("prompt", w.prompt_tokens), ("output", w.output_tokens)):
        median, sigma, ks = _lognormal(v.astype(np.float64))
        out.append(Dist("lognormal", median=median, sigma=sigma, min=1.0))
        part[name] = {"median": median, "sigma": sigma, "ks": ks}
    return out[0], out[1], part


def latency_dist(samples: FloatArray) -> tuple[Dist, dict[str, Any]]:
    """A per-request latency (ms) distribution from a stage's observed durations."""
    if samples.size == 0:
        # the capture's requests start after this stage (their arrival is the start of the
        # outermost span seen), so the calibrated stack must not add it either
        return Dist("constant", value=0.0), {"n": 0, "note": "stage not in the capture: zero"}
    median, sigma, ks = _lognormal(samples * 1000.0)
    if median <= 0:
        return Dist("constant", value=0.0), {"n": int(samples.size), "note": "always zero"}
    p99 = float(np.percentile(samples, 99) * 1000.0)
    dist = Dist("lognormal", median=median, sigma=sigma, max=max(p99 * 1.5, median))
    return dist, {"n": int(samples.size), "median_ms": median, "sigma": sigma, "ks": ks}


#: a pod pending longer than this waited for a new node, not just for the scheduler
NODE_WAIT_S = 30.0
#: the weight-loading speed of a start-up fitted as all warm-up (instant loading)
FOLDED_LOAD_GB_S = 1e6


def fit_ingress(samples: FloatArray) -> tuple[Dist, float, float, dict[str, Any]]:
    """(per-request latency, TLS handshake ms, keep-alive share, quality) of the edge.

    Edge latency is often two populations - requests on a reused connection and requests that
    pay a TLS handshake - and one lognormal over both would invent a heavy tail.  When the log
    durations split into two clearly apart groups, the fast one is the latency, the gap between
    their medians the handshake and the fast share the keep-alive reuse."""
    dist, part = latency_dist(samples)
    if samples.size < 50 or dist.kind != "lognormal":
        return dist, 0.0, 1.0, part
    logs = np.log(np.maximum(samples, 1e-9))
    order = np.sort(logs)
    # the best two-group split of sorted values (1-D k-means with k=2, exhaustive)
    n = order.size
    csum, csq = np.cumsum(order), np.cumsum(order**2)
    k = np.arange(1, n)
    left = csq[:-1] - csum[:-1] ** 2 / k
    right = (csq[-1] - csq[:-1]) - (csum[-1] - csum[:-1]) ** 2 / (n - k)
    cut = int(np.argmin(left + right)) + 1
    fast, slow = np.exp(order[:cut]), np.exp(order[cut:])
    share = fast.size / n
    if not (0.05 <= share < 0.995) or np.median(slow) < 3.0 * np.median(fast):
        return dist, 0.0, 1.0, part
    fast_dist, _ = latency_dist(fast)
    tls_ms = float(np.median(slow) - np.median(fast)) * 1000.0
    # keep whichever model reproduces the observed tail quantiles of the stage better
    rng = np.random.default_rng(0)
    qs = (50.0, 90.0, 95.0, 99.0)
    want = np.percentile(samples * 1000.0, qs)
    one = dist.median * np.exp(dist.sigma * rng.standard_normal(20_000))
    two = fast_dist.median * np.exp(fast_dist.sigma * rng.standard_normal(20_000))
    two = two + (rng.random(20_000) >= share) * tls_ms
    err_one = float(np.mean(np.abs(np.log(np.percentile(one, qs) / want))))
    err_two = float(np.mean(np.abs(np.log(np.percentile(two, qs) / want))))
    part = {
        **part,
        "two_populations": {
            "keepalive_reuse": share,
            "tls_handshake_ms": tls_ms,
            "quantile_error": err_two,
            "single_quantile_error": err_one,
        },
    }
    if err_two >= err_one:
        return dist, 0.0, 1.0, part
    return fast_dist, tls_ms, share, part


def still_starting(capture: Capture) -> FloatArray:
    """Lower bounds of the start-ups that had not finished when the capture ends: for each pod
    scheduled during the capture (or the ten minutes before it) and never Ready, the time from
    its scheduling to the last thing known about it - its last event (a failed readiness
    probe, say), or the capture's end, whichever is later.  A slow start-up that outlasts the
    capture is the incident's cold start; leaving it out would replay the fleet's start-ups
    with defaults, minutes too fast.

    A pod gone from ``kubectl get pods`` by the export has no Ready condition to read; one
    that served requests, exported engine metrics or was killed did run, and is left out."""
    ev, span = capture.events, capture.time_range
    if ev.num_rows == 0 or span is None:
        return np.zeros(0)
    since = span[0] - 600.0
    scheduled: dict[str, float] = {}
    seen: dict[str, float] = {}
    ran: set[str] = set()
    for r in ev.select(["time", "kind", "object_kind", "object_name"]).to_pylist():
        if r["object_kind"] != "Pod" or not r["object_name"]:
            continue
        pod, t = str(r["object_name"]), float(r["time"])
        seen[pod] = max(t, seen.get(pod, t))
        if r["kind"] in ("pod_ready", "pod_killing"):
            ran.add(pod)
        elif r["kind"] == "pod_scheduled" and t >= since:
            scheduled[pod] = min(t, scheduled.get(pod, t))
    if not scheduled.keys() - ran:
        return np.zeros(0)
    ran |= {str(p) for p in capture.requests["replica"].to_pylist() if p}
    ran |= _engine_pods(capture)
    bounds = [max(seen[pod], span[1]) - t for pod, t in scheduled.items() if pod not in ran]
    return np.asarray([b for b in bounds if b > 0], dtype=np.float64)


#: engine gauges a serving pod exports once its server is up (any engine's spelling)
_ENGINE_UP_SIGNALS = ("running", "queue_waiting", "kv_usage")


def _engine_pods(capture: Capture) -> set[str]:
    """Pods whose engine had work in a scheduler gauge (running, waiting or cache use above
    0): their server was up.  A zero proves nothing: some exporters fill a pod's series with
    zeros from its creation."""
    pods: set[str] = set()
    for signal in _ENGINE_UP_SIGNALS:
        for metric in M.SIGNAL_METRICS.get(signal, ()):
            for pod, (_, values) in per_pod_series(capture, metric).items():
                if pod and values.size and float(values.max()) > 0.0:
                    pods.add(pod)
    return pods


def fit_pods(capture: Capture, base: PodsConfig) -> tuple[PodsConfig, dict[str, Any]]:
    pending = _event_durations(capture, "pod_pending")
    cold = _event_durations(capture, "cold_start")
    pulls = _event_durations(capture, "image_pulled")
    starting = still_starting(capture)
    changes: dict[str, Any] = {}
    part: dict[str, Any] = {"pending_n": int(pending.size), "cold_start_n": int(cold.size)}
    if not cold.size and not starting.size:
        # no pod started during the capture, or none whose Ready shows (deleted before the
        # listing): the pods of the same deployment started before it took this long, which
        # says more about the next one than the simulator's defaults (image, model, node
        # type are the same)
        cold = _event_durations(capture, "cold_start", any_time=True)
        if cold.size:
            part.update(cold_start_n=int(cold.size), cold_start_from="pods started earlier")
    if starting.size:
        part["still_starting_n"] = int(starting.size)
        part["still_starting_median_s"] = float(np.median(starting))
    if pending.size:
        # pending = scheduling, plus node provisioning when no node was free; the simulator
        # adds provisioning itself, so split the two populations (a node takes minutes)
        quick, slow = pending[pending < NODE_WAIT_S], pending[pending >= NODE_WAIT_S]
        delay = float(np.median(quick)) if quick.size else base.scheduling_delay_s
        changes["scheduling_delay_s"] = delay
        if slow.size:
            changes["node_provision_s"] = max(0.0, float(np.median(slow)) - delay)
        part["pending_median_s"] = float(np.median(pending))
    # a start-up still running at the capture's end took at least that long: the median of
    # the finished ones is raised to the median of those bounds when they run longer
    floor = float(np.median(starting)) if starting.size else 0.0
    if cold.size or starting.size:
        # cold start = image pull + weight load + warm-up; the split is unknown, so the pull
        # is taken as measured (or none) and the rest is warm-up with instant weight loading
        pull = float(np.median(pulls)) if pulls.size else 0.0
        median = max(float(np.median(cold)) if cold.size else 0.0, floor)
        changes.update(
            image_pull_s=pull,
            image_cached=not pulls.size,
            load_gb_s=FOLDED_LOAD_GB_S,
            warmup_s=max(0.0, median - pull),
        )
        part["cold_start_median_s"] = median
    if not changes:
        part["note"] = "no pod start-up events: defaults kept"
    return replace(base, **changes), part


#: weight loading speed assumed for a start-up whose split into loading and warm-up does not
#: show: the simulator's default (network storage or a PVC; local NVMe reads 3-6 GB/s)
ASSUMED_LOAD_GB_S = 2.0
#: ... taking at most this share of the start-up after the pull: some warm-up always remains
#: (CUDA graph capture, the profile run, the first readiness probe)
LOAD_SHARE_MAX = 0.8


def split_load(pods: PodsConfig, model: ModelConfig) -> tuple[PodsConfig, float | None]:
    """A fitted start-up (all warm-up, instant loading) split into weight loading at
    ASSUMED_LOAD_GB_S and the rest: the replay's start-up is the same, and a fix that loads
    weights faster changes it.  Returns the pods and the seconds given to loading (None when
    there was nothing to split)."""
    if pods.load_gb_s < FOLDED_LOAD_GB_S or pods.warmup_s <= 0:
        return pods, None
    gb = weight_bytes(model.shape, model.dtype) / 1e9
    load_s = min(gb / ASSUMED_LOAD_GB_S, LOAD_SHARE_MAX * pods.warmup_s)
    if load_s <= 0:
        return pods, None
    return replace(pods, load_gb_s=gb / load_s, warmup_s=pods.warmup_s - load_s), load_s


def load_split_gap(load_s: float, warmup_s: float) -> Gap:
    """The calibration gap :func:`split_load` leaves: the split is an assumption."""
    return Gap(
        "pods.load_gb_s",
        "pod conditions time the whole start-up; its split into weight loading and warm-up "
        "does not show",
        f"{load_s:.0f} s of the {load_s + warmup_s:.0f} s after the image pull load the weights "
        f"at {ASSUMED_LOAD_GB_S:g} GB/s, the rest is warm-up; a fix that loads weights faster "
        "is predicted against that split",
        "the engine's weight-loading time (vLLM logs 'Loading weights took ... seconds' and "
        "'Model loading took'), or pods.load_gb_s in a --base",
    )


def censored_start_gap(part: Mapping[str, Any]) -> Gap | None:
    """The gap a start-up known only as a lower bound leaves (``fit_pods`` raised the
    start-up to pods still starting at the capture's end): a fix's predicted gain from faster
    start-ups is then a best case."""
    floor = part.get("still_starting_median_s")
    if floor is None or part.get("cold_start_median_s") != floor:
        return None
    return Gap(
        "pods.warmup_s",
        f"{part['still_starting_n']} pod(s) scheduled during the capture were not Ready when "
        "it ends, so their start-up shows only as a lower bound",
        f"a start-up of {floor:.0f} s (the median bound); a longer real start-up makes a "
        "start-up fix's predicted gain a best case",
        "events or pod conditions past the incident (export a few minutes after it ends), or "
        "kube_pod_status_ready_time from kube-state-metrics",
    )


def _starting_at(capture: Capture, t0: float) -> tuple[float, ...]:
    """Seconds after ``t0`` at which pods scheduled before it became Ready (pod conditions'
    ``cold_start`` rows: at scheduling, duration to Ready): capacity already on its way when
    the capture begins, which a replay started from the ready replicas alone lacks."""
    ev = capture.events
    if ev.num_rows == 0:
        return ()
    rows = ev.select(["time", "kind", "duration"]).to_pylist()
    return tuple(
        sorted(
            round(float(r["time"]) + float(r["duration"]) - t0, 3)
            for r in rows
            if r["kind"] == "cold_start"
            and r["duration"] is not None
            and float(r["time"]) < t0 < float(r["time"]) + float(r["duration"])
        )
    )


def fit_scaling(
    capture: Capture, base: ScenarioConfig, w: Workload, t0: float | None = None
) -> tuple[PodsConfig, HpaConfig, dict[str, Any]]:
    """The replicas at the start (ready ones, and those still starting, with when each became
    Ready) and the HPA's bounds."""
    part: dict[str, Any] = {}
    starting = _starting_at(capture, t0) if t0 is not None else ()
    initial = _series_first(capture, "kube_deployment_status_replicas_ready")
    if initial is None:
        initial = _series_first(capture, "kube_horizontalpodautoscaler_status_current_replicas")
        if initial is not None:  # the HPA counts the pods still starting too
            initial = max(initial - len(starting), 1.0)
    if initial is None:
        # replicas seen serving in the first tenth of the requests
        rq = capture.requests.sort_by("arrival")
        head = rq.slice(0, max(1, rq.num_rows // 10))["replica"].to_pylist()
        initial = float(len({r for r in head if r}) or base.pods.initial_replicas)
        part["replicas_from"] = "requests"
    else:
        part["replicas_from"] = "series"
    hpa_changes: dict[str, Any] = {}
    for key, metric in (
        ("min_replicas", "kube_horizontalpodautoscaler_spec_min_replicas"),
        ("max_replicas", "kube_horizontalpodautoscaler_spec_max_replicas"),
    ):
        v = _series_last(capture, metric)
        if v is not None:
            hpa_changes[key] = int(v)
    hpa = replace(base.hpa, **hpa_changes)
    if hpa.min_replicas > int(initial):
        hpa = replace(hpa, min_replicas=int(initial))
    part.update(initial_replicas=int(initial), hpa=hpa_changes or "defaults kept")
    if starting:
        part["starting_ready_s"] = list(starting)
    pods = replace(base.pods, initial_replicas=int(initial), starting_ready_s=starting)
    return pods, hpa, part


#: series whose value is the replica count the autoscaler kept (kube-state-metrics)
REPLICA_SERIES = (
    "kube_horizontalpodautoscaler_status_current_replicas",
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "kube_deployment_status_replicas_ready",
)


def replicas_changed(capture: Capture) -> bool:
    """Whether the autoscaler acted during the capture: a rescale event, or a replica-count
    series that took more than one value."""
    ev = capture.events
    if ev.num_rows and pc.any(pc.equal(ev["kind"], "hpa_rescale")).as_py():
        return True
    se = capture.series
    if se.num_rows == 0:
        return False
    for metric in REPLICA_SERIES:
        sel = se.filter(pc.equal(se["metric"], metric))
        if sel.num_rows and pc.count_distinct(sel["value"]).as_py() > 1:
            return True
    return False


def window_width(span: float) -> float:
    """Windows of the observed timeline the per-window fits use: a minute, at most 20."""
    return max(60.0, span / 20.0)


@dataclass(frozen=True)
class ApiService:
    """The API server's own work per request, without its queue: ``base_ms`` (median) plus
    ``per_token_us`` per prompt token; per time window too (start_s, base_ms, per_token_us)."""

    base_ms: float
    per_token_us: float
    windows: tuple[tuple[float, float, float], ...] = ()


def _service_line(x: FloatArray, y: FloatArray, sigma: float) -> tuple[float, float]:
    edges = np.unique(np.quantile(x, np.linspace(0, 1, 11)))
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, max(edges.size - 2, 0))
    pts = [
        (float(np.median(x[idx == i])), float(np.percentile(y[idx == i], 10)))
        for i in np.unique(idx)
        if (idx == i).sum() >= 5
    ]
    if len(pts) >= 2:
        slope, intercept = np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)
    else:
        slope, intercept = 0.0, float(np.percentile(y, 10))
    slope, intercept = max(float(slope), 0.0), max(float(intercept), 0.0)
    return intercept * 1000.0 * math.exp(1.2816 * sigma), slope * 1e6


def api_service_fit(
    capture: Capture, sigma: float, t0: float = 0.0, span: float = 0.0
) -> ApiService | None:
    """The API server's service time, without its queue.

    The api_server stage holds the wait for a frontend worker too; the requests that did not
    wait are the fast ones, so a line through the 10th percentile of each prompt-length decile
    is the service time's 10th percentile (``base * exp(-1.28 sigma) + per_token * prompt``).
    Fitted over the whole capture and per time window (a template change mid-incident).  None
    when the stage or token counts are missing, or the frontend is no material part of TTFT."""
    st = capture.stages.filter(pc.equal(capture.stages["stage"], "api_server"))
    if st.num_rows < 50:
        return None
    rq = capture.requests
    by_id = {
        r: (p, a)
        for r, p, a in zip(
            rq["request_id"].to_pylist(),
            rq["prompt_tokens"].to_pylist(),
            rq["arrival"].to_pylist(),
            strict=True,
        )
    }
    rows = [by_id.get(r, (None, None)) for r in st["request_id"].to_pylist()]
    x = np.array([p if p is not None else np.nan for p, _ in rows], dtype=float)
    at = np.array([a if a is not None else np.nan for _, a in rows], dtype=float) - t0
    y = np.asarray(st["duration"].to_numpy(zero_copy_only=False), dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(at)
    x, y, at = x[ok], y[ok], at[ok]
    if x.size < 50:
        return None
    ttft = rq["ttft"].to_numpy(zero_copy_only=False).astype(float)
    ttft = ttft[np.isfinite(ttft)]
    if ttft.size == 0 or np.percentile(y, 95) < 0.1 * np.percentile(ttft, 95):
        return None  # the frontend is no material part of the tail: not worth a replay
    base_ms, per_token = _service_line(x, y, sigma)
    windows = []
    if span > 0:
        width = window_width(span)
        idx = (at // width).astype(np.int64)
        for i in np.unique(idx):
            sel = idx == i
            if sel.sum() >= 50:
                windows.append((float(i * width), *_service_line(x[sel], y[sel], sigma)))
    return ApiService(base_ms, per_token, tuple(windows))


def edge_phases(
    capture: Capture, t0: float, span: float, template: Phase
) -> tuple[tuple[Phase, ...], dict[str, Any]]:
    """The observed timeline cut into windows, each with its own fitted edge latency, when the
    edge changed over time (connection churn that starts mid-incident, a slow edge): one
    stationary distribution would smear a regime change over the whole replay.  One phase
    (``template`` over the whole span) when the edge was steady."""
    whole = (replace(template, duration_s=max(span + 1e-3, 1.0)),)
    arrival = dict(
        zip(
            capture.requests["request_id"].to_pylist(),
            capture.requests["arrival"].to_pylist(),
            strict=True,
        )
    )
    st = capture.stages.filter(pc.equal(capture.stages["stage"], "ingress"))
    if st.num_rows < 200 or span <= 0:
        return whole, {"windows": 1}
    at = np.array([arrival.get(r, np.nan) for r in st["request_id"].to_pylist()], dtype=float) - t0
    dur = np.asarray(st["duration"].to_numpy(zero_copy_only=False), dtype=float)
    width = window_width(span)
    n = math.ceil((span + 1e-3) / width)
    idx = np.clip((at // width).astype(np.int64), 0, n - 1)
    p95 = [float(np.percentile(dur[idx == i], 95)) for i in range(n) if (idx == i).sum() >= 50]
    if len(p95) < 2 or max(p95) < 1.5 * min(p95):
        return whole, {"windows": 1, "window_p95_ms": [round(v * 1000, 2) for v in p95]}
    phases = []
    for i in range(n):
        dur_i = width if i < n - 1 else span + 1e-3 - width * (n - 1)
        sel = dur[idx == i]
        settings: dict[str, Any] = {}
        if sel.size >= 50:
            dist, tls, reuse, _ = fit_ingress(sel)
            settings = {
                "ingress.latency_ms": dataclasses.asdict(dist),
                "ingress.tls_handshake_ms": tls,
                "ingress.keepalive_reuse": reuse,
            }
        phases.append(
            replace(template, name=f"window-{i}", duration_s=max(dur_i, 1e-3), set=settings)
        )
    return tuple(phases), {
        "windows": n,
        "window_s": width,
        "window_p95_ms": [round(v * 1000, 2) for v in p95],
    }
