"""What the simulation observes, and its conversion into a Capture.

The capture looks like real telemetry after ingest: request rows, contiguous stages with the
canonical names, per-token times, scraped metric series with the names and labels that vLLM,
DCGM, cAdvisor and kube-state-metrics export, and Kubernetes events.  What only the simulator
knows (scenario, root cause, incident window, the config) goes to ``Metadata.extra``.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from tailtriage.model.capture import Capture
from tailtriage.simulator.cluster import (
    ITERATION_BUCKETS,
    ITL_BUCKETS,
    PHASE_BUCKETS,
    READY,
    TERMINATING,
    TOKEN_BUCKETS,
    TTFT_BUCKETS,
    Pod,
)
from tailtriage.simulator.config import HPA_SIGNALS, ScenarioConfig
from tailtriage.simulator.steptime import RooflineStepTime
from tailtriage.simulator.workload import Workload

if TYPE_CHECKING:
    from tailtriage.simulator.simulation import Simulation


def _labels(**kv: str) -> str:
    return _encoded(tuple(sorted(kv.items())))


#: distinct label sets a run meets (pods x metric buckets x GPUs): a few thousand at most, so
#: the cache holds them all and each is JSON-encoded once instead of once per sample
_LABEL_SETS = 16_384


@functools.lru_cache(maxsize=_LABEL_SETS)
def _encoded(items: tuple[tuple[str, str], ...]) -> str:
    """The canonical JSON of a label set (keys sorted, no spaces), as the capture stores it."""
    return json.dumps(dict(items), separators=(",", ":"))


class Recorder:
    """Arrays per request, plus rows of series and events, filled during the run."""

    def __init__(self, cfg: ScenarioConfig, n: int) -> None:
        self.cfg = cfg
        self.n = n
        nan = np.full(n, np.nan)
        self.dispatch = nan.copy()
        self.engine_arrival = nan.copy()
        self.first_token = nan.copy()
        self.finish = nan.copy()
        self.replica = np.full(n, -1, dtype=np.int64)
        self.status = np.zeros(n, dtype=np.int64)
        self.wait_kind = np.zeros(n, dtype=np.int64)  # 1 pending, 2 gateway_queue
        self.series: dict[str, list[Any]] = {"metric": [], "labels": [], "time": [], "value": []}
        self.events: list[dict[str, Any]] = []
        #: per engine tick: (time, per pod (waiting, running, kv usage, CPU s, GPU busy s), held)
        self.snapshots: list[tuple[float, dict[int, tuple[float, ...]], int]] = []
        self._dcgm: dict[int, tuple[float, float, float]] = {}  # busy, compute, memory seconds
        self.capture: Capture | None = None
        #: per request: whether the run waits for it to end (``watch``); by default none, and
        #: ``watched_open`` never reaches 0
        self.watched: list[bool] = [False] * n
        self.watched_open = -1

    # -- request milestones --------------------------------------------------------------
    def set_requests(self, wl: Workload, ingress: np.ndarray, rng: np.random.Generator) -> None:
        self.wl = wl
        self.arrival = wl.arrival
        self.gw = wl.arrival + ingress
        hi = rng.integers(0, 2**63, self.n, dtype=np.int64)
        lo = rng.integers(0, 2**63, self.n, dtype=np.int64)
        self.trace_ids = [
            f"{a:016x}{b:016x}" for a, b in zip(hi.tolist(), lo.tolist(), strict=True)
        ]

    def dispatched(self, i: int, t: float, pod: int) -> None:
        self.dispatch[i] = t
        self.replica[i] = pod

    def watch(self, until: float) -> None:
        """Count the requests arriving by ``until`` (relative seconds) that are still open:
        :attr:`watched_open` reaches 0 when the last of them ends."""
        self.watched = (self.arrival <= until).tolist()
        self.watched_open = sum(self.watched)

    def reject(self, i: int, t: float) -> None:
        self.status[i] = 2
        self.finish[i] = t
        if self.watched[i]:
            self.watched_open -= 1

    def complete(self, i: int, t: float, pod: int, status: int) -> None:
        self.finish[i] = t
        self.status[i] = status
        if self.watched[i]:
            self.watched_open -= 1

    def fail_inside(self, pod: Pod, t: float) -> int:
        """Requests still on a killed pod fail; returns how many."""
        idx = np.nonzero((self.replica == pod.index) & (self.status == 0))[0]
        self.status[idx] = 4
        self.finish[idx] = t
        self.watched_open -= sum(self.watched[i] for i in idx.tolist())
        return len(idx)

    # -- events ----------------------------------------------------------------------------
    def event(self, t: float, kind: str, pod: Pod, reason: str, message: str,
              duration: float | None = None) -> None:  # fmt: skip
        self.events.append({
            "time": t, "kind": kind, "object_kind": "Pod", "object_name": pod.name,
            "reason": reason, "message": message, "duration": duration,
            "attributes": {"pod": pod.name, "node": pod.node.name if pod.node else None},
        })  # fmt: skip

    def hpa_event(self, t: float, desired: int, current: int, sim: Simulation) -> None:
        h = self.cfg.hpa
        above = "above" if desired > current else "below"
        metric = (
            "cpu resource utilization (percentage of request)" if h.metric == "cpu" else h.metric
        )
        out = self.cfg.output
        self.events.append({
            "time": t, "kind": "hpa_rescale", "object_kind": "HorizontalPodAutoscaler",
            "object_name": out.deployment, "reason": "SuccessfulRescale",
            "message": f"New size: {desired}; reason: {metric} {above} target",
            "duration": None, "attributes": {"replicas": desired, "previous": current},
        })  # fmt: skip
        self.events.append({
            "time": t, "kind": "replicaset_scaled", "object_kind": "Deployment",
            "object_name": out.deployment, "reason": "ScalingReplicaSet",
            "message": f"Scaled {'up' if desired > current else 'down'} replica set "
                       f"{out.deployment}-{sim.templates[-1].hash} to {desired}",
            "duration": None, "attributes": {"replicas": desired},
        })  # fmt: skip

    def rollout_event(self, t: float, sim: Simulation) -> None:
        out = self.cfg.output
        tpl = sim.templates[-1]
        self.events.append({
            "time": t, "kind": "rollout", "object_kind": "Deployment",
            "object_name": out.deployment, "reason": "ScalingReplicaSet",
            "message": f"Scaled up replica set {out.deployment}-{tpl.hash} to {sim.desired}",
            "duration": None,
            "attributes": {"revision": tpl.version + 1, "model": tpl.model_name,
                           "replicas": sim.desired},
        })  # fmt: skip

    # -- metrics ---------------------------------------------------------------------------
    def _row(self, metric: str, labels: str, t: float, value: float) -> None:
        s = self.series
        s["metric"].append(metric)
        s["labels"].append(labels)
        s["time"].append(t)
        s["value"].append(value)

    def sample(self, t: float, k: int, sim: Simulation) -> None:
        """A scrape at ``t``: engine gauges every tick, the rest every sample interval."""
        cfg = self.cfg
        out = cfg.output
        every = max(1, round(out.sample_interval_s / out.engine_sample_interval_s))
        full = k % every == 0
        t_abs = cfg.start_unix_s + t
        snap: dict[int, tuple[float, ...]] = {}
        for pod in sim.pods:
            if pod.state not in (READY, TERMINATING):
                continue
            b = pod.batcher
            base = {"engine": "0", "model_name": pod.template.model_name,
                    "namespace": out.namespace, "pod": pod.name}  # fmt: skip
            cpu_total = cfg.cpu.base_cores * (t - pod.started_at) + pod.cpu_s
            snap[pod.index] = (b.num_waiting, b.num_running, b.kv_usage, cpu_total, pod.busy_s)
            if not out.metrics:  # the snapshot above is what the autoscaler reads
                continue
            lab = _labels(**base)
            self._row("vllm:num_requests_running", lab, t_abs, b.num_running)
            self._row("vllm:num_requests_waiting", lab, t_abs, b.num_waiting)
            self._row("vllm:kv_cache_usage_perc", lab, t_abs, b.kv_usage)
            if full:
                self._full_pod_sample(pod, base, lab, t, t_abs, cpu_total)
        # waiting for an engine slot in front of the engines: the gateway / activator buffer
        # and every pod's queue-proxy backlog (Knative ``revision_queue_depth`` less in-flight)
        held = len(sim.queue) + sum(len(p.backlog) for p in sim.pods)
        self.snapshots.append((t, snap, held))
        if full and out.metrics:
            self._cluster_sample(t_abs, sim)

    def _full_pod_sample(self, pod: Pod, base: dict[str, str], lab: str, t: float,
                         t_abs: float, cpu_total: float) -> None:  # fmt: skip
        b = pod.batcher
        out = self.cfg.output
        self._row("vllm:num_preemptions_total", lab, t_abs, b.preemptions_total)
        self._row("vllm:prompt_tokens_total", lab, t_abs, b.prompt_tokens_total)
        self._row("vllm:generation_tokens_total", lab, t_abs, b.generation_tokens_total)
        self._row("vllm:request_success_total", _labels(**base, finished_reason="length"),
                  t_abs, pod.requests_done)  # fmt: skip
        for name, hist, buckets in (
            ("vllm:time_to_first_token_seconds", pod.ttft_hist, TTFT_BUCKETS),
            ("vllm:inter_token_latency_seconds", pod.itl_hist, ITL_BUCKETS),
            ("vllm:e2e_request_latency_seconds", pod.e2e_hist, PHASE_BUCKETS),
            ("vllm:request_queue_time_seconds", pod.queue_hist, PHASE_BUCKETS),
            ("vllm:request_prefill_time_seconds", pod.phase_hists["prefill"], PHASE_BUCKETS),
            ("vllm:request_decode_time_seconds", pod.phase_hists["decode"], PHASE_BUCKETS),
            ("vllm:request_inference_time_seconds", pod.phase_hists["inference"], PHASE_BUCKETS),
            ("vllm:iteration_tokens_total", pod.iter_hist, ITERATION_BUCKETS),
            ("vllm:request_prompt_tokens", pod.token_hists["prompt"], TOKEN_BUCKETS),
            ("vllm:request_generation_tokens", pod.token_hists["output"], TOKEN_BUCKETS),
        ):
            cum = 0.0
            for le, c in zip((*buckets, "+Inf"), hist[:-1], strict=True):
                cum += c
                self._row(f"{name}_bucket", _labels(**base, le=str(le)), t_abs, cum)
            self._row(f"{name}_sum", lab, t_abs, hist[-1])
            self._row(f"{name}_count", lab, t_abs, cum)
        cont = _labels(container="vllm", namespace=out.namespace, pod=pod.name)
        self._row("container_cpu_usage_seconds_total", cont, t_abs, cpu_total)
        # DCGM: busy share of the last interval; SM / DRAM activity from the roofline split
        interval = out.sample_interval_s
        compute_s, memory_s = _roofline_split(pod)
        busy_prev, comp_prev, mem_prev = self._dcgm.get(pod.index, (0.0, 0.0, 0.0))
        busy = min(1.0, (pod.busy_s - busy_prev) / interval)
        comp = min(busy, (compute_s - comp_prev) / interval)
        mem = min(busy, (memory_s - mem_prev) / interval)
        self._dcgm[pod.index] = (pod.busy_s, compute_s, memory_s)
        # SM active counts any resident warp, so it sits near busy; tensor/DRAM follow the split
        sm = min(1.0, 0.7 * busy + 0.3 * comp)
        for g in range(pod.template.gpus):
            glab = _labels(gpu=str(g), Hostname=pod.node.name if pod.node else "",
                           modelName=f"NVIDIA {self.cfg.gpu.type}", namespace=out.namespace,
                           pod=pod.name, container="vllm")  # fmt: skip
            self._row("DCGM_FI_DEV_GPU_UTIL", glab, t_abs, round(100.0 * busy))
            self._row("DCGM_FI_PROF_SM_ACTIVE", glab, t_abs, sm)
            self._row("DCGM_FI_PROF_DRAM_ACTIVE", glab, t_abs, mem)
            self._row("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", glab, t_abs, comp * self.cfg.step_time.mfu)

    def _cluster_sample(self, t_abs: float, sim: Simulation) -> None:
        out = self.cfg.output
        hpa = _labels(horizontalpodautoscaler=out.deployment, namespace=out.namespace)
        dep = _labels(deployment=out.deployment, namespace=out.namespace)
        live = sim._live()
        ready = sum(1 for p in sim.pods if p.state == READY)
        if self.cfg.hpa.enabled:
            h = self.cfg.hpa
            for name, value in (
                ("status_current_replicas", len(live)),
                ("status_desired_replicas", sim.desired),
                ("spec_min_replicas", h.min_replicas),
                ("spec_max_replicas", h.max_replicas),
            ):
                self._row(f"kube_horizontalpodautoscaler_{name}", hpa, t_abs, value)
        self._row("kube_deployment_spec_replicas", dep, t_abs, sim.desired)
        self._row("kube_deployment_status_replicas", dep, t_abs, len(live))
        self._row("kube_deployment_status_replicas_ready", dep, t_abs, ready)

    def hpa_metric(
        self, t_obs: float, sim: Simulation, window_s: float | None = None
    ) -> tuple[float, int]:
        """(metric total over ready pods, pods with a value) as last scraped at ``t_obs``,
        averaged over ``window_s`` (default: ``hpa.metric_window_s``)."""
        h = self.cfg.hpa
        window = h.metric_window_s if window_s is None else window_s
        step = self.cfg.output.engine_sample_interval_s
        every = max(1, round(h.scrape_interval_s / step))
        chosen = None
        for j in range(len(self.snapshots) - 1, -1, -1):
            ts = self.snapshots[j][0]
            if ts <= t_obs + 1e-9 and round(ts / step) % every == 0:
                chosen = j
                break
        if chosen is None:
            return 0.0, 0
        total, n = self._metric_at(chosen, every, sim)
        if window <= 0:
            return total, n
        # averaged over the window that ends at the chosen scrape (Knative's stable window)
        start = self.snapshots[chosen][0] - window
        earlier = [
            self._metric_at(j, every, sim)[0]
            for j in range(chosen - 1, -1, -1)
            if self.snapshots[j][0] > start + 1e-9
        ]
        return (total + sum(earlier)) / (1 + len(earlier)), n

    def _metric_at(self, chosen: int, every: int, sim: Simulation) -> tuple[float, int]:
        """(metric total over ready pods, pods with a value) at snapshot ``chosen``."""
        h = self.cfg.hpa
        step = self.cfg.output.engine_sample_interval_s
        _, snap, queued = self.snapshots[chosen]
        # weights model a metric the simulator does not produce; a what-if that names one it
        # does (``hpa.metric=vllm:num_requests_waiting``) scales on that, whatever the weights
        custom = bool(h.signal_weights) and h.metric not in (*HPA_SIGNALS[:-1], "cpu")
        if h.metric == "cpu":
            back = max(1, round(h.cpu_window_s / step))
            prev_j = max(0, chosen - back)
            prev = self.snapshots[prev_j][1] if prev_j < chosen else {}
            req = sim.cfg.pods.cpu_request_cores
            window = (chosen - prev_j) * step
            total = 0.0
            n = 0
            for idx, vals in snap.items():
                if idx in prev:
                    total += (vals[3] - prev[idx][3]) / window / req
                    n += 1
            return total, n
        if h.metric == "DCGM_FI_DEV_GPU_UTIL" or custom:
            return self._signal_total(chosen, every, snap, queued, custom)
        col = {"vllm:num_requests_waiting": 0, "vllm:num_requests_running": 1,
               "vllm:kv_cache_usage_perc": 2}[h.metric]  # fmt: skip
        total = sum(v[col] for v in snap.values())
        if col == 0:
            # queue depth is every request waiting for an engine slot: vLLM's waiting queue plus
            # those held in front of the pods (gateway buffer, queue-proxy backlogs), as a KEDA
            # trigger over vllm:num_requests_waiting and the proxies' queue gauges sees it
            total += queued
        return float(total), len(snap)

    def _signal_total(
        self,
        chosen: int,
        every: int,
        snap: dict[int, tuple[float, ...]],
        queued: int,
        custom: bool,
    ) -> tuple[float, int]:
        """GPU utilisation (percent busy over the last scrape interval, as DCGM reports it) or
        a weighted sum of the per-pod signals (``hpa.signal_weights``), summed over pods."""
        h = self.cfg.hpa
        step = self.cfg.output.engine_sample_interval_s
        prev_j = max(0, chosen - every)
        prev = self.snapshots[prev_j][1] if prev_j < chosen else {}
        window = max((chosen - prev_j) * step, step)
        total = 0.0
        for idx, vals in snap.items():
            busy = (vals[4] - prev[idx][4]) / window if idx in prev else 0.0
            util = 100.0 * min(1.0, max(0.0, busy))
            if not custom:
                total += util
                continue
            # the waiting requests held in front of the pods count on the pods' queues
            waiting = vals[0] + queued / max(len(snap), 1)
            signals = (waiting, vals[1], vals[2], util, 1.0)
            total += sum(w * x for w, x in zip(h.signal_weights, signals, strict=True))
        return float(total), len(snap)

    def build(self, sim: Simulation) -> None:
        from tailtriage.simulator.output import build_capture

        self.capture = build_capture(self, sim)


def _roofline_split(pod: Pod) -> tuple[float, float]:
    """Compute-bound and memory-bound seconds of all the pod's steps so far.

    Both are linear in the step totals, so they come from sums kept per step; a fitted
    step-time model has no split, so its busy time counts as both."""
    model = pod.template.step_model
    if isinstance(model, RooflineStepTime):
        per_token, per_ctx_flops, weights, per_ctx_bytes, _, _ = model._k
        compute = per_token * pod.tokens_sum + per_ctx_flops * pod.context_sum
        memory = weights * pod.steps + per_ctx_bytes * pod.context_sum
        return compute, memory
    return pod.busy_s, pod.busy_s
