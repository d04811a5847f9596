"""The discrete-event loop: requests through ingress, gateway, API server and engine, with the
autoscaler, pod start-up and rolling updates around them.

Events are ordered by ``(time, priority, sequence)``; the random generator is injected and
drawn from in a fixed order, so the same seed gives the same capture byte for byte.  Requests
reach the gateway from a pre-sorted array merged with the event heap (no heap entry per
arrival); engines advance one step per event, decodes tracked lazily by the batcher.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from tailtriage.errors import SimulationError
from tailtriage.simulator import autoscaler, fastforward
from tailtriage.simulator.batching import Sequence
from tailtriage.simulator.cluster import (
    CREATED,
    GONE,
    PHASE_BUCKETS,
    READY,
    SCHEDULED,
    STARTING,
    TERMINATING,
    TOKEN_BUCKETS,
    TTFT_BUCKETS,
    Node,
    Pod,
    Template,
    make_template,
)
from tailtriage.simulator.config import ScenarioConfig, apply_overrides
from tailtriage.simulator.recorder import Recorder
from tailtriage.simulator.workload import Workload, generate, sample

# event priorities at equal times: engine work first, sampling last
P_STEP, P_POD, P_ENGINE, P_ARRIVAL, P_ROLLOUT, P_HPA, P_SAMPLE = range(7)
# request status codes
ST_OPEN, ST_OK, ST_REJECTED, ST_TIMEOUT = 0, 1, 2, 3

Progress = Callable[[float], None]


class Simulation:
    """One run of a scenario.  Build, then :meth:`run`; the recorder holds the results."""

    def __init__(self, cfg: ScenarioConfig, rng: np.random.Generator, seed: int = 0) -> None:
        self.cfg = cfg
        self.seed = seed
        self.rng = rng
        self.wl: Workload = generate(cfg, rng)
        n = len(self.wl)
        self.n = n
        self.heap: list[tuple[float, int, int, int, Any]] = []
        self._seq = 0
        self.now = 0.0
        self.templates: list[Template] = [make_template(cfg, 0, rng)]
        self.pods: list[Pod] = []
        self.nodes: list[Node] = []
        self.unscheduled: deque[Pod] = deque()
        self.queue: deque[int] = deque()  # requests buffered at the gateway
        self.rr = 0
        self.desired = 0
        self.hpa_state = autoscaler.HpaState()
        self.rollout_version = 0
        self.rec = Recorder(cfg, n)
        # routing draws come from their own stream so other draws do not shift with policy
        self.route_rng = np.random.default_rng(rng.integers(2**63))
        self._sample_ingress_and_api()
        self.open_requests = n
        self.seqs: list[Sequence | None] = [None] * n
        self._rollout: Any = None

    # -- setup ---------------------------------------------------------------------------
    def _sample_ingress_and_api(self) -> None:
        """Per-request edge and frontend costs, from each request's phase settings."""
        n, wl, rng = self.n, self.wl, self.rng
        ingress = np.zeros(n)
        api = np.zeros(n)
        for i, ph in enumerate(self.cfg.workload):
            pc = apply_overrides(self.cfg, ph.set) if ph.set else self.cfg
            idx = np.nonzero(wl.phase == i)[0]
            k = len(idx)
            lat = sample(pc.ingress.latency_ms, rng, k)
            new_conn = rng.random(k) >= pc.ingress.keepalive_reuse
            ingress[idx] = (lat + new_conn * pc.ingress.tls_handshake_ms) / 1e3
            base = sample(pc.api_server.base_ms, rng, k) / 1e3
            api[idx] = base + wl.prompt_tokens[idx] * pc.api_server.per_prompt_token_us / 1e6
        self.ingress = ingress
        self.api = api
        self.gw_time = wl.arrival + ingress
        self.gw_order = np.argsort(self.gw_time, kind="stable")
        self.rec.set_requests(wl, ingress, self.rng)

    def push(self, t: float, prio: int, kind: int, obj: Any) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (t, prio, self._seq, kind, obj))

    # -- main loop -----------------------------------------------------------------------
    def run(self, progress: Progress | None = None) -> Recorder:
        cfg = self.cfg
        for _ in range(cfg.pods.nodes):
            self._add_node(0.0)
        start = cfg.pods.initial_replicas
        if cfg.hpa.enabled:
            start = min(max(start, cfg.hpa.min_replicas), cfg.hpa.max_replicas)
        self._scale_to(0.0, start, initial=True)
        for ready_s in cfg.pods.starting_ready_s:
            self._starting_pod(ready_s)
        if cfg.hpa.enabled:
            self.push(cfg.hpa.sync_period_s, P_HPA, 5, None)
        if cfg.output.metrics or cfg.hpa.enabled:  # nothing else reads a scrape
            self.push(0.0, P_SAMPLE, 6, 0)
        for r in cfg.rollouts:
            self.push(r.at_s, P_ROLLOUT, 7, r)
        handlers: dict[int, Callable[[float, Any], None]] = {
            1: self._on_step_end,
            2: self._on_pod,
            3: self._on_engine_arrival,
            5: self._on_hpa,
            6: self._on_sample,
            7: self._on_rollout,
            8: self._on_drain_deadline,
            9: self._on_run_end,
        }
        order = self.gw_order.tolist()
        gw = self.gw_time[self.gw_order].tolist()
        heap = self.heap
        ptr, n = 0, self.n
        end = cfg.duration_s
        hard_end = end + cfg.output.drain_limit_s
        next_tick = 0.0
        rec = self.rec
        if cfg.output.stop_after_arrivals_s is not None:
            rec.watch(cfg.output.stop_after_arrivals_s)
        while rec.watched_open != 0:
            t_arr = gw[ptr] if ptr < n else math.inf
            if heap and (heap[0][0] < t_arr or (heap[0][0] == t_arr and heap[0][1] < P_ARRIVAL)):
                t, _, _, kind, obj = heapq.heappop(heap)
                if t > hard_end:
                    for pod in self.pods:  # the steps that ended in time are in the capture
                        self._cut(pod, hard_end)
                    break
                self.now = t
                handlers[kind](t, obj)
                if t >= end and self.open_requests == 0 and ptr >= n:
                    break
            elif ptr < n:
                self.now = t_arr
                self._on_arrival(t_arr, order[ptr])
                ptr += 1
            else:
                break
            if progress is not None and self.now >= next_tick:
                progress(min(self.now, end))
                next_tick = self.now + end / 200
        else:  # every watched request has ended: stop here, as at the drain limit
            for pod in self.pods:
                self._cut(pod, self.now)
        self.rec.build(self)
        return self.rec

    # -- requests ------------------------------------------------------------------------
    def _on_arrival(self, t: float, i: int) -> None:
        pod = self._route(i)
        if pod is not None:
            self._admit(t, i, pod)
            return
        lim = self.cfg.gateway.queue_limit
        if lim and len(self.queue) >= lim:
            self.rec.reject(i, t)
            self.open_requests -= 1
            return
        self.rec.wait_kind[i] = 1 if self._capacity_coming() else 2
        self.queue.append(i)

    def _capacity_coming(self) -> bool:
        """Waiting now is for capacity that does not exist yet: pods are starting, none is
        ready, or the autoscaler may still add pods (activator buffering, design 3.1).  A
        deployment that cannot grow makes the wait a gateway queue."""
        if any(p.state in (CREATED, SCHEDULED, STARTING) for p in self.pods):
            return True
        if not any(p.state == READY for p in self.pods):
            return True
        h = self.cfg.hpa
        return h.enabled and self.desired < h.max_replicas

    def _route(self, i: int) -> Pod | None:
        """The pod for request ``i``, or None to wait at the gateway.

        ``random`` (kube-proxy) and ``round_robin`` are blind to load: they pick any ready pod
        and the request waits in that pod's queue-proxy when it is at its concurrency limit.
        ``least_outstanding`` and ``prefix_aware`` pick among pods with a free slot."""
        gw = self.cfg.gateway
        policy: str = gw.routing
        if policy == "weighted":
            if float(self.wl.arrival[i]) < gw.weighted_from_s:
                policy = gw.routing_before
            else:
                return self._weighted(gw.weights)
        if policy in ("random", "round_robin"):
            ready = [p for p in self.pods if p.state == READY]
            if not ready:
                return None
            if policy == "random":
                return ready[int(self.route_rng.integers(len(ready)))]
            self.rr += 1
            return ready[self.rr % len(ready)]
        limit = self.cfg.gateway.concurrency_limit
        free = [p for p in self.pods if p.state == READY and (not limit or p.inflight < limit)]
        if not free:
            return None
        if policy == "least_request":  # Envoy: the less loaded of two drawn at random
            a, b = self.route_rng.integers(len(free), size=2)
            pa_, pb = free[int(a)], free[int(b)]
            load_a = pa_.inflight + len(pa_.batcher.waiting)
            return pa_ if load_a <= pb.inflight + len(pb.batcher.waiting) else pb
        least = free[0]
        best = least.inflight + len(least.batcher.waiting)
        for p in free:  # first of the least loaded, in pod order (deterministic)
            load = p.inflight + len(p.batcher.waiting)
            if load < best:
                least, best = p, load
        if policy == "prefix_aware":
            g = int(self.wl.prefix_group[i])
            if g >= 0:
                ready = [p for p in self.pods if p.state == READY]
                home = ready[g % len(ready)]
                gap = home.inflight - least.inflight
                if home in free and gap < self.cfg.gateway.imbalance_threshold:
                    return home
        return least

    def _weighted(self, weights: tuple[float, ...]) -> Pod | None:
        """A ready pod drawn by its weight (pods beyond ``weights`` weigh 1), blind to load:
        at its concurrency limit the request waits in that pod's queue-proxy."""
        ready = [p for p in self.pods if p.state == READY]
        if not ready:
            return None
        w = np.array([weights[p.index] if p.index < len(weights) else 1.0 for p in ready])
        k = int(np.searchsorted(np.cumsum(w), float(self.route_rng.random()) * float(w.sum())))
        return ready[min(k, len(ready) - 1)]

    def _admit(self, t: float, i: int, pod: Pod) -> None:
        """Send ``i`` to ``pod`` now, or queue it in the pod's queue-proxy (at its limit)."""
        limit = self.cfg.gateway.concurrency_limit
        if limit and pod.inflight >= limit:
            self.rec.wait_kind[i] = 1 if self._capacity_coming() else 2
            pod.backlog.append(i)
        else:
            self._dispatch(t, i, pod)

    def _dispatch(self, t: float, i: int, pod: Pod) -> None:
        pod.inflight += 1
        self.rec.dispatched(i, t, pod.index)
        start = max(t, heapq.heappop(pod.api_free))
        done = start + self.api[i]
        heapq.heappush(pod.api_free, done)
        self.push(done, P_ENGINE, 3, (pod, i))

    def _drain_queue(self, t: float) -> None:
        while self.queue:
            pod = self._route(self.queue[0])
            if pod is None:
                return
            self._admit(t, self.queue.popleft(), pod)

    def _drain_backlog(self, t: float, pod: Pod) -> None:
        limit = self.cfg.gateway.concurrency_limit
        while pod.backlog and pod.inflight < limit:
            self._dispatch(t, pod.backlog.popleft(), pod)

    def _on_engine_arrival(self, t: float, obj: tuple[Pod, int]) -> None:
        pod, i = obj
        if pod.state == GONE:
            return  # failed with its pod
        wl = self.wl
        cached = 0
        g = int(wl.prefix_group[i])
        if g >= 0 and pod.template.prefix_caching:
            if g in pod.prefixes:
                cached = int(wl.prefix_tokens[i])
            pod.prefixes.add(g)
        seq = Sequence(str(i), int(wl.prompt_tokens[i]), int(wl.output_tokens[i]),
                       cached_tokens=cached, payload=i)  # fmt: skip
        self.seqs[i] = seq
        self._cut(pod, t)
        self.rec.engine_arrival[i] = t
        pod.batcher.add(seq, t)
        if pod.plan is None:
            self._start_step(pod, t)

    def _start_step(self, pod: Pod, t: float) -> None:
        plan = pod.batcher.schedule(t)
        pod.plan = plan
        if plan is None:
            return
        decode = plan.decode_seqs
        dt = pod.step_time(
            plan.prefill_tokens, decode, plan.context_tokens, decode + len(plan.chunks)
        )
        warming = t < pod.warm_until  # under traffic after Ready (pods.ready_warmup_s)
        if warming:
            dt *= pod.template.warm_factor
        pod.count_step(plan.prefill_tokens + decode, decode, plan.context_tokens, dt)
        self._seq += 1
        run = None if warming or plan.chunks else fastforward.begin(pod, plan, t, dt)
        if run is not None:  # a decode-only stretch: one event at its last step's end
            pod.run = run
            heapq.heappush(self.heap, (run.ends[-1], P_STEP, self._seq, 9, run))
            return
        heapq.heappush(self.heap, (t + dt, P_STEP, self._seq, 1, pod))

    def _on_run_end(self, t: float, run: fastforward.DecodeRun) -> None:
        pod = run.pod
        if pod.run is not run:
            return  # cut short: its steps went on as single events
        pod.run = None
        fastforward.settle(run, run.k, self.cfg.cpu.per_token_core_s)
        pod.plan = None
        self._start_step(pod, t)

    def _cut(self, pod: Pod, t: float) -> None:
        """End ``pod``'s decode-only stretch at ``t``: the steps that ended by then are
        completed, the one in flight goes on as a single step (nothing if no stretch runs)."""
        run = pod.run
        if run is None:
            return
        pod.run = None
        done = fastforward.steps_by(run, t)
        fastforward.settle(run, done, self.cfg.cpu.per_token_core_s)
        if done:
            pod.plan = pod.batcher.schedule(t)
        self._seq += 1
        heapq.heappush(self.heap, (run.ends[done], P_STEP, self._seq, 1, pod))

    def _on_step_end(self, t: float, pod: Pod) -> None:
        if pod.state == GONE:
            return
        plan = pod.plan
        assert plan is not None
        pod.plan = None
        out = pod.batcher.complete(plan, t)
        pod.step_ends.append(t)
        cpu = self.cfg.cpu
        pod.cpu_s += cpu.per_token_core_s * (plan.prefill_tokens + plan.decode_seqs)
        rec = self.rec
        for seq in out.first_tokens:
            i = seq.payload
            rec.first_token[i] = t
            # vLLM's TTFT starts when its frontend gets the request
            _observe(pod.ttft_hist, TTFT_BUCKETS, t - rec.dispatch[i])
            q = (seq.first_scheduled or t) - seq.engine_arrival
            _observe(pod.queue_hist, PHASE_BUCKETS, q)
            _observe(pod.phase_hists["prefill"], PHASE_BUCKETS, t - (seq.first_scheduled or t))
        if out.finished:
            for seq in out.finished:
                i = seq.payload
                rec.complete(i, t, pod.index, ST_OK)
                _observe(pod.e2e_hist, PHASE_BUCKETS, t - rec.dispatch[i])
                _observe(pod.phase_hists["decode"], PHASE_BUCKETS, t - rec.first_token[i])
                _observe(
                    pod.phase_hists["inference"], PHASE_BUCKETS, t - (seq.first_scheduled or t)
                )
                _observe(pod.token_hists["prompt"], TOKEN_BUCKETS, seq.prompt_tokens)
                _observe(pod.token_hists["output"], TOKEN_BUCKETS, seq.output_tokens)
                pod.cpu_s += cpu.per_request_core_s
                pod.requests_done += 1
            pod.inflight -= len(out.finished)
            self.open_requests -= len(out.finished)
            if pod.backlog:
                self._drain_backlog(t, pod)
            if self.queue:
                self._drain_queue(t)
            if pod.state == TERMINATING and pod.inflight == 0:
                self._kill(pod, t)
                return
        self._start_step(pod, t)

    # -- pods ----------------------------------------------------------------------------
    def _add_node(self, ready_at: float) -> Node:
        node = Node(f"gpu-node-{len(self.nodes) + 1:02d}", self.cfg.pods.gpus_per_node, ready_at)
        self.nodes.append(node)
        return node

    def _pod(self, t: float, template: Template) -> Pod:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        suffix = "".join(alphabet[k] for k in self.rng.integers(0, len(alphabet), 5))
        name = f"{self.cfg.output.deployment}-{template.hash}-{suffix}"
        pod = Pod(name, len(self.pods), template, t, self.cfg.api_server.workers)
        self.pods.append(pod)
        return pod

    def _place_now(self, pod: Pod) -> None:
        """On the first node with room (a new one if none has): a pod from before the run."""
        need = pod.template.gpus
        node = next((nd for nd in self.nodes if nd.gpus_free >= need), None)
        if node is None:
            node = self._add_node(0.0)
        node.gpus_free -= need
        node.image_cached = True
        pod.node = node

    def _new_pod(self, t: float, template: Template, initial: bool = False) -> Pod:
        pod = self._pod(t, template)
        if initial:  # running since before the capture: no start-up to simulate
            self._place_now(pod)
            pod.state = READY
            pod.ready_at = pod.scheduled_at = pod.started_at = t
            return pod
        self.rec.event(t, "pod_created", pod, "SuccessfulCreate", f"Created pod: {pod.name}")
        self._try_schedule(pod, t)
        return pod

    def _starting_pod(self, ready_s: float) -> None:
        """A pod created before the run and loading when it begins: placed on a node now,
        Ready ``ready_s`` in (the HPA counts it among the replicas it asked for)."""
        pod = self._pod(0.0, self.templates[-1])
        self._place_now(pod)
        pod.state = STARTING
        pod.scheduled_at = pod.started_at = 0.0
        self.desired += 1
        self.push(ready_s, P_POD, 2, (pod, READY))

    def _try_schedule(self, pod: Pod, t: float) -> None:
        need = pod.template.gpus
        for node in self.nodes:
            if node.gpus_free >= need:
                node.gpus_free -= need
                pod.node = node
                at = max(t, node.ready_at) + self.cfg.pods.scheduling_delay_s
                self.push(at, P_POD, 2, (pod, SCHEDULED))
                return
        p = self.cfg.pods
        self.rec.event(t, "failed_scheduling", pod, "FailedScheduling",
                       f"0/{len(self.nodes)} nodes are available: {len(self.nodes)} "
                       "Insufficient nvidia.com/gpu.")  # fmt: skip
        if len(self.nodes) < p.max_nodes:
            node = self._add_node(t + p.node_provision_s)
            node.image_cached = p.node_image_cached
            self.rec.event(t, "node_scale_up", pod, "TriggeredScaleUp",
                           f"pod triggered scale-up: [{node.name} 1]")  # fmt: skip
            self._try_schedule(pod, t)
        else:
            self.unscheduled.append(pod)

    def _on_pod(self, t: float, obj: tuple[Pod, int]) -> None:
        pod, state = obj
        if pod.state >= state:
            return  # deleted while starting
        p = self.cfg.pods
        rec = self.rec
        node = pod.node
        assert node is not None
        if state == SCHEDULED:
            pod.state = SCHEDULED
            pod.scheduled_at = t
            rec.event(t, "pod_scheduled", pod, "Scheduled",
                      f"Successfully assigned {self.cfg.output.namespace}/{pod.name} to {node.name}")  # fmt: skip
            rec.event(pod.created, "pod_pending", pod, "Scheduled", "created -> scheduled",
                      duration=t - pod.created)  # fmt: skip
            pull = 0.0 if (p.image_cached and node.image_cached) else p.image_pull_s
            if pull:
                rec.event(t, "image_pulling", pod, "Pulling", 'Pulling image "vllm/vllm-openai"')
                msg = f'Successfully pulled image "vllm/vllm-openai" in {pull:.3f}s'
            else:
                msg = 'Container image "vllm/vllm-openai" already present on machine'
            rec.event(t + pull, "image_pulled", pod, "Pulled", msg)
            node.image_cached = True
            self.push(t + pull, P_POD, 2, (pod, STARTING))
        elif state == STARTING:
            pod.state = STARTING
            pod.started_at = t
            rec.event(t, "container_started", pod, "Started", "Started container vllm")
            self.push(t + pod.template.load_s, P_POD, 2, (pod, READY))
        elif state == READY:
            pod.state = READY
            pod.ready_at = t
            pod.warm_until = t + pod.template.warm_s
            rec.event(t, "pod_ready", pod, "Ready", "readiness probe passed")
            # stamped at scheduling, as the Kubernetes source's pod-condition rows are
            rec.event(pod.scheduled_at, "cold_start", pod, "Ready", "scheduled -> ready",
                      duration=t - pod.scheduled_at)  # fmt: skip
            self._reconcile_rollout(t)
            self._drain_queue(t)

    def _live(self) -> list[Pod]:
        return [p for p in self.pods if p.state in (CREATED, SCHEDULED, STARTING, READY)]

    def _scale_to(self, t: float, n: int, initial: bool = False) -> None:
        live = self._live()
        self.desired = n
        template = self.templates[-1]
        if len(live) < n:
            for _ in range(n - len(live)):
                self._new_pod(t, template, initial)
        elif len(live) > n:
            # delete pods that are not ready first, then the newest ready ones
            victims = sorted(live, key=lambda p: (p.state == READY, -p.index))[: len(live) - n]
            for pod in victims:
                self._terminate(pod, t)

    def _terminate(self, pod: Pod, t: float) -> None:
        was_ready = pod.state == READY
        pod.state = TERMINATING
        if pod.backlog:  # queued in its queue-proxy: back to the gateway, in order
            self.queue.extendleft(reversed(pod.backlog))
            pod.backlog.clear()
            self._drain_queue(t)
        pod.terminate_at = t
        self.rec.event(t, "pod_killing", pod, "Killing", "Stopping container vllm")
        if not was_ready or (pod.inflight == 0 and pod.plan is None):
            self._kill(pod, t)
        else:
            self.push(t + self.cfg.pods.drain_s, P_POD, 8, pod)

    def _on_drain_deadline(self, t: float, pod: Pod) -> None:
        if pod.state == TERMINATING:
            self._kill(pod, t)

    def _kill(self, pod: Pod, t: float) -> None:
        """Remove the pod; requests still inside fail (the drain limit passed)."""
        if pod.state == GONE:
            return
        self._cut(pod, t)
        if pod.inflight:
            self.open_requests -= self.rec.fail_inside(pod, t)
            pod.inflight = 0
        pod.state = GONE
        if pod.node is not None:  # the node name stays on the pod for its requests' rows
            pod.node.gpus_free += pod.template.gpus
        while self.unscheduled:
            waiting = self.unscheduled.popleft()
            if waiting.state == CREATED:
                self._try_schedule(waiting, t)
                break

    # -- autoscaler ----------------------------------------------------------------------
    def _on_hpa(self, t: float, _: Any) -> None:
        cfg = self.cfg.hpa
        self.push(t + cfg.sync_period_s, P_HPA, 5, None)
        if self._rolling():
            return  # the deployment controller owns the replica count during a rollout
        total, ready = self.rec.hpa_metric(t - cfg.scrape_lag_s, self)
        panic = None
        if cfg.panic_window_s > 0:
            panic, _ = self.rec.hpa_metric(t - cfg.scrape_lag_s, self, cfg.panic_window_s)
        current = self.desired
        desired, self.hpa_state = autoscaler.sync(
            cfg, self.hpa_state, t, current, total, ready, panic
        )
        if desired != current:
            self.rec.hpa_event(t, desired, current, self)
            self._scale_to(t, desired)

    # -- rollouts ------------------------------------------------------------------------
    def _on_rollout(self, t: float, r: Any) -> None:
        cfg = apply_overrides(self.cfg, r.set) if r.set else self.cfg
        self.templates.append(make_template(cfg, len(self.templates), self.rng))
        self.rollout_version = len(self.templates) - 1
        self._rollout = r
        self.rec.rollout_event(t, self)
        self._reconcile_rollout(t)

    def _rolling(self) -> bool:
        latest = self.templates[-1]
        return any(p.template is not latest for p in self._live())

    def _reconcile_rollout(self, t: float) -> None:
        """maxSurge / maxUnavailable: add new pods, retire old ones as new ones get ready."""
        if not self._rolling():
            return
        r = self._rollout
        latest = self.templates[-1]
        live = self._live()
        old = [p for p in live if p.template is not latest]
        new = [p for p in live if p.template is latest]
        ready = sum(1 for p in live if p.state == READY)
        want = self.desired
        # retire old pods while enough pods stay ready
        for pod in sorted(old, key=lambda p: (p.state == READY, p.index)):
            if pod.state != READY or ready - 1 >= want - r.max_unavailable:
                if pod.state == READY:
                    ready -= 1
                self._terminate(pod, t)
                old.remove(pod)
        while len(old) + len(new) < want + r.max_surge and len(new) < want:
            new.append(self._new_pod(t, latest))

    # -- observation ---------------------------------------------------------------------
    def _on_sample(self, t: float, k: int) -> None:
        out = self.cfg.output
        for pod in self.pods:  # a scrape reads every engine as it is now
            self._cut(pod, t)
        self.rec.sample(t, k, self)
        if t + out.engine_sample_interval_s <= self.cfg.duration_s + out.drain_limit_s:
            self.push(t + out.engine_sample_interval_s, P_SAMPLE, 6, k + 1)


def _observe(hist: list[float], buckets: tuple[float, ...], value: float, count: int = 1) -> None:
    """Add ``count`` observations of ``value``: its bucket (``le`` is inclusive) and the sum."""
    hist[bisect.bisect_left(buckets, value)] += count
    hist[-1] += value * count


def run(cfg: ScenarioConfig, seed: int | None = None, progress: Progress | None = None) -> Recorder:
    """Run ``cfg`` with ``seed`` (default: the scenario's own)."""
    s = cfg.seed if seed is None else seed
    sim = Simulation(cfg, np.random.default_rng(s), s)
    if sim.n == 0:
        raise SimulationError(f"scenario {cfg.name!r} generates no requests")
    return sim.run(progress)
