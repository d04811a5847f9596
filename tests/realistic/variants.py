"""The corpus's variants: one root cause per bundle on a randomised stack, and compounds.

A :class:`Case` is (cause or causes, platform, mechanism variant, seed).  ``build`` turns it into
a :class:`Scenario`: the spec, the SLO metric, the windows, and per cause the mechanism-level
*removal* (the same run with that cause taken away: used to compute which cause explains most
of the p95's excess) and the *fix* a user would apply (dotted overrides, issue 15's after-fix
truth).  Domain randomisation (drawn from the seed): model, GPU and TP size, engine version
(metric and span names), routing, replica count, trace sampling, clock skew, missing metric
families, confounders (long outputs, RAG prompts, a reasoning model, a benign deploy).

Held out of tuning (fixed here, documented in docs/diagnosis.md): the whole ``kserve``
platform, the 2-5 % sampling regime, and the ``kv_long_outputs`` mechanism variant; plus every
tuning variant's seeds from ``HELD_OUT_SEED_BASE`` on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from realistic.engine import StepModel
from realistic.spec import (
    GPUS,
    ApiServer,
    Engine,
    Gateway,
    Hpa,
    Phase,
    Platform,
    Pods,
    Rollout,
    Spec,
    Telemetry,
    Workload,
)

HELD_OUT_PLATFORMS = ("kserve",)
HELD_OUT_MECHANISMS = ("kv_long_outputs",)
HELD_OUT_SAMPLING = (0.02, 0.05)
HELD_OUT_SEED_BASE = 1000
INCIDENT_S = 300.0
DURATION_S = 600.0

#: (model, gpu, tp) stacks drawn per bundle
STACKS = (
    ("llama-8b", "L40S", 1),
    ("mistral-7b", "L40S", 1),
    ("qwen-32b", "A100", 2),
    ("qwen-32b", "H100", 1),
    ("llama-70b", "H100", 4),
    ("llama-70b", "H200", 2),
    ("llama-70b", "A100", 4),
)
#: the healthy baseline runs at this share of the fleet's measured capacity
BASE_UTILISATION = 0.5
#: fleet size bounds; the baseline rate is drawn in TARGET_RPS (bundles of a few thousand requests)
MIN_REPLICAS, MAX_REPLICAS = 2, 10
TARGET_RPS = (3.0, 6.0)
VERSIONS = ("0.6", "0.10", "0.12", "main")


@dataclass(frozen=True)
class Case:
    causes: tuple[str, ...]
    platform: Platform
    seed: int
    mechanism: str = ""  # a named mechanism variant ("" = the cause's default)

    @property
    def name(self) -> str:
        m = f"-{self.mechanism}" if self.mechanism else ""
        return f"{'+'.join(self.causes)}{m}-{self.platform}-s{self.seed}"


@dataclass(frozen=True)
class Scenario:
    case: Case
    spec: Spec
    slo_metric: str  # ttft | tpot
    baseline: tuple[float, float] | None
    incident: tuple[float, float]
    removals: Mapping[str, Mapping[str, object]]  # cause -> overrides taking it away
    fixes: Mapping[str, Mapping[str, object]]  # cause -> a user's fix (dotted keys)
    confounders: tuple[str, ...] = ()
    notes: Mapping[str, object] = field(default_factory=dict)


def split_of(case: Case, sampling: float) -> str:
    """``held_out`` or ``tuning`` (by variant, sampling regime and seed)."""
    lo, hi = HELD_OUT_SAMPLING
    if (
        case.platform in HELD_OUT_PLATFORMS
        or case.mechanism in HELD_OUT_MECHANISMS
        or lo <= sampling <= hi
        or case.seed >= HELD_OUT_SEED_BASE
    ):
        return "held_out"
    return "tuning"


# -- capacity --------------------------------------------------------------------------------


def capacity_rps(spec: Spec, prompt: float, output: float) -> float:
    """Requests per second one replica sustains at a large batch (roofline estimate)."""
    sm = StepModel.of(spec, spec.interconnect or GPUS[spec.gpu].link)
    batch = min(spec.engine.max_num_seqs, max(1, sm.kv_capacity // int(prompt + output)), 96)
    comp, mem, comm = sm.parts(batch, 0.0, batch * (prompt + output / 2))
    step = sm.overhead + max(comp, mem) + comm
    pc, pm, pcm = sm.parts(prompt, 4.0 * sm.layers * sm.d_model * prompt * prompt / 2, 0)
    prefill = max(pc, pm) + pcm
    return 1.0 / (output * step / batch + prefill)


def measure_capacity(spec: Spec, seed: int) -> float:
    """Completions per second of one replica driven past saturation by the baseline mix."""
    from realistic.fleet import simulate

    ph = spec.workload.phases[0]
    est = capacity_rps(spec, ph.prompt_median, ph.output_median)
    rate = min(60.0, 2.5 * est)
    one = replace(
        spec,
        replicas=1,
        duration_s=45.0,
        incident_s=45.0,
        rollout=Rollout(),
        hpa=replace(spec.hpa, metric="none"),
        incident_gateway=None,
        gateway=replace(spec.gateway, max_connections=0, container_concurrency=0),
        workload=Workload((replace(ph, rate=rate, rate_to=-1.0),)),
    )
    o = simulate(one, seed + 7717)
    done = np.sum((o.finish >= 15.0) & (o.finish < 45.0))
    return max(float(done) / 30.0, 0.05)


def calibrated(
    spec: Spec, seed: int, utilisation: float = BASE_UTILISATION, target_rps: float = 0.0
) -> Spec:
    """``spec`` with every phase's rate scaled so the baseline runs at ``utilisation``; with
    ``target_rps``, the replica count is chosen first so the fleet serves about that rate."""
    cap = measure_capacity(spec, seed)
    if target_rps:
        n = int(np.clip(round(target_rps / (utilisation * cap)), MIN_REPLICAS, MAX_REPLICAS))
        room = spec.hpa.max_replicas - spec.hpa.min_replicas
        spec = replace(
            spec, replicas=n, hpa=replace(spec.hpa, min_replicas=n, max_replicas=n + room)
        )
    k = utilisation * spec.replicas * cap / spec.workload.phases[0].rate
    phases = tuple(
        replace(p, rate=p.rate * k, rate_to=p.rate_to * k if p.rate_to >= 0 else -1.0)
        for p in spec.workload.phases
    )
    bursts = tuple((a, b, c * k) for a, b, c in spec.workload.bursts)
    return replace(spec, workload=replace(spec.workload, phases=phases, bursts=bursts))


# -- the base stack --------------------------------------------------------------------------


def base_spec(
    case: Case, rng: np.random.Generator, held_out: bool
) -> tuple[Spec, float, tuple[str, ...]]:
    """A randomised healthy stack at about half its capacity; returns (spec, sampling, confounders)."""
    model, gpu, tp = STACKS[int(rng.integers(len(STACKS)))]
    version = VERSIONS[int(rng.integers(len(VERSIONS)))]
    spans = (
        "children"
        if version == "main" and rng.uniform() < 0.5
        else ("semconv" if version == "main" else "v1")
    )
    conf: list[str] = []
    prompt, output = 500.0 * float(np.exp(rng.normal(0, 0.3))), 170.0
    if rng.uniform() < 0.2:
        model, gpu, tp = "r1-14b", "H100", 1
        output = 900.0
        conf.append("reasoning_model")
    elif rng.uniform() < 0.15:
        output = 600.0
        conf.append("long_outputs")
    if rng.uniform() < 0.15:
        prompt = 2500.0
        conf.append("rag_prompts")
    replicas = int(rng.integers(2, 6))
    routing = ("least_request", "random", "round_robin")[int(rng.integers(3))]
    if routing == "random":
        conf.append("natural_spread")
    sampling = _sampling(rng, held_out)
    drop: list[str] = []
    if rng.uniform() < 0.25:
        drop.append("dcgm_prof")
    if rng.uniform() < 0.1:
        drop.append("istio")
    spec = Spec(
        platform=case.platform,
        model=model,
        gpu=gpu,
        tp=tp,
        replicas=replicas,
        routing=routing,
        duration_s=DURATION_S,
        incident_s=INCIDENT_S,
        gateway=Gateway(upstream_span=rng.uniform() < 0.7, verbose_events=rng.uniform() < 0.8),
        hpa=Hpa(metric="queue", target=5.0, min_replicas=replicas, max_replicas=replicas + 6),
        engine=Engine(
            version=version,
            spans=spans,  # type: ignore[arg-type]
            max_num_seqs=int(rng.choice([128, 256])),
            max_num_batched_tokens=int(rng.choice([2048, 8192])),
        ),
        api=ApiServer(http_span=rng.uniform() < 0.4),
        pods=Pods(warmup_s=float(rng.uniform(20, 40))),
        telemetry=Telemetry(
            sampling=sampling,
            skew_ms=float(rng.uniform(5, 60)),
            drop_families=tuple(drop),
            scrape_s=float(rng.choice([10.0, 15.0, 30.0])),
        ),
        t0=1_780_000_000.0 + 86400.0 * (case.seed % 97) + 3600.0 * len(case.name),
    )
    if spec.platform != "istio":
        spec = replace(
            spec,
            hpa=replace(
                spec.hpa,
                metric="concurrency",
                target=20.0,
                sync_s=2.0,
                scrape_lag_s=4.0,
                up_pods=100,
                up_period_s=2.0,
            ),
        )
    rate = 0.5 * replicas * capacity_rps(spec, prompt, output)
    wl = Workload(
        (Phase(0.0, rate, prompt_median=prompt, output_median=output),),
        diurnal=float(rng.uniform(0, 0.08)),
    )
    spec = replace(spec, workload=wl)
    spec = calibrated(spec, case.seed, target_rps=float(rng.uniform(*TARGET_RPS)))
    if rng.uniform() < 0.15 and case.causes[0] not in ("rollout", "cold_start"):
        spec = replace(
            spec,
            rollout=Rollout(
                at_s=float(rng.uniform(60, 250)), max_surge=1, max_unavailable=0, image_cached=True
            ),
        )
        conf.append("benign_deploy")
    return spec, sampling, tuple(conf)


def _sampling(rng: np.random.Generator, held_out: bool) -> float:
    if held_out and rng.uniform() < 0.4:
        return float(rng.uniform(*HELD_OUT_SAMPLING))
    return float(rng.choice([1.0, 1.0, 0.5, 0.2, 0.1, float(rng.uniform(0.08, 0.7))]))


# -- causes ----------------------------------------------------------------------------------

Builder = Callable[
    [Spec, np.random.Generator, str], tuple[Spec, str, dict[str, object], dict[str, object]]
]


@dataclass(frozen=True)
class Pilot:
    """The healthy stack measured over a short run: what limits are sized against."""

    inflight_per_pod: float
    kv_tokens_per_pod: float
    tokens_per_s_per_pod: float


def intensified(spec: Spec, factor: float) -> Spec:
    """The incident's traffic (its phase's end rate and the bursts) times ``factor``."""
    phases = spec.workload.phases
    if len(phases) < 2:
        inc = replace(
            phases[0], start_s=spec.incident_s, rate_to=phases[0].rate * factor, ramp_s=60.0
        )
    else:
        inc = replace(phases[1], rate_to=phases[1].rate_to * factor)
    bursts = tuple((a, b, c * factor) for a, b, c in spec.workload.bursts)
    return replace(spec, workload=replace(spec.workload, phases=(phases[0], inc), bursts=bursts))


def pilot(spec: Spec, seed: int) -> Pilot:
    from realistic.fleet import SAMPLE_COLUMNS, simulate

    short = replace(
        spec,
        duration_s=150.0,
        incident_s=150.0,
        rollout=Rollout(),
        hpa=replace(spec.hpa, metric="none"),
        workload=replace(spec.workload, phases=spec.workload.phases[:1]),
    )
    o = simulate(short, seed + 99991)
    c = {n: i for i, n in enumerate(SAMPLE_COLUMNS)}
    rows = o.samples[o.samples[:, 0] >= 30.0]
    pods = max(1, len(np.unique(rows[:, 1])))
    kv = float(np.mean(rows[:, c["kv_usage"]])) * o.kv_capacity
    span = float(rows[:, 0].max() - rows[:, 0].min()) or 1.0
    toks = 0.0
    for p in np.unique(rows[:, 1]):
        r = rows[rows[:, 1] == p]
        toks += float(r[-1, c["decode_tokens"]] - r[0, c["decode_tokens"]]) / span
    return Pilot(float(np.mean(rows[:, c["inflight"]])), kv, toks / pods)


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
    ideal = replace(
        h,
        metric="queue" if spec.platform == "istio" else "concurrency",
        target=2.0 if spec.platform == "istio" else h.target,
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
    h = spec.hpa if spec.platform != "istio" else replace(spec.hpa, metric="queue", target=3.0)
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
    pl = pilot(spec, seed)
    kv = int(max(pl.kv_tokens_per_pod * 2.6, 20000))
    ph = spec.workload.phases[0]
    if mech == "kv_long_outputs":
        spec = _incident_at(
            spec, seed, 0.6, output_median=ph.output_median * float(rng.uniform(3, 4))
        )
    else:
        spec = _incident_at(
            spec, seed, 0.6, prompt_median=ph.prompt_median * float(rng.uniform(2.5, 3.5))
        )
    spec = replace(spec, engine=replace(spec.engine, kv_tokens=kv, max_num_seqs=256))
    return spec, "ttft", {"engine.kv_tokens": 8 * kv}, {"engine.kv_tokens": 2 * kv}


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


def build(case: Case) -> Scenario:
    """The scenario of ``case``, deterministic in it."""
    rng = np.random.default_rng([case.seed, *(ord(c) for c in case.name)])
    held = split_of(case, 0.5) == "held_out"
    spec, sampling, conf = base_spec(case, rng, held)
    removals: dict[str, Mapping[str, object]] = {}
    fixes: dict[str, Mapping[str, object]] = {}
    metric = "ttft"
    for cause in case.causes:
        mech = case.mechanism if cause in MECHANISMS_OF.get(case.mechanism, ()) else ""
        spec, m, removal, fix = BUILDERS[cause](spec, rng, mech, case.seed)
        removals[cause], fixes[cause] = removal, fix
        metric = "tpot" if m == "tpot" else metric
    if any(c in RECALIBRATE for c in case.causes):
        fixed_n = any(c in ("rollout", "load_imbalance") for c in case.causes)
        target = 0.0 if fixed_n else float(rng.uniform(*TARGET_RPS))
        spec = calibrated(spec, case.seed, _utilisation(case), target_rps=target)
    if spec.rollout.at_s >= 0 and "rollout" not in case.causes and spec.hpa.metric == "none":
        spec = replace(spec, rollout=Rollout())
    baseline: tuple[float, float] | None = (0.0, spec.incident_s)
    incident = (spec.incident_s, spec.duration_s)
    if "tensor_parallel_overhead" in case.causes:
        baseline, incident = None, (0.0, spec.duration_s)
    spec = replace(spec, telemetry=replace(spec.telemetry, sampling=sampling))
    return Scenario(
        case, spec, metric, baseline, incident, removals, fixes, conf, {"sampling": sampling}
    )


#: causes whose builder changes the engine's capacity: the rates are re-measured after them
RECALIBRATE = (
    "compute_saturation",
    "prefill_interference",
    "decode_memory_bound",
    "tensor_parallel_overhead",
    "rollout",
    "load_imbalance",
)


def _utilisation(case: Case) -> float:
    if "rollout" in case.causes:
        return 0.62  # a fleet one pod short runs at about 0.62 * n / (n - 1)
    if "tensor_parallel_overhead" in case.causes:
        return 0.45
    return BASE_UTILISATION


#: named mechanism variants -> the cause they shape
MECHANISMS_OF: Mapping[str, tuple[str, ...]] = {
    "kv_long_outputs": ("kv_cache_pressure",),
    "node_scale_up": ("cold_start",),
    "cpu": ("scaling_lag",),
    "gpu_util": ("scaling_lag",),
    "slow_queue": ("scaling_lag",),
}


def corpus_cases() -> tuple[Case, ...]:
    """Every case of the corpus: each cause on each platform it applies to, two tuning seeds and
    one held-out seed; the held-out KV mechanism; the compounds; fixed order."""
    cases: list[Case] = []
    for cause in BUILDERS:
        for platform in PLATFORMS.get(cause, ALL_PLATFORMS):
            seeds = (1001, 1002) if platform in HELD_OUT_PLATFORMS else (1, 2, 1001)
            cases += [Case((cause,), platform, s) for s in seeds]
    for platform in ("istio", "knative_activator", "kserve"):
        cases.append(Case(("kv_cache_pressure",), platform, 1003, "kv_long_outputs"))
    for a, b in COMPOUNDS:
        platforms = [
            p
            for p in ALL_PLATFORMS
            if p in PLATFORMS.get(a, ALL_PLATFORMS) and p in PLATFORMS.get(b, ALL_PLATFORMS)
        ]
        cases += [Case((a, b), platforms[0], 3), Case((a, b), platforms[-1], 1004)]
    return tuple(cases)
