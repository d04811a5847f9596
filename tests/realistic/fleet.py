"""The serving stack as one event loop (time, sequence): the data plane here (network, Envoy's
upstream connection pool and routing, Knative's activator and queue-proxy with
``containerConcurrency``, the API server's event loop, the engines' steps), the control plane
mixed in from :mod:`realistic.control`.  ``simulate`` returns a frozen :class:`Outcome`."""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from realistic.control import (
    ARRIVE,
    AT_POD,
    ENGINE,
    READY,
    STEP,
    TICK,
    TICK_S,
    ControlPlane,
    Pod,
    new_hash,
)
from realistic.engine import Ledger, StepModel
from realistic.outcome import SAMPLE_COLUMNS, Event, Outcome, PodRecord
from realistic.spec import GPUS, Gateway, Spec
from realistic.workload import sample

#: sidecar/queue-proxy hop (s)
_HOP_S = 0.0006
#: a new upstream (mTLS) connection from the gateway to a pod (s)
_UPSTREAM_CONNECT_S = 0.018


class _Sim(ControlPlane):
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
        self.rs_hash = new_hash(rng)
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
        self.push(tx + _HOP_S, AT_POD, rid, pod.idx)

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
        self.push(done, ENGINE, rid, pod.idx)

    def _recent_tokens(self, pod: Pod) -> float:
        """Decode tokens per second on ``pod`` over the last sampled second."""
        return float(pod.replica.acc[5] - pod.tok_mark)

    def engine(self, t: float, rid: int, pod: Pod) -> None:
        rep = pod.replica
        if rep.plan_ends:
            end = rep.truncate(t)
            pod.version += 1
            rep.enqueue(rid, t)
            self.push(end, STEP, pod.idx, pod.version)
            return
        rep.enqueue(rid, t)
        self.replan(pod)

    def replan(self, pod: Pod) -> None:
        end = pod.replica.plan(math.inf)
        pod.version += 1
        if end < math.inf:
            self.push(end, STEP, pod.idx, pod.version)

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
            self.push(float(rx[rid] + proxy[rid]), ARRIVE, rid)
        for k in range(int(s.duration_s / TICK_S) + 1):
            self.push(k * TICK_S, TICK)
        end = s.duration_s + 120.0
        while self.heap:
            t, _, kind, a, b = heapq.heappop(self.heap)
            if t > end:
                break
            if kind == ARRIVE:
                self.arrive(t, a)
            elif kind == AT_POD:
                self.at_pod(t, a, self.pods[b])
            elif kind == ENGINE:
                self.engine(t, a, self.pods[b])
            elif kind == STEP:
                if b == self.pods[a].version:
                    self.step(t, self.pods[a])
            elif kind == READY:
                self.pod_ready(t, self.pods[a])
            else:
                self.tick(t)

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


def simulate(spec: Spec, seed: int) -> Outcome:
    """Run the stack once; deterministic in (spec, seed)."""
    sim = _Sim(spec, np.random.default_rng(seed))
    sim.run()
    return sim.outcome()
