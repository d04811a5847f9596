"""Sizing a stack against its own measured capacity: a roofline estimate, a short saturated
run of one replica (the capacity the workload mix really gets), rates scaled to a target
utilisation, a short healthy pilot run to size limits against, and the incident's traffic
scaled up or down (the severity loop of :mod:`realistic.corpus`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from realistic.engine import StepModel
from realistic.spec import GPUS, Rollout, Spec, Workload

#: the healthy baseline runs at this share of the fleet's measured capacity
BASE_UTILISATION = 0.5
#: the saturated capacity probe's length and the warm-up it does not count: a saturated engine
#: with 2,500-token prompts takes over 30 s per request, so a 45 s probe counted no completions
#: and such stacks were sized at a twentieth of their capacity
PROBE_S, PROBE_WARMUP_S = 150.0, 45.0
#: fleet size bounds when a target rate picks the replica count
MIN_REPLICAS, MAX_REPLICAS = 2, 10


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
        duration_s=PROBE_S,
        incident_s=PROBE_S,
        rollout=Rollout(),
        hpa=replace(spec.hpa, metric="none"),
        incident_gateway=None,
        gateway=replace(spec.gateway, max_connections=0, container_concurrency=0),
        workload=Workload((replace(ph, rate=rate, rate_to=-1.0),)),
    )
    o = simulate(one, seed + 7717)
    done = np.sum((o.finish >= PROBE_WARMUP_S) & (o.finish < PROBE_S))
    return max(float(done) / (PROBE_S - PROBE_WARMUP_S), 0.05)


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
    from realistic.fleet import simulate
    from realistic.outcome import SAMPLE_COLUMNS

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
