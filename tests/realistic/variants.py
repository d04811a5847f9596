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

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from realistic.calibrate import BASE_UTILISATION, calibrated, capacity_rps
from realistic.causes import ALL_PLATFORMS, BUILDERS, COMPOUNDS, PLATFORMS
from realistic.spec import (
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
#: the baseline rate is drawn in TARGET_RPS (bundles of a few thousand requests)
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
