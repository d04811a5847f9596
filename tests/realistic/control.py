"""The control plane of the stack: pods (scheduling, ``FailedScheduling`` until a node joins,
image pull, weight loading, readiness probes), the autoscaler (HPA on CPU, GPU utilisation,
queue depth or Knative concurrency, with sync period, metric lag, scale-up policy and down
stabilisation), the Deployment controller (scaling and rolling updates with ``maxSurge`` /
``maxUnavailable``), and the 1 s sampling of every engine.  A mixin of the fleet's event loop,
which owns the state it reads (``pods``, ``events``, ``samples``, ``push`` ...)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from realistic.engine import Replica
from realistic.spec import MODELS, Spec

#: event kinds of the loop, in tie-break order
ARRIVE, AT_POD, ENGINE, STEP, READY, TICK = range(6)
#: control loop and gauge sampling period (s)
TICK_S = 1.0
#: CPU cores requested by a serving pod (the HPA's CPU utilisation is relative to this)
CPU_REQUEST = 8.0
#: the engine core process busy-polls one core while it has work
_ENGINE_CORE_CPU = 1.0
#: CPU a running pod burns besides serving (probes, metrics, sidecar share), cores
_IDLE_CPU = 0.08


@dataclass
class Pod:
    idx: int
    name: str
    rs: str
    node: str
    ip: str
    created: float
    scheduled: float
    pull_start: float
    pulled: float
    cached: bool
    started: float
    ready: float
    unschedulable_until: float
    replica: Replica
    killed: float = math.inf
    version: int = 0
    api_free: float = 0.0
    api_busy: float = 0.0
    inflight: int = 0
    qp_queue: deque[int] = field(default_factory=deque)
    tok_mark: float = 0.0  # decode tokens at the last sample (API server streaming load)


class ControlPlane:
    """Pods, autoscaler, Deployment controller and sampling (mixed into the fleet's loop)."""

    # -- pods ------------------------------------------------------------------------------
    def create_pod(self, t: float, rs: str, warmup: float, cached: bool) -> None:
        s, m = self.spec, MODELS[self.spec.model]
        idx = len(self.pods)
        name = f"{s.service}-{rs}-{_suffix(self.rng)}"
        if s.platform in ("knative_activator", "knative_direct", "kserve"):
            name = f"{s.service}-00001-deployment-{rs[:5]}{_suffix(self.rng)}"
        unsched = t
        self.nodes_used += 1
        if self.nodes_used > s.pods.free_gpu_nodes:
            unsched = t + s.pods.node_scale_up_s
        scheduled = unsched + s.pods.schedule_s * (0.7 + 0.6 * self.rng.uniform())
        pull_start = scheduled + 0.8 + 0.4 * self.rng.uniform()
        pull = (
            0.0
            if cached
            else m.image_gb * 1000 / s.pods.pull_mb_s * (0.85 + 0.3 * self.rng.uniform())
        )
        pulled = pull_start + pull
        started = pulled + 1.0 + 0.5 * self.rng.uniform()
        load = m.weights_gb / s.tp / s.pods.load_gb_s + warmup * (0.9 + 0.2 * self.rng.uniform())
        period = s.pods.readiness_period_s
        probes = max(1, math.ceil(load / period))
        ready = started + probes * period + 0.2 * self.rng.uniform()
        node = f"gpu-node-{self.rng.integers(10, 99)}-{self.nodes_used}"
        ip = f"10.{self.rng.integers(0, 255)}.{self.rng.integers(0, 255)}.{self.rng.integers(2, 250)}"
        rep = Replica(idx, s, self.sm, self.led)
        pod = Pod(
            idx,
            name,
            rs,
            node,
            ip,
            t,
            scheduled,
            pull_start,
            pulled,
            cached,
            started,
            ready,
            unsched,
            rep,
        )
        self.pods.append(pod)
        if ready > 0:
            self.push(ready, READY, idx)

    def initial_pods(self) -> None:
        s = self.spec
        for _ in range(s.replicas):
            # pods of a running Deployment were created long before the window
            back = -3600.0 - 600 * self.rng.uniform()
            self.create_pod(back, self.rs_hash, s.pods.warmup_s, True)

    def kill(self, t: float, pod: Pod) -> None:
        pod.killed = t
        self.event(
            t, "Killing", "Pod", pod.name, f"Stopping container {_container(self.spec)}", "kubelet"
        )
        self.event(
            t,
            "SuccessfulDelete",
            "ReplicaSet",
            f"{self.spec.service}-{pod.rs}",
            f"Deleted pod: {pod.name}",
            "replicaset-controller",
        )

    # -- control loop ----------------------------------------------------------------------
    def tick(self, t: float) -> None:
        self.sample(t)
        s = self.spec
        if s.rollout.at_s >= 0 and t >= s.rollout.at_s and not self.rollout_started:
            self.rollout_started = True
            self.old_rs, self.rs_hash = self.rs_hash, new_hash(self.rng)
        if s.hpa.metric != "none" and t % s.hpa.sync_s < TICK_S / 2:
            self.autoscale(t)
        self.deployment(t)
        live = self.live()
        ready = sum(p.ready <= t for p in live)
        self.hpa_rows.append((t, self.desired, len(live), ready, self._seen_metric()))

    def sample(self, t: float) -> None:
        for p in self.pods:
            if p.created > t or p.killed < t - 30:
                continue
            rep = p.replica
            kv = rep.kv_used / rep.sm.kv_capacity if p.ready <= t else 0.0
            cpu = p.api_busy + rep.acc[5] * s_us(self.spec) + rep.acc[0] * _ENGINE_CORE_CPU
            cpu += _IDLE_CPU * max(0.0, t - max(p.started, 0.0))
            self.samples.append(
                (
                    t,
                    p.idx,
                    len(rep.running),
                    len(rep.waiting),
                    kv,
                    rep.preempt_count,
                    *rep.acc[:5],
                    cpu,
                    p.inflight,
                    rep.acc[5],
                )
            )
            p.tok_mark = float(rep.acc[5])
        self.metric_hist.append(self._metric_now(t))

    def _metric_now(self, t: float) -> float:
        m, pods = self.spec.hpa.metric, [p for p in self.live() if p.ready <= t]
        if not pods or m == "none":
            return 0.0
        if m == "queue":
            return float(np.mean([len(p.replica.waiting) for p in pods]))
        if m == "concurrency":
            return float(np.mean([p.inflight for p in pods])) + len(self.pending) / len(pods)
        rows = [r for r in self.samples[-4 * len(self.pods) :] if r[0] == t]
        prev = {r[1]: r for r in self.samples[-8 * len(self.pods) :] if r[0] == t - TICK_S}
        vals = []
        for r in rows:
            if r[1] not in prev or self.pods[int(r[1])].ready > t:
                continue
            if m == "cpu":
                vals.append((r[11] - prev[r[1]][11]) / TICK_S / CPU_REQUEST * 100)
            else:  # gpu_util: share of the second a kernel ran
                vals.append(min(100.0, (r[6] - prev[r[1]][6]) / TICK_S * 100))
        return float(np.mean(vals)) if vals else 0.0

    def _seen_metric(self) -> float:
        lag = int(self.spec.hpa.scrape_lag_s / TICK_S)
        window = self.metric_hist[
            max(0, len(self.metric_hist) - lag - 15) : len(self.metric_hist) - lag
        ]
        return float(np.mean(window)) if window else 0.0

    def autoscale(self, t: float) -> None:
        h = self.spec.hpa
        live = self.live()
        cur = len(live)
        value = self._seen_metric()
        ratio = value / h.target if h.target else 0.0
        want = cur
        if abs(ratio - 1.0) > h.tolerance:
            want = math.ceil(cur * ratio) if ratio > 0 else h.min_replicas
        want = min(max(want, h.min_replicas), h.max_replicas)
        if want >= cur:
            self.high_since = t
        if want > cur:
            if t - self.last_up < h.up_period_s:
                return
            want = min(want, max(cur + h.up_pods, 2 * cur))
            self.last_up = t
        elif want < cur and t - self.high_since < h.down_stabilisation_s:
            return
        if want != self.desired:
            name = _metric_label(h.metric, self.spec.platform)
            direction = "above" if want > cur else "below"
            self.event(
                t,
                "SuccessfulRescale",
                "HorizontalPodAutoscaler",
                self.spec.service,
                f"New size: {want}; reason: {name} {direction} target",
                "horizontal-pod-autoscaler",
            )
            self.desired = want

    def deployment(self, t: float) -> None:
        s = self.spec
        live = self.live()
        if self.rollout_started and any(p.rs == self.old_rs for p in live):
            self._roll(t, live)
            return
        cur = [p for p in live if p.rs == self.rs_hash]
        if len(cur) < self.desired:
            for _ in range(self.desired - len(cur)):
                self.create_pod(t, self.rs_hash, s.pods.warmup_s, s.pods.image_cached)
                self.event(
                    t,
                    "SuccessfulCreate",
                    "ReplicaSet",
                    f"{s.service}-{self.rs_hash}",
                    f"Created pod: {self.pods[-1].name}",
                    "replicaset-controller",
                )
            self.event(
                t,
                "ScalingReplicaSet",
                "Deployment",
                s.service,
                f"Scaled up replica set {s.service}-{self.rs_hash} to {self.desired}",
                "deployment-controller",
            )
        elif len(cur) > self.desired:
            extra = sorted(cur, key=lambda p: (p.ready <= t, -p.created))[: len(cur) - self.desired]
            for p in extra:
                self.kill(t, p)
            self.event(
                t,
                "ScalingReplicaSet",
                "Deployment",
                s.service,
                f"Scaled down replica set {s.service}-{self.rs_hash} to {self.desired}",
                "deployment-controller",
            )

    def _roll(self, t: float, live: list[Pod]) -> None:
        s, ro = self.spec, self.spec.rollout
        n = self.desired
        old = [p for p in live if p.rs == self.old_rs]
        new = [p for p in live if p.rs == self.rs_hash]
        ready = sum(p.ready <= t for p in live)
        room = n + ro.max_surge - len(live)
        make = min(room, n - len(new))
        warm = ro.new_warmup_s if ro.new_warmup_s >= 0 else s.pods.warmup_s
        if make > 0:
            for _ in range(make):
                self.create_pod(t, self.rs_hash, warm, ro.image_cached)
            self.event(
                t,
                "ScalingReplicaSet",
                "Deployment",
                s.service,
                f"Scaled up replica set {s.service}-{self.rs_hash} to {len(new) + make}",
                "deployment-controller",
            )
        can_kill = min(len(old), ready - (n - ro.max_unavailable))
        if can_kill > 0:
            victims = sorted(old, key=lambda p: (p.ready <= t, p.created))[:can_kill]
            for p in victims:
                self.kill(t, p)
            self.event(
                t,
                "ScalingReplicaSet",
                "Deployment",
                s.service,
                f"Scaled down replica set {s.service}-{self.old_rs} to {len(old) - can_kill}",
                "deployment-controller",
            )

    def pod_ready(self, t: float, pod: Pod) -> None:
        if pod.killed > t:
            pod.replica.t = t
            self.drain(t)


def s_us(spec: Spec) -> float:
    """CPU seconds the API server spends per streamed output token."""
    return spec.api.stream_us_per_token / 1e6


def _metric_label(metric: str, platform: str) -> str:
    if metric == "concurrency" and platform == "istio":
        return "vllm:num_requests_running pods metric"
    return {
        "cpu": "cpu resource utilization (percentage of request)",
        "gpu_util": "DCGM_FI_DEV_GPU_UTIL pods metric",
        "queue": "vllm:num_requests_waiting pods metric",
        "concurrency": "concurrency",
    }.get(metric, metric)


def _container(spec: Spec) -> str:
    return (
        "kserve-container"
        if spec.platform == "kserve"
        else ("user-container" if spec.platform.startswith("knative") else "vllm")
    )


def new_hash(rng: np.random.Generator) -> str:
    return "".join(rng.choice(list("bcdfghjklmnpqrstvwxz2456789"), 10))


def _suffix(rng: np.random.Generator) -> str:
    return "".join(rng.choice(list("bcdfghjklmnpqrstvwxz2456789"), 5))
