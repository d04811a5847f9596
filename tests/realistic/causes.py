"""The root causes, each a builder that turns a healthy stack into that incident: it returns
the spec, the SLO metric (``ttft`` or ``tpot``), the *removal* (overrides that take the cause
away, for the counterfactual primary of compounds) and the *fix* a user would apply (dotted
overrides, issue 15's after-fix truth).  Severity comes from the mechanism (a load ramp, a pool
limit, a KV capacity ...), sized against the stack's measured capacity."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from realistic.calibrate import capacity_rps, measure_capacity, pilot
from realistic.spec import Platform, Rollout, Spec


def _incident(spec: Spec, **kw: float) -> Spec:
    """The spec with its incident phase changed (created from the baseline phase when absent):
    Phase fields given directly, ``rate_x`` multiplies the rate (a 60 s ramp)."""
    phases = spec.workload.phases
    inc = (
        phases[1]
        if len(phases) > 1
        else replace(phases[0], start_s=spec.incident_s, rate_to=phases[0].rate, ramp_s=60.0)
    )
    rate_x = kw.pop("rate_x", 1.0)
    inc = replace(inc, rate_to=inc.rate_to * rate_x, **kw)
    return replace(spec, workload=replace(spec.workload, phases=(phases[0], inc)))


Result = tuple[Spec, str, dict[str, object], dict[str, object]]


def _incident_at(spec: Spec, seed: int, utilisation: float, **mix: float) -> Spec:
    """The incident phase with a new request mix, its rate set so the fleet runs at
    ``utilisation`` of its capacity for that mix."""
    spec = _incident(spec, **mix)
    inc = spec.workload.phases[1]
    probe = replace(spec, workload=replace(spec.workload, phases=(replace(inc, start_s=0.0),)))
    rate = utilisation * spec.replicas * measure_capacity(probe, seed)
    inc = replace(inc, rate=spec.workload.phases[0].rate, rate_to=rate)
    return replace(spec, workload=replace(spec.workload, phases=(spec.workload.phases[0], inc)))


#: concurrency target of an autoscaler that sees the load (a cold-start case's; a scaling
#: lag's removal), times the baseline's per pod: high enough that the baseline holds still,
#: low enough that the 1.95x surge scales out at once
LOAD_AWARE_HPA_HEADROOM = 1.3


def scaling_lag(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    h = spec.hpa
    kind = mech or str(rng.choice(["cpu", "gpu_util", "slow_queue"]))
    if spec.platform != "istio":
        h = replace(
            h,
            metric="concurrency",
            sync_s=2.0,
            scrape_lag_s=60.0,
            up_pods=1,
            up_period_s=60.0,
            max_replicas=spec.replicas + 3,
        )
    elif kind == "cpu":
        h = replace(h, metric="cpu", target=60.0)
    elif kind == "gpu_util":
        h = replace(h, metric="gpu_util", target=98.0)
    else:
        h = replace(h, metric="queue", target=10.0, scrape_lag_s=75.0, up_pods=1, up_period_s=60.0)
    spec = replace(
        _incident(spec, rate_x=1.95),
        hpa=h,
        pods=replace(spec.pods, image_cached=True, warmup_s=15.0),
    )
    # the removal is an autoscaler that sees the load at once: on Istio, in-flight requests
    # a little above the baseline's (a queue-depth target never fires on an engine whose
    # running batch absorbs the surge, so "queue, target 2" removed nothing on such stacks);
    # on Knative, its KPA without the lag
    ideal = replace(
        h,
        metric="concurrency",
        target=round(LOAD_AWARE_HPA_HEADROOM * pilot(spec, seed).inflight_per_pod, 1)
        if spec.platform == "istio"
        else h.target,
        sync_s=2.0,
        scrape_lag_s=2.0,
        up_pods=10,
        up_period_s=2.0,
    )
    fix = {
        "hpa.metric": "queue",
        "hpa.target": 3.0,
        "hpa.scrape_lag_s": 15.0,
        "hpa.up_pods": 4,
        "hpa.up_period_s": 15.0,
    }
    return spec, "ttft", {"hpa": ideal}, fix


def cold_start(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    pods = replace(
        spec.pods,
        image_cached=False,
        pull_mb_s=float(rng.uniform(50, 120)),
        warmup_s=float(rng.uniform(60, 140)),
        load_gb_s=float(rng.uniform(0.6, 1.5)),
    )
    if mech == "node_scale_up" or rng.uniform() < 0.25:
        pods = replace(
            pods, node_scale_up_s=float(rng.uniform(60, 120)), free_gpu_nodes=spec.replicas
        )
    # the autoscaler reacts at once (concurrency a little above the baseline's, room to double
    # the fleet): what keeps capacity away is the pods' start-up, not the HPA.  A queue metric
    # never fires on an engine whose batch absorbs the surge, and then no pod starts at all.
    # A cause built before this one (scaling_lag, in the compound) owns the autoscaler.
    owned = len(spec.workload.phases) > 1
    h = (
        spec.hpa
        if owned
        else replace(
            spec.hpa,
            metric="concurrency",
            target=round(LOAD_AWARE_HPA_HEADROOM * pilot(spec, seed).inflight_per_pod, 1),
            max_replicas=max(spec.hpa.max_replicas, 2 * spec.replicas + 1),
        )
    )
    spec = replace(_incident(spec, rate_x=1.95), pods=pods, hpa=h)
    instant = replace(
        pods,
        image_cached=True,
        warmup_s=1.0,
        load_gb_s=500.0,
        node_scale_up_s=0.0,
        free_gpu_nodes=99,
    )
    return spec, "ttft", {"pods": instant}, {"pods.image_cached": True, "pods.load_gb_s": 10.0}


def rollout(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    n = int(rng.integers(2, 4))
    unavailable = 1
    wl = spec.workload
    base = replace(wl.phases[0], rate=wl.phases[0].rate / spec.replicas * n)
    spec = replace(
        spec,
        replicas=n,
        workload=replace(wl, phases=(base, *wl.phases[1:])),
        hpa=replace(spec.hpa, metric="none"),
        rollout=Rollout(
            at_s=spec.incident_s + float(rng.uniform(0, 20)),
            max_surge=0,
            max_unavailable=unavailable,
            image_cached=False,
            new_warmup_s=float(rng.uniform(60, 120)),
        ),
    )
    return (
        spec,
        "ttft",
        {"rollout.at_s": -1.0},
        {"rollout.max_surge": 1, "rollout.max_unavailable": 0},
    )


def compute_saturation(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    n = spec.replicas
    spec = replace(
        _incident(spec, rate_x=1.95),
        hpa=replace(spec.hpa, min_replicas=n, max_replicas=n),
        engine=replace(spec.engine, max_num_seqs=int(rng.choice([48, 64, 96]))),
    )
    more = 2 * n
    removal = {"replicas": more, "hpa.min_replicas": more, "hpa.max_replicas": more}
    fix_n = n + max(1, int(np.ceil(0.8 * n)))
    return (
        spec,
        "ttft",
        removal,
        {"replicas": fix_n, "hpa.min_replicas": fix_n, "hpa.max_replicas": fix_n},
    )


def prefill_compute(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    base = spec.workload
    p0 = base.phases[0].prompt_median
    spec = _incident_at(
        spec,
        seed,
        float(rng.uniform(0.8, 0.92)),
        prompt_median=float(max(3000.0, p0 * rng.uniform(5, 9))),
    )
    budget = spec.engine.max_num_batched_tokens
    return (
        spec,
        "ttft",
        {"workload": base},
        {"engine.max_num_batched_tokens": 8192 if budget < 8192 else 16384},
    )


def kv_cache_pressure(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    ph = spec.workload.phases[0]
    if mech == "kv_long_outputs":
        mix = {"output_median": ph.output_median * float(rng.uniform(3, 4))}
    else:
        mix = {"prompt_median": ph.prompt_median * float(rng.uniform(2.0, 3.0))}
    spec = _incident_at(spec, seed, 0.6, **mix)
    # The cache is sized against the incident mix's own demand (mean KV in use per pod with the
    # full cache), so the incident really runs out of blocks: sized against the baseline's, with
    # a fixed floor, most "KV" incidents peaked at 30 % usage, a prompt-mix shift mislabelled.
    # It never holds less than the baseline's peak needs, so the baseline stays healthy.
    inc = spec.workload.phases[1]
    steady = replace(
        spec,
        workload=replace(spec.workload, phases=(replace(inc, rate=inc.rate_to, ramp_s=0.0),)),
    )
    demand = pilot(steady, seed).kv_tokens_per_pod
    floor = KV_BASELINE_ROOM * pilot(spec, seed).kv_tokens_per_pod
    big = 4.0 * (inc.prompt_median + inc.output_median)  # a few large requests always fit
    kv = int(max(demand / float(rng.uniform(1.8, 2.5)), floor, big))
    spec = replace(spec, engine=replace(spec.engine, kv_tokens=kv, max_num_seqs=256))
    return spec, "ttft", {"engine.kv_tokens": 8 * kv}, {"engine.kv_tokens": 2 * kv}


#: the cache holds at least this multiple of the baseline's mean KV in use
KV_BASELINE_ROOM = 1.8


def decode_memory_bound(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    ph = spec.workload.phases[0]
    spec = replace(spec, engine=replace(spec.engine, max_num_seqs=256, kv_tokens=0))
    spec = _incident_at(
        spec, seed, 0.92, output_median=ph.output_median * 2.5, prompt_median=ph.prompt_median * 4.0
    )
    e = spec.engine
    return spec, "tpot", {"engine.mbu": min(0.98, e.mbu * 2)}, {"engine.max_num_seqs": 48}


def prefill_interference(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    if rng.uniform() < 0.5:
        e = replace(spec.engine, chunked_prefill=False, max_num_batched_tokens=16384)
    else:
        e = replace(spec.engine, chunked_prefill=True, max_num_batched_tokens=16384)
    spec = _incident_at(
        replace(spec, engine=e),
        seed,
        0.7,
        long_prompt_share=float(rng.uniform(0.1, 0.2)),
        long_prompt_tokens=float(rng.uniform(7000, 12000)),
    )
    fix = {"engine.chunked_prefill": True, "engine.max_num_batched_tokens": 1024}
    return spec, "tpot", {"engine.chunked_prefill": True, "engine.max_num_batched_tokens": 512}, fix


def load_imbalance(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    n = max(spec.replicas, 3)
    wl = spec.workload
    base = replace(wl.phases[0], rate=wl.phases[0].rate / spec.replicas * n)
    spec = replace(
        spec,
        replicas=n,
        routing="hot_spot",
        hot_weight=float(rng.uniform(2.5, 3.5)),
        hot_from_s=spec.incident_s,
        workload=replace(wl, phases=(base, *wl.phases[1:])),
        hpa=replace(spec.hpa, min_replicas=n, max_replicas=n),
    )
    spec = _incident(spec, rate_x=1.1)
    return spec, "ttft", {"routing": "least_request"}, {"routing": "least_request"}


def gateway_queue(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    pl = pilot(spec, seed)
    # the pool holds a little more than the incident's mean demand; its 30 s bursts overflow it
    spec = _incident(spec, rate_x=1.3)
    bursts = tuple(
        (spec.incident_s + a, 20.0, spec.workload.phases[0].rate * 1.0) for a in (70.0, 170.0)
    )
    spec = replace(spec, workload=replace(spec.workload, bursts=bursts))
    if spec.platform == "istio":
        limit = max(4, int(np.ceil(pl.inflight_per_pod * spec.replicas * 1.5)))
        g = replace(
            spec.gateway, max_connections=limit, max_pending=int(rng.choice([1024, 4 * limit]))
        )
        fix: dict[str, object] = {"gateway.max_connections": 4 * limit}
        spec = replace(spec, gateway=g)
    else:
        cc = max(2, int(np.ceil(pl.inflight_per_pod * 1.5)))
        spec = replace(
            spec,
            gateway=replace(spec.gateway, container_concurrency=cc),
            hpa=replace(spec.hpa, metric="none"),
        )
        fix = {"gateway.container_concurrency": 4 * cc}
    return spec, "ttft", {"gateway.max_connections": 0, "gateway.container_concurrency": 0}, fix


def ingress_network(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    bad = replace(
        spec.gateway,
        keepalive_reuse=float(rng.uniform(0.1, 0.4)),
        connect_fail=float(rng.uniform(0.08, 0.15)),
        retry_backoff_ms=float(rng.uniform(120, 250)),
        upstream_span=True,
    )
    spec = replace(spec, incident_gateway=bad)
    fix = {"incident_gateway.keepalive_reuse": 0.99, "incident_gateway.connect_fail": 0.0}
    return spec, "ttft", {"incident_gateway": None}, fix


def api_server_overhead(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    pl = pilot(spec, seed)
    rate_x = 1.6
    stream_us = 150.0
    load_inc = pl.tokens_per_s_per_pod * rate_x * stream_us / 1e6
    cpus = round(load_inc + float(rng.uniform(0.04, 0.07)), 3)
    api = replace(
        spec.api,
        cpus=cpus,
        parse_ms=10.0,
        stream_us_per_token=stream_us,
        http_span=rng.uniform() < 0.75,
    )
    spec = replace(_incident(spec, rate_x=rate_x), api=api)
    return spec, "ttft", {"api.cpus": 16.0}, {"api.cpus": round(cpus * 2, 2)}


def tensor_parallel_overhead(spec: Spec, rng: np.random.Generator, mech: str, seed: int) -> Result:
    model, gpu, tp, link = [
        ("llama-70b", "H100", 8, "ethernet"),
        ("qwen-32b", "L40S", 4, "pcie"),
        ("llama-8b", "L40S", 4, "pcie"),
    ][int(rng.integers(3))]
    spec = replace(spec, model=model, gpu=gpu, tp=tp, interconnect=link)  # type: ignore[arg-type]
    ph = spec.workload.phases[0]
    rate = 0.45 * spec.replicas * capacity_rps(spec, ph.prompt_median, ph.output_median)
    spec = replace(spec, workload=replace(spec.workload, phases=(replace(ph, rate=rate),)))
    return spec, "tpot", {"interconnect": "nvlink"}, {"interconnect": "nvlink"}


BUILDERS: Mapping[str, Callable[[Spec, np.random.Generator, str, int], Result]] = {
    "scaling_lag": scaling_lag,
    "cold_start": cold_start,
    "rollout": rollout,
    "compute_saturation": compute_saturation,
    "prefill_compute": prefill_compute,
    "kv_cache_pressure": kv_cache_pressure,
    "decode_memory_bound": decode_memory_bound,
    "prefill_interference": prefill_interference,
    "load_imbalance": load_imbalance,
    "gateway_queue": gateway_queue,
    "ingress_network": ingress_network,
    "api_server_overhead": api_server_overhead,
    "tensor_parallel_overhead": tensor_parallel_overhead,
}
#: causes that make sense only on some platforms
PLATFORMS: Mapping[str, tuple[Platform, ...]] = {
    "load_imbalance": ("istio", "knative_direct"),
    "ingress_network": ("istio", "knative_direct"),
}
ALL_PLATFORMS: tuple[Platform, ...] = ("istio", "knative_activator", "knative_direct", "kserve")
COMPOUNDS: tuple[tuple[str, str], ...] = (
    ("scaling_lag", "prefill_compute"),
    ("cold_start", "kv_cache_pressure"),
    ("rollout", "load_imbalance"),
    ("gateway_queue", "compute_saturation"),
    ("ingress_network", "api_server_overhead"),
    ("prefill_interference", "decode_memory_bound"),
    ("scaling_lag", "cold_start"),
    ("compute_saturation", "kv_cache_pressure"),
)
