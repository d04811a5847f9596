"""The serving stack around the engines, as one event loop: the gateway (network, Envoy's
upstream connection pool, routing), Knative's activator and queue-proxy with
``containerConcurrency``, the API server's event loop, the autoscaler, the Deployment
controller (scaling and rolling updates) and pod start-up (scheduling, image pull, weight
loading, readiness probes).

Everything a writer needs comes out as a frozen :class:`Outcome`: per-request timestamps along
the path (contiguous, so stage times sum to TTFT by construction), pods with their lifecycle,
Kubernetes events, 1 s samples of every engine, and the autoscaler's series."""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from realistic.engine import Ledger, Replica, StepModel
from realistic.spec import GPUS, MODELS, Gateway, Spec
from realistic.workload import Requests, sample

_ARRIVE, _AT_POD, _ENGINE, _STEP, _READY, _TICK = range(6)
#: control loop and gauge sampling period (s)
TICK_S = 1.0
#: sidecar/queue-proxy hop and first-byte return path (s)
_HOP_S = 0.0006
_RETURN_S = 0.0008
#: a new upstream (mTLS) connection from the gateway to a pod (s)
_UPSTREAM_CONNECT_S = 0.018
#: CPU cores requested by a serving pod (the HPA's CPU utilisation is relative to this)
CPU_REQUEST = 8.0
#: the engine core process busy-polls one core while it has work
_ENGINE_CORE_CPU = 1.0


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
    probe_fails: int = 0


@dataclass(frozen=True)
class Event:
    time: float
    reason: str
    type: str  # Normal | Warning
    kind: str  # involved object kind
    name: str
    message: str
    component: str
    count: int = 1
    last: float = -1.0


@dataclass(frozen=True)
class PodRecord:
    idx: int
    name: str
    rs: str
    node: str
    ip: str
    created: float
    scheduled: float
    pulled: float
    started: float
    ready: float
    killed: float
    unschedulable_until: float


@dataclass(frozen=True)
class Outcome:
    spec: Spec
    req: Requests
    # per request, seconds from the window start (nan where not reached)
    gw_in: np.ndarray
    rx_done: np.ndarray
    pool_in: np.ndarray
    dispatch: np.ndarray
    wait_pending: np.ndarray  # bool: the wait before dispatch was for capacity on its way
    up_tx: np.ndarray
    retries: np.ndarray
    new_conn: np.ndarray
    pod_in: np.ndarray
    qp_done: np.ndarray
    api_start: np.ndarray
    llm_start: np.ndarray
    queued: np.ndarray
    scheduled: np.ndarray
    first: np.ndarray
    finish: np.ndarray
    preempted: np.ndarray
    pod: np.ndarray
    status: np.ndarray  # HTTP status at the edge
    pods: tuple[PodRecord, ...]
    events: tuple[Event, ...]
    # 1 s samples: columns of SAMPLE_COLUMNS, one row per (tick, pod)
    samples: np.ndarray
    # autoscaler per tick: time, desired, current (pods in the Deployment), ready, metric value
    hpa: np.ndarray
    kv_capacity: int

    @property
    def edge_first(self) -> np.ndarray:
        return self.first + _RETURN_S

    @property
    def edge_end(self) -> np.ndarray:
        return self.finish + _RETURN_S


SAMPLE_COLUMNS = (
    "t",
    "pod",
    "running",
    "waiting",
    "kv_usage",
    "preemptions",
    "busy_s",
    "compute_s",
    "memory_s",
    "comm_s",
    "tokens",
    "cpu_s",
    "inflight",
    "decode_tokens",
)


class _Sim:
    def __init__(self, spec: Spec, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng
        self.req = sample(spec.workload, spec.duration_s, rng)
        n = len(self.req.arrival)
        self.n = n
        self.led = Ledger(self.req.prompt, self.req.output)
        link = spec.interconnect or GPUS[spec.gpu].link
        self.sm = StepModel.of(spec, link)
        nan = np.full(n, np.nan)
        self.r = {
            k: nan.copy()
            for k in ("gw_in", "rx_done", "pool_in", "dispatch", "up_tx", "pod_in", "qp_done")
        }
        self.r.update({k: nan.copy() for k in ("api_start", "llm_start")})
        self.wait_pending = np.zeros(n, dtype=bool)
        self.retries = np.zeros(n, dtype=np.int64)
        self.new_conn = np.zeros(n, dtype=bool)
        self.pod_of = np.full(n, -1, dtype=np.int64)
        self.status = np.full(n, 200, dtype=np.int64)
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.pods: list[Pod] = []
        self.events: list[Event] = []
        self.pending: deque[int] = deque()  # gateway pool / activator buffer
        self.upstream = 0
        self.rr = 0
        self.rs_hash = _hash(rng)
        self.old_rs = ""
        self.desired = spec.replicas
        self.hpa_rows: list[tuple[float, ...]] = []
        self.metric_hist: list[float] = []
        self.last_up = -1e9
        self.high_since = 0.0
        self.samples: list[tuple[float, ...]] = []
        self.nodes_used = 0
        self.rollout_started = False
        self._uni = rng.uniform(size=8 * n + 64)
        self._ui = 0

    def u(self) -> float:
        """The next pre-drawn uniform (one numpy call for the whole run)."""
        self._ui += 1
        if self._ui >= len(self._uni):
            self._uni, self._ui = self.rng.uniform(size=len(self._uni)), 0
        return float(self._uni[self._ui])

    # -- helpers ---------------------------------------------------------------------------
    def push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def event(
        self,
        t: float,
        reason: str,
        kind: str,
        name: str,
        msg: str,
        comp: str,
        typ: str = "Normal",
        count: int = 1,
        last: float = -1.0,
    ) -> None:
        self.events.append(Event(t, reason, typ, kind, name, msg, comp, count, last))

    def live(self) -> list[Pod]:
        return [p for p in self.pods if p.killed == math.inf]

    def routable(self, t: float) -> list[Pod]:
        return [p for p in self.pods if p.ready <= t and p.killed > t]

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
        pod.probe_fails = probes - 1
        self.pods.append(pod)
        if ready > 0:
            self.push(ready, _READY, idx)

    def initial_pods(self) -> None:
        s = self.spec
        for _ in range(s.replicas):
            # pods of a running Deployment were created long before the window
            back = -3600.0 - 600 * self.rng.uniform()
            self.create_pod(back, self.rs_hash, s.pods.warmup_s, True)

    def kill(self, t: float, pod: Pod, why: str) -> None:
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
        del why

    # -- gateway ---------------------------------------------------------------------------
    def arrive(self, t: float, rid: int) -> None:
        g = self.spec.gateway
        self.r["pool_in"][rid] = t
        if g.max_connections and self.upstream >= g.max_connections:
            if len(self.pending) >= g.max_pending:
                self.status[rid] = 503  # UO: pending queue overflow
                self.r["dispatch"][rid] = t
                return
            self.pending.append(rid)
            self.wait_pending[rid] = False
            return
        if self.activator() and not self._free_pod(t):
            self.wait_pending[rid] = any(p.ready > t for p in self.live())
            self.pending.append(rid)
            return
        self.dispatch(t, rid)

    def activator(self) -> bool:
        return self.spec.platform in ("knative_activator", "kserve")

    def _free_pod(self, t: float) -> Pod | None:
        cc = self.spec.gateway.container_concurrency
        pods = self.routable(t)
        if not pods:
            return None
        free = [p for p in pods if not cc or p.inflight < cc]
        if not free:
            return None
        return min(free, key=lambda p: (p.inflight, p.idx))

    def choose(self, t: float, rid: int) -> Pod | None:
        pods = self.routable(t)
        if not pods:
            return None
        pol = self.spec.routing
        if self.activator():
            return self._free_pod(t)
        if pol == "round_robin":
            self.rr += 1
            return pods[self.rr % len(pods)]
        if pol == "hot_spot" and self.req.arrival[rid] >= self.spec.hot_from_s:
            # a skewed consistent hash: the first pod takes ``hot_weight`` shares
            x = self.u() * (self.spec.hot_weight + len(pods) - 1)
            return pods[0] if x < self.spec.hot_weight else pods[1 + int(x - self.spec.hot_weight)]
        if pol in ("least_request", "hot_spot"):  # Envoy LEAST_REQUEST: power of two choices
            a, b = pods[int(self.u() * len(pods))], pods[int(self.u() * len(pods))]
            return a if a.inflight <= b.inflight else b
        return pods[int(self.u() * len(pods))]

    def gateway(self, rid: int) -> Gateway:
        s = self.spec
        if s.incident_gateway is not None and self.req.arrival[rid] >= s.incident_s:
            return s.incident_gateway
        return s.gateway

    def dispatch(self, t: float, rid: int) -> None:
        pod = self.choose(t, rid)
        if pod is None:
            self.wait_pending[rid] = True
            self.pending.appendleft(rid)
            return
        g = self.gateway(rid)
        self.r["dispatch"][rid] = t
        self.upstream += 1
        pod.inflight += 1
        self.pod_of[rid] = pod.idx
        tx = t
        if self.u() < g.connect_fail:
            self.retries[rid] = 1
            tx += _UPSTREAM_CONNECT_S + g.retry_backoff_ms / 1e3 * (1 + self.u())
        if self.u() > g.keepalive_reuse:
            self.new_conn[rid] = True
            tx += _UPSTREAM_CONNECT_S * (0.7 + 0.6 * self.u())
        self.r["up_tx"][rid] = tx
        self.push(tx + _HOP_S, _AT_POD, rid, pod.idx)

    def at_pod(self, t: float, rid: int, pod: Pod) -> None:
        self.r["pod_in"][rid] = t
        cc = self.spec.gateway.container_concurrency
        if self.spec.platform == "knative_direct" and cc:
            active = pod.inflight - len(pod.qp_queue) - 1
            if active >= cc:
                pod.qp_queue.append(rid)
                return
        self.api(t, rid, pod)

    def api(self, t: float, rid: int, pod: Pod) -> None:
        a = self.spec.api
        self.r["qp_done"][rid] = t
        start = max(t, pod.api_free)
        rate = self._recent_tokens(pod)
        speed = max(0.04, min(1.0, a.cpus) - rate * a.stream_us_per_token / 1e6)
        parse = a.parse_ms / 1e3 / speed
        tok = a.tokenize_us_per_token * self.led.prompt[rid] / 1e6 / speed
        self.r["api_start"][rid] = t
        self.r["llm_start"][rid] = start + parse
        done = start + parse + tok
        pod.api_free = done
        pod.api_busy += parse + tok
        self.push(done, _ENGINE, rid, pod.idx)

    def _recent_tokens(self, pod: Pod) -> float:
        """Decode tokens per second on ``pod`` over the last sampled second."""
        return pod.replica.acc[5] - getattr(pod, "_tok_mark", 0.0)

    def engine(self, t: float, rid: int, pod: Pod) -> None:
        rep = pod.replica
        if rep.plan_ends:
            end = rep.truncate(t)
            pod.version += 1
            rep.enqueue(rid, t)
            self.push(end, _STEP, pod.idx, pod.version)
            return
        rep.enqueue(rid, t)
        self.replan(pod)

    def replan(self, pod: Pod) -> None:
        end = pod.replica.plan(math.inf)
        pod.version += 1
        if end < math.inf:
            self.push(end, _STEP, pod.idx, pod.version)

    def step(self, t: float, pod: Pod) -> None:
        for rid in pod.replica.advance():
            self.release(t, rid, pod)
        self.replan(pod)

    def release(self, t: float, rid: int, pod: Pod) -> None:
        self.upstream -= 1
        pod.inflight -= 1
        if pod.qp_queue:
            self.api(t, pod.qp_queue.popleft(), pod)
        self.drain(t)

    def drain(self, t: float) -> None:
        g = self.spec.gateway
        while self.pending:
            if g.max_connections and self.upstream >= g.max_connections:
                return
            if self.activator() and not self._free_pod(t):
                return
            if not self.routable(t):
                return
            self.dispatch(t, self.pending.popleft())

    # -- control loop ----------------------------------------------------------------------
    def tick(self, t: float) -> None:
        self.sample(t)
        s = self.spec
        if s.rollout.at_s >= 0 and t >= s.rollout.at_s and not self.rollout_started:
            self.rollout_started = True
            self.old_rs, self.rs_hash = self.rs_hash, _hash(self.rng)
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
            cpu += 0.08 * max(0.0, t - max(p.started, 0.0))
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
            p._tok_mark = rep.acc[5]  # type: ignore[attr-defined]
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
            name = _metric_label(h.metric)
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
                self.kill(t, p, "scale down")
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
                self.kill(t, p, "rollout")
            self.event(
                t,
                "ScalingReplicaSet",
                "Deployment",
                s.service,
                f"Scaled down replica set {s.service}-{self.old_rs} to {len(old) - can_kill}",
                "deployment-controller",
            )

    # -- run -------------------------------------------------------------------------------
    def run(self) -> None:
        s, g = self.spec, self.spec.gateway
        self.initial_pods()
        arr = self.req.arrival
        rx = arr + g.rtt_ms / 2e3 + (self.req.prompt * 4 / 1e6 / 8.0)  # body upload
        self.r["gw_in"][:] = arr + g.rtt_ms / 2e3
        self.r["rx_done"][:] = rx
        proxy = g.proxy_ms / 1e3 * (0.8 + 0.4 * self.rng.uniform(size=self.n))
        if s.incident_gateway is not None:
            late = arr >= s.incident_s
            proxy[late] *= s.incident_gateway.proxy_ms / max(g.proxy_ms, 1e-9)
        for rid in range(self.n):
            self.push(float(rx[rid] + proxy[rid]), _ARRIVE, rid)
        for k in range(int(s.duration_s / TICK_S) + 1):
            self.push(k * TICK_S, _TICK)
        end = s.duration_s + 120.0
        while self.heap:
            t, _, kind, a, b = heapq.heappop(self.heap)
            if t > end:
                break
            if kind == _ARRIVE:
                self.arrive(t, a)
            elif kind == _AT_POD:
                self.at_pod(t, a, self.pods[b])
            elif kind == _ENGINE:
                self.engine(t, a, self.pods[b])
            elif kind == _STEP:
                if b == self.pods[a].version:
                    self.step(t, self.pods[a])
            elif kind == _READY:
                self.pod_ready(t, self.pods[a])
            else:
                self.tick(t)

    def pod_ready(self, t: float, pod: Pod) -> None:
        if pod.killed > t:
            pod.replica.t = t
            self.drain(t)

    def outcome(self) -> Outcome:
        led, r = self.led, self.r
        pods = tuple(
            PodRecord(
                p.idx,
                p.name,
                p.rs,
                p.node,
                p.ip,
                p.created,
                p.scheduled,
                p.pulled,
                p.started,
                p.ready,
                p.killed,
                p.unschedulable_until,
            )
            for p in self.pods
        )
        return Outcome(
            spec=self.spec,
            req=self.req,
            gw_in=r["gw_in"],
            rx_done=r["rx_done"],
            pool_in=r["pool_in"],
            dispatch=r["dispatch"],
            wait_pending=self.wait_pending,
            up_tx=r["up_tx"],
            retries=self.retries,
            new_conn=self.new_conn,
            pod_in=r["pod_in"],
            qp_done=r["qp_done"],
            api_start=r["api_start"],
            llm_start=r["llm_start"],
            queued=np.array(led.queued),
            scheduled=np.array(led.scheduled),
            first=np.array(led.first),
            finish=np.array(led.finish),
            preempted=np.array(led.preempted),
            pod=self.pod_of,
            status=self.status,
            pods=pods,
            events=tuple(sorted(self.events, key=lambda e: e.time)),
            samples=np.array(self.samples, dtype=np.float64).reshape(-1, len(SAMPLE_COLUMNS)),
            hpa=np.array(self.hpa_rows, dtype=np.float64).reshape(-1, 5),
            kv_capacity=self.sm.kv_capacity,
        )


def s_us(spec: Spec) -> float:
    """CPU seconds the API server spends per streamed output token."""
    return spec.api.stream_us_per_token / 1e6


def _metric_label(metric: str) -> str:
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


def _hash(rng: np.random.Generator) -> str:
    return "".join(rng.choice(list("bcdfghjklmnpqrstvwxz2456789"), 10))


def _suffix(rng: np.random.Generator) -> str:
    return "".join(rng.choice(list("bcdfghjklmnpqrstvwxz2456789"), 5))


def simulate(spec: Spec, seed: int) -> Outcome:
    """Run the stack once; deterministic in (spec, seed)."""
    sim = _Sim(spec, np.random.default_rng(seed))
    sim.run()
    return sim.outcome()
