"""Calibrate the simulator to a capture: fit what the capture shows, keep the rest from ``base``.

What is fitted, and from what (every fit records its quality in :class:`FitQuality`):

* workload: the observed arrivals and prompt/output lengths are replayed as they are (the
  most faithful workload there is); the rate per minute, burstiness (CV of inter-arrival gaps,
  1 for Poisson) and lognormal length fits are recorded so a what-if can scale them;
* engine step time (``steps``): a request's decode takes ``output_tokens - 1`` steps, so its
  TPOT is the mean step time over its decode, and the batch it shared those steps with is
  known from the other requests on the same replica; single prefill steps are pinned down
  exactly by the timestamps.  A line is fitted to those (two ways), and with a known model and
  GPU the roofline's efficiencies too; the candidate whose replay of the observed workload
  reproduces the observed percentiles best is kept (the roofline preferred, see
  ``ROOFLINE_PREFERENCE``);
* per-request latency of the stages outside the engine (ingress, API server): lognormal fits;
  a stage the capture lacks is zero (its requests start after it);
* pod start-up (pending = created -> scheduled, cold start = scheduled -> ready) from the
  events of pods started during the capture;
* replicas and HPA min/max from kube-state-metrics series when present;
* a rolling update during the capture (:mod:`.rollout`): its start and the ``maxSurge`` /
  ``maxUnavailable`` its first step shows, replayed with the fitted pod start-up;
* without ``base``, what the telemetry names about the deployment (:mod:`.infer`): model and
  GPU (which enables the roofline), GPUs per pod, whether an HPA exists and what it scales
  on, free GPU nodes, the gateway's routing and per-replica concurrency limit, a saturated
  ``max_num_seqs``, a token budget that chunked prompts and the KV cache's size; and what its
  behaviour implies (:mod:`.observed`): an HPA metric the simulator does not produce, fitted
  from its series; the KV cache of a KV-limited engine; multi-node replicas
  (:mod:`.deployment` puts them together);
* sampled traces (:mod:`.sampling`): the workload rebuilt at the rate the request counters
  show, the batch each traced request shared from the engine's running gauge.

Nothing here aborts on an unfamiliar deployment: what the telemetry does not show is kept at a
stand-in and listed in ``FitQuality.gaps`` (:class:`~.gaps.Gap`: why, what stands in, which
telemetry would fix it).

* ``parts``       fits outside the engine: workload, stage latencies, start-up, replicas, HPA
* ``steps``       the engine step-time fit: decode durations and the batch each request shared
* ``scale``       the fitted line's scale search: the best 5 % step in the fewest replays
* ``replay``      run the simulator on an observed workload (``Replays``: each config once,
                  a round that would leave a worker idle filled with the runs needed next)
* ``score``       how well a replay reproduces the capture (and the caller's SLOs)
* ``sampling``    sampled traces: the full-rate workload rebuilt from counters
* ``infer``       what the telemetry names about the deployment (model, GPU, HPA metric)
* ``hpa_timing``  the replayed autoscaler must not scale out before the observed one
* ``observed``    deployment facts read from what the engine and autoscaler did
* ``deployment``  the deployment a calibration without ``--base`` replays
* ``gaps``        what could not be read from the telemetry, and what stands in
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tailtriage.errors import InsufficientDataError
from tailtriage.model import Capture
from tailtriage.remediation.calibrate.budget import BUDGET_KEY, budget_candidate, with_budget
from tailtriage.remediation.calibrate.deployment import (
    STEP_TIME_GAP,
    inferred_base,
    kv_for_unknown_hardware,
)
from tailtriage.remediation.calibrate.gaps import Gap
from tailtriage.remediation.calibrate.hpa_timing import (
    EarlyScaleUp,
    OffTrack,
    early_scale_up,
    kpa_off_track,
    kpa_variants,
    with_target_scaled,
)
from tailtriage.remediation.calibrate.parts import (
    ApiService,
    api_service_fit,
    censored_start_gap,
    edge_phases,
    fit_arrivals,
    fit_ingress,
    fit_lengths,
    fit_pods,
    fit_scaling,
    latency_dist,
    load_split_gap,
    observed_workload,
    replicas_changed,
    split_load,
    stage_samples,
    window_width,
)
from tailtriage.remediation.calibrate.replay import Replays
from tailtriage.remediation.calibrate.rollout import fit_rollouts
from tailtriage.remediation.calibrate.routing_skew import fit_routing_skew
from tailtriage.remediation.calibrate.sampling import (
    SAMPLED_BELOW,
    incident_workload,
    traced_batch_share,
    with_engine_batch,
)
from tailtriage.remediation.calibrate.scale import (
    SCALE_MIN_SCORE,
    SCALE_STEP,
    SCALE_STEPS,
    Probe,
    best_step,
)
from tailtriage.remediation.calibrate.score import ReplayTarget, bias_of, replay_error
from tailtriage.remediation.calibrate.score import score as score_of_replay
from tailtriage.remediation.calibrate.steps import (
    EngineTimings,
    RooflineFit,
    StepFeatures,
    StepFit,
    engine_timings,
    fit_compute,
    fit_roofline,
    fit_step_time,
    step_features,
)
from tailtriage.simulator.cluster import make_template
from tailtriage.simulator.config import (
    Coefficients,
    FittedOn,
    Phase,
    ScenarioConfig,
    apply_overrides,
)
from tailtriage.simulator.steptime import RooflineStepTime
from tailtriage.simulator.workload import Workload

__all__ = [
    "Calibration",
    "EngineTimings",
    "FitQuality",
    "Gap",
    "ReplayTarget",
    "RooflineFit",
    "StepFeatures",
    "StepFit",
    "calibrate",
    "engine_timings",
    "fit_step_time",
    "observed_workload",
    "step_features",
]


# -- fit quality ---------------------------------------------------------------------------
@dataclass(frozen=True)
class FitQuality:
    """How well each part of the calibration is supported by the capture."""

    requests: int = 0
    #: per fitted part: {"n": samples, "r2"/"mape"/"ks": ..., "note": ...}
    parts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    #: parts of the deployment the telemetry did not show, and what stands in for each
    gaps: tuple[Gap, ...] = ()


# -- calibration ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    """A simulator config fitted to a capture, the observed workload to replay, and how well
    each part fits."""

    config: ScenarioConfig
    workload: Workload  # the observed arrivals and sizes, relative to config.start_unix_s
    fit: FitQuality
    step: StepFit | None = None
    #: the calibrated stack replaying the observed workload (seed ``seed``), when it was run
    baseline: Capture | None = None
    seed: int = 0


def calibrate(
    capture: Capture,
    base: ScenarioConfig | None = None,
    *,
    seed: int = 0,
    target: ReplayTarget | None = None,
) -> Calibration:
    """Fit the simulator to ``capture``.

    ``base`` supplies what a capture cannot show (model, GPU, engine flags such as
    ``max_num_batched_tokens``, HPA metric); everything the capture does show is fitted over
    it.  ``target``: what the replay must reproduce besides the whole capture's percentiles
    (:mod:`.score`; the what-if passes its SLOs over the incident window).  Raises
    :class:`InsufficientDataError` when the capture has no usable requests."""
    given_base = base is not None
    workload, t0, sampling = incident_workload(capture, seed=seed)
    warnings: list[str] = []
    inferred: dict[str, Any] = {}
    gaps: list[Gap] = []
    parts: dict[str, Any] = {}
    ratio = float(sampling["ratio"]) if sampling["rebuilt"] else 1.0
    if sampling["rebuilt"]:
        parts["sampling"] = sampling
        warnings.append(
            f"traces sampled: {ratio:.1%} of the {sampling['counted']:,.0f} requests "
            f"{sampling['counter']} counted have a trace; the replay rebuilt {len(workload):,} "
            "requests at the counted rate, lengths drawn from the traced ones"
        )
    if base is None:
        base, inferred, more = inferred_base(capture, sampled=ratio)
        gaps += more
    elif base.engine.num_gpu_blocks == 0 and base.step_time.mode != "roofline":
        # the KV cache is sized from the model and GPU, which this base does not name
        base, inferred, more = kv_for_unknown_hardware(capture, base, sampled=ratio)
        gaps += more
    arrivals, arr_part = fit_arrivals(workload.arrival)
    prompt, output, len_part = fit_lengths(workload)
    parts.update(arrivals=arr_part, lengths=len_part)
    if inferred:
        parts["inferred"] = inferred

    timings: EngineTimings | None = None
    try:
        timings = engine_timings(capture)
        if ratio < 1.0:
            timings = with_engine_batch(timings, capture, ratio)
        elif (share := traced_batch_share(timings, capture)) is not None and share < SAMPLED_BELOW:
            # no counter said so, but the engine ran more sequences than the traces show
            timings = with_engine_batch(timings, capture, share)
            parts["batch_from_gauge"] = {"traced_share": round(share, 3)}
            warnings.append(
                f"the traces show {share:.0%} of the sequences the engine's running gauge "
                "counted; the step time is fitted against the gauge's batch"
            )
    except InsufficientDataError as exc:
        warnings.append(
            f"engine step time not fitted ({exc}); the {base.step_time.mode} model is kept"
        )
        parts["step_time"] = {"n": 0, "mode": base.step_time.mode, "note": str(exc)}
        gaps.append(STEP_TIME_GAP)

    ingress, tls_ms, reuse, parts["ingress"] = fit_ingress(stage_samples(capture, "ingress"))
    api, parts["api_server"] = latency_dist(stage_samples(capture, "api_server"))
    pods, parts["pods"] = fit_pods(capture, base.pods)
    if (censored := censored_start_gap(parts["pods"])) is not None:
        gaps.append(censored)
    pods, load_s = split_load(pods, base.model)
    if load_s is not None:
        parts["pods"]["weight_load_s"] = round(load_s, 1)
        gaps.append(load_split_gap(load_s, pods.warmup_s))
    pods_scaled, hpa, parts["scaling"] = fit_scaling(
        capture, replace(base, pods=pods), workload, t0
    )

    rollouts = base.rollouts
    if not rollouts:  # rolling updates during the capture are part of what happened
        rollouts, warm, parts["rollouts"] = fit_rollouts(capture, t0)
        if warm is not None:  # the new pods served slower right after Ready
            pods_scaled = replace(
                pods_scaled, ready_warmup_s=warm.seconds, ready_warmup_factor=warm.factor
            )
    span = float(workload.arrival[-1]) if len(workload) else 0.0
    phase = Phase(name="observed", arrivals=arrivals, prompt_tokens=prompt, output_tokens=output)
    phases, parts["ingress_windows"] = edge_phases(capture, t0, span, phase)
    config = replace(
        base,
        name=f"calibrated:{base.name}",
        root_cause="",
        start_unix_s=t0,
        ingress=replace(
            base.ingress, latency_ms=ingress, tls_handshake_ms=tls_ms, keepalive_reuse=reuse
        ),
        api_server=replace(base.api_server, base_ms=api, per_prompt_token_us=0.0),
        pods=pods_scaled,
        hpa=hpa,
        workload=phases,
        replay=None,
        rollouts=rollouts,
        incident_s=(),
    )
    if config.gateway.routing != "weighted":  # a skew the capture shows is what happened
        before = config.gateway.routing
        before = before if before in ("random", "round_robin") else "least_outstanding"
        skew, parts["routing_skew"] = fit_routing_skew(capture, t0, before)
        if skew:
            found = parts["routing_skew"]
            warnings.append(
                f"routing skew: one pod took {found['busiest_fair_shares']:.1f} fair shares of "
                f"the requests from {skew['gateway.weighted_from_s']:.0f} s into the capture "
                f"({found['source']}); replayed as load-blind weighted routing"
            )
            config = apply_overrides(config, skew)
    step: StepFit | None = None
    baseline: Capture | None = None
    service = api_service_fit(capture, base.api_server.base_ms.sigma or 0.3, t0, span)
    if timings is not None:
        # the base's model and GPU are facts only when the caller gave them with a roofline,
        # or when the telemetry named both
        named = inferred.get("hardware", {}).get("set", {})
        known_hardware = base.step_time.mode == "roofline" and (
            given_base or ("model.name" in named and "gpu.type" in named)
        )
        runs = Replays(workload, seed)  # every replay of this calibration, each config once
        config, step, baseline, parts["step_time"] = _choose_step_model(
            capture, config, workload, timings, seed, warnings, known_hardware, target, runs
        )
        if baseline is not None and service is not None:
            config, baseline, parts["api_server"] = _choose_api_server(
                capture, config, runs, baseline, service, parts["api_server"], target
            )
        budget = budget_candidate(config, workload)
        if baseline is not None and budget is not None and _assumed(gaps, BUDGET_KEY):
            config, baseline, parts["token_budget"] = _choose_budget(
                capture, config, runs, baseline, budget, target
            )
            if parts["token_budget"]["chosen"] == budget:  # fitted: no longer assumed
                gaps = [g for g in gaps if g.part != BUDGET_KEY]
        if baseline is not None:
            early = early_scale_up(capture, baseline, config, ratio)
            if early is not None:
                config, baseline, parts["hpa_timing"] = _choose_hpa_target(
                    capture, config, runs, baseline, early, target
                )
            off = kpa_off_track(capture, baseline, config, span)
            if off is not None:
                config, baseline, parts["kpa_timing"] = _choose_kpa_timing(
                    capture, config, runs, baseline, off, target
                )
    fit = FitQuality(
        requests=len(workload), parts=parts, warnings=tuple(warnings), gaps=tuple(gaps)
    )
    return Calibration(
        config=config, workload=workload, fit=fit, step=step, baseline=baseline, seed=seed
    )


#: a roofline is kept unless it replays this much worse (mean |log error|) than the best line:
#: its shape extrapolates to other token budgets and batch sizes, a line's does not
ROOFLINE_PREFERENCE = 0.05


def _candidates(
    config: ScenarioConfig, timings: EngineTimings, known_hardware: bool
) -> list[tuple[str, ScenarioConfig, dict[str, Any], StepFit | None]]:
    budget = config.engine.max_num_batched_tokens
    out: list[tuple[str, ScenarioConfig, dict[str, Any], StepFit | None]] = []
    for name, single in (("tpot+steps", True), ("tpot", False)):
        try:
            fit = fit_step_time(timings, budget, single=single)
        except InsufficientDataError:
            continue
        c = fit.model
        coef = Coefficients(c0=c.c0, prefill=c.prefill, decode=c.decode, context=c.context)
        # measured on this stack's hardware: a what-if on other hardware rescales the line
        on = FittedOn(model=config.model, gpu=config.gpu)
        st = replace(config.step_time, mode="fitted", coefficients=coef, fitted_on=on)
        info = {"n": fit.n, "r2": fit.r2, "mape": fit.mape}
        out.append((name, replace(config, step_time=st), info, fit))
        if name == "tpot" and (per_token := fit_compute(timings, c, budget)) is not None:
            # the decode line with a compute side: long prefills cross the roofline's ridge
            hinge = replace(st, coefficients=replace(coef, compute=per_token))
            info = {**info, "compute_s_per_token": per_token}
            out.append(("tpot+compute", replace(config, step_time=hinge), info, fit))
    if known_hardware and timings.sampled < 1.0:
        # sampled traces pin down no single step, and a roofline fitted to mean compositions
        # is ill-posed: its published-default efficiencies compete as they are
        note: dict[str, Any] = {"note": "default efficiencies (sampled traces)"}
        out.append(("roofline-defaults", config, note, None))
    if known_hardware:
        template = make_template(config, 0, np.random.default_rng(0)).step_model
        if isinstance(template, RooflineStepTime):
            try:
                rf = fit_roofline(timings, template, budget)
            except InsufficientDataError:
                return out
            st = replace(
                config.step_time, mode="roofline", mfu=rf.mfu, mbu=rf.mbu, overhead_s=rf.overhead_s
            )
            info = {
                "n": rf.n,
                "mape": rf.mape,
                "mfu": rf.mfu,
                "mbu": rf.mbu,
                "overhead_s": rf.overhead_s,
            }
            out.append(("roofline", replace(config, step_time=st), info, None))
    return out


def _choose_step_model(
    capture: Capture,
    config: ScenarioConfig,
    workload: Workload,
    timings: EngineTimings,
    seed: int,
    warnings: list[str],
    known_hardware: bool = False,
    target: ReplayTarget | None = None,
    runs: Replays | None = None,
) -> tuple[ScenarioConfig, StepFit | None, Capture | None, dict[str, Any]]:
    """Fit the step time several ways (a line to decode TPOTs; a line to TPOTs plus the single
    prefill steps the timings show; with a known model and GPU, the roofline's efficiencies),
    replay the observed workload with each, and keep the one that reproduces the observed
    latency percentiles best - preferring the roofline within ``ROOFLINE_PREFERENCE``."""
    runs = runs if runs is not None else Replays(workload, seed)
    scored: list[tuple[float, str, ScenarioConfig, StepFit | None, Capture]] = []
    candidates: dict[str, Any] = {}
    # the roofline first: a line can only displace it by replaying ROOFLINE_PREFERENCE better,
    # impossible when the roofline's own score is within it - then the lines are not replayed
    # (replayed ``workers()`` at a time: the roofline's run beside the first line's)
    found = sorted(_candidates(config, timings, known_hardware), key=lambda c: c[0] != "roofline")
    steady = functools.cache(lambda: not replicas_changed(capture))
    for i, (name, cfg, info, fit) in enumerate(found):
        # this candidate and the next (a round of the workers); a worker left idle replays the
        # first scale step of the candidate kept so far: the search's first probe if it stays
        pending = {repr(c[1]): c[1] for c in found[i:] if not runs.has(c[1])}
        batch = [] if runs.has(cfg) else list(pending.values())[: runs.width]
        idle = bool(scored) and runs.width > 1  # one worker is never idle: no spare needed
        spare = _first_scale_step(capture, _best(scored), steady) if idle else []
        (sim, *_) = runs.run([cfg, *batch], spare)
        score, err = score_of_replay(capture, sim, target)
        candidates[name] = {**info, "replay_error_pct": err}
        scored.append((score, name, cfg, fit, sim))
        if name == "roofline" and score <= ROOFLINE_PREFERENCE:
            break
    if not scored:
        warnings.append("engine step time not fitted; the configured model is kept")
        return config, None, None, {"mode": config.step_time.mode, "candidates": candidates}
    kept = _best(scored)
    score, chosen, cfg, fit, sim = kept
    part = {**candidates[chosen], "mode": cfg.step_time.mode, "chosen": chosen}
    part["candidates"] = candidates
    start = _scale_start(capture, cfg, sim, steady)
    if start is not None:
        configs = _scale_configs(cfg, start)
        cfg, sim, part["scale"] = _refine_scale(capture, configs, start, sim, runs)
        part["replay_error_pct"] = replay_error(capture, sim, target)
    return cfg, fit, sim, part


#: a replayed step-time candidate: (score, name, config, line fit, replay)
Scored = tuple[float, str, ScenarioConfig, StepFit | None, Capture]


def _best(scored: Sequence[Scored]) -> Scored:
    """The candidate kept: the best score, but the roofline within ROOFLINE_PREFERENCE."""
    best = min(scored, key=lambda x: x[0])
    roof = [x for x in scored if x[1] == "roofline"]
    if roof and roof[0][0] <= best[0] + ROOFLINE_PREFERENCE:
        best = roof[0]
    return best


def _scale_start(
    capture: Capture, cfg: ScenarioConfig, sim: Capture, steady: Callable[[], bool]
) -> Probe | None:
    """The scale search's step 0 (``sim``, the kept candidate's replay), None where it does
    not search.

    With an autoscaler in the loop the replay's error may be its timing, which rescaling the
    engine would only hide: the scale is refined on a fixed replica count alone - fixed by
    the spec, or kept all along by an autoscaler that never acted (``steady``; a line's or a
    roofline's: efficiencies fitted to sampled traces, or published defaults, carry the same
    throughput bias).  On the whole capture's percentiles only: a throughput bias shows
    everywhere, while the incident's own percentile also carries what the replay gets wrong
    about the incident's dynamics (a rollout's warm-up), which a scale would hide."""
    fixed = not cfg.hpa.enabled or cfg.hpa.min_replicas == cfg.hpa.max_replicas
    whole, whole_err = score_of_replay(capture, sim)
    if whole > SCALE_MIN_SCORE and (fixed or steady()):
        return Probe(whole, bias_of(whole_err))
    return None


def _scale_configs(config: ScenarioConfig, start: Probe) -> list[tuple[float, ScenarioConfig]]:
    """The scale search's steps for ``config`` from its step 0 (``start``), as (factor,
    config): SCALE_STEP each, in the direction the replay's bias says (slower replay: faster
    steps), up to the last step the hardware allows."""
    direction = -1.0 if start.bias > 0 else 1.0
    out = [(1.0, config)]
    for k in range(1, SCALE_STEPS + 1):
        f = (1.0 + direction * SCALE_STEP) ** k
        scaled = _scaled(config, f)
        if scaled is None:
            break  # a roofline faster than the hardware: this and every further step
        out.append((f, scaled))
    return out


def _first_scale_step(
    capture: Capture, kept: Scored, steady: Callable[[], bool]
) -> list[ScenarioConfig]:
    """The scale search's first step for the candidate kept so far (a spare run: the search's
    first probe if that candidate stays), none where it would not search."""
    _, _, config, _, sim = kept
    start = _scale_start(capture, config, sim, steady)
    return [] if start is None else [c for _, c in _scale_configs(config, start)[1:2]]


def _scaled(config: ScenarioConfig, factor: float) -> ScenarioConfig | None:
    """``config`` with every engine step ``factor`` times as long: a line's coefficients
    scaled, or a roofline's efficiencies divided by it (and its overhead multiplied); None
    where that would take an efficiency above 1 (faster than the hardware can run)."""
    st = config.step_time
    if st.mode == "roofline":
        mfu, mbu = st.mfu / factor, st.mbu / factor
        if mfu > 1.0 or mbu > 1.0:
            return None
        st = replace(st, mfu=mfu, mbu=mbu, overhead_s=st.overhead_s * factor)
        return replace(config, step_time=st)
    c = st.coefficients
    coef = replace(
        c, c0=c.c0 * factor, prefill=c.prefill * factor, decode=c.decode * factor,
        context=c.context * factor, batch=c.batch * factor, compute=c.compute * factor,
    )  # fmt: skip
    return replace(config, step_time=replace(st, coefficients=coef))


def _refine_scale(
    capture: Capture,
    steps: Sequence[tuple[float, ScenarioConfig]],
    start: Probe,
    sim: Capture,
    runs: Replays,
) -> tuple[ScenarioConfig, Capture, dict[str, Any]]:
    """Scale the fitted step time by the factor of ``steps`` (:func:`_scale_configs`) whose
    replay reproduces the observed percentiles best, searched by :func:`.scale.best_step`.
    ``start`` is ``sim``'s (the unscaled replay's, step 0's) probe."""
    found = {0: sim}

    def probe(ks: Sequence[int], spare: Sequence[int]) -> list[Probe]:
        out = []
        done = runs.run([steps[k][1] for k in ks], [steps[k][1] for k in spare])
        for k, run in zip(ks, done, strict=True):
            found[k] = run
            s, err = score_of_replay(capture, run)
            out.append(Probe(s, bias_of(err)))
        return out

    k, seen = best_step(probe, start, len(steps) - 1)
    tried = {("1" if j == 0 else f"{steps[j][0]:.4f}"): p.score for j, p in sorted(seen.items())}
    return steps[k][1], found[k], {"factor": steps[k][0], "scores": tried}


#: frontend worker counts tried below the configured one, fewer while each replays better,
#: the first beside the service time itself (vLLM: one API-server process, its CPU work one
#: request at a time)
API_WORKER_CANDIDATES = (2, 1)


def _choose_api_server(
    capture: Capture,
    config: ScenarioConfig,
    runs: Replays,
    baseline: Capture,
    service: ApiService,
    part: Mapping[str, Any],
    target: ReplayTarget | None = None,
) -> tuple[ScenarioConfig, Capture, dict[str, Any]]:
    """The api_server stage as observed includes waiting for a frontend worker; replaying it
    through the simulator's own worker pool counts that wait twice when the frontend was
    saturated.  Try its service time instead (:func:`api_service_fit`, per time window when it
    changed) and keep whichever replays the observed percentiles better.

    The wait the service time leaves out is the frontend's own queue: fewer workers queue
    like a saturated frontend.  The first count of API_WORKER_CANDIDATES is replayed beside
    the service time (one round of the replay workers); where it replays best, the next,
    fewer, is tried, and so on while each replays better."""
    svc = _with_service(config, service)
    counts = [w for w in API_WORKER_CANDIDATES if w < svc.api_server.workers]

    def workers(w: int) -> ScenarioConfig:
        return replace(svc, api_server=replace(svc.api_server, workers=w))

    sims = runs.run([svc, *(workers(w) for w in counts[:1])])
    kept_score, _ = score_of_replay(capture, baseline, target)
    svc_score, svc_err = score_of_replay(capture, sims[0], target)
    out = {
        **part,
        "service_fit": {
            "base_ms": service.base_ms,
            "per_prompt_token_us": service.per_token_us,
            "windows": len(service.windows),
            "replay_error_pct": svc_err,
        },
        "chosen": "service time" if svc_score < kept_score else "observed durations",
    }
    best, best_replay, best_score = config, baseline, kept_score
    if svc_score < kept_score:
        best, best_replay, best_score = svc, sims[0], svc_score
    scores: dict[str, float] = {}
    for k, w in enumerate(counts):
        cand = workers(w)
        (sim,) = sims[1:] if k == 0 else runs.run([cand])
        sc, err = score_of_replay(capture, sim, target)
        scores[str(w)] = round(sc, 4)
        if sc >= best_score:
            break
        best, best_replay, best_score = cand, sim, sc
        out["chosen"] = f"service time, {w} frontend worker(s)"
        out["worker_error_pct"] = err
    if scores:
        out["worker_scores"] = scores
    return best, best_replay, out


@dataclass(frozen=True)
class _Tried:
    """A candidate config against the kept one: which replays the observation better (the
    kept config and its replay), and both replays' errors."""

    better: bool
    config: ScenarioConfig
    replay: Capture
    kept_error: dict[str, float]
    tried_error: dict[str, float]


def _try(
    capture: Capture,
    runs: Replays,
    config: ScenarioConfig,
    baseline: Capture,
    candidate: ScenarioConfig,
    target: ReplayTarget | None,
) -> _Tried:
    """Replay ``candidate`` and keep it when it reproduces the observation better than
    ``config`` (whose replay is ``baseline``)."""
    (sim,) = runs.run([candidate])
    old_score, old_err = score_of_replay(capture, baseline, target)
    new_score, new_err = score_of_replay(capture, sim, target)
    if new_score < old_score:
        return _Tried(True, candidate, sim, old_err, new_err)
    return _Tried(False, config, baseline, old_err, new_err)


def _assumed(gaps: Sequence[Gap], part: str) -> bool:
    return any(g.part == part for g in gaps)


def _choose_budget(
    capture: Capture,
    config: ScenarioConfig,
    runs: Replays,
    baseline: Capture,
    budget: int,
    target: ReplayTarget | None = None,
) -> tuple[ScenarioConfig, Capture, dict[str, Any]]:
    """The assumed token budget against one that prefills the long prompts whole
    (:mod:`.budget`): whichever replays the observed percentiles better."""
    tried = _try(capture, runs, config, baseline, with_budget(config, budget), target)
    out: dict[str, Any] = {
        "assumed": config.engine.max_num_batched_tokens,
        "tried": budget,
        "replay_error_pct": {"assumed": tried.kept_error, "tried": tried.tried_error},
        "chosen": tried.config.engine.max_num_batched_tokens,
    }
    return tried.config, tried.replay, out


def _choose_hpa_target(
    capture: Capture,
    config: ScenarioConfig,
    runs: Replays,
    baseline: Capture,
    early: EarlyScaleUp,
    target: ReplayTarget | None = None,
) -> tuple[ScenarioConfig, Capture, dict[str, Any]]:
    """The replayed HPA scaled out before the observed one on a signal the replay runs higher
    (:mod:`.hpa_timing`): its target scaled by that ratio, kept when it replays better."""
    candidate = with_target_scaled(config, early.ratio)
    tried = _try(capture, runs, config, baseline, candidate, target)
    out: dict[str, Any] = {
        "replay_first_scale_up_s": round(early.replay_s, 1),
        "observed_first_scale_up_s": None
        if early.observed_s is None
        else round(early.observed_s, 1),
        "signal_ratio": round(early.ratio, 3),
        "target": {"fitted": config.hpa.target, "tried": candidate.hpa.target},
        "replay_error_pct": {"fitted": tried.kept_error, "tried": tried.tried_error},
        "chosen": tried.config.hpa.target,
    }
    return tried.config, tried.replay, out


def _choose_kpa_timing(
    capture: Capture,
    config: ScenarioConfig,
    runs: Replays,
    baseline: Capture,
    off: OffTrack,
    target: ReplayTarget | None = None,
) -> tuple[ScenarioConfig, Capture, dict[str, Any]]:
    """The replayed KPA kept a replica count far from the observed one (:mod:`.hpa_timing`):
    a shorter stable window and a held scale-down, replayed in one round, and both together
    only when each alone replays better; the best kept when it replays better."""
    short, held, both = kpa_variants(config)
    kept, kept_sim = config, baseline
    best, errors = score_of_replay(capture, baseline, target)
    scores = {"fitted": round(best, 4)}
    chosen = "fitted"
    tries = [("shorter window", short), ("held scale-down", held)]
    for round_ in (tries, [("both", both)]):
        sims = runs.run([cand for _, cand in round_])
        for (name, cand), sim in zip(round_, sims, strict=True):
            score, _ = score_of_replay(capture, sim, target)
            scores[name] = round(score, 4)
            if score < best:
                kept, kept_sim, best, chosen = cand, sim, score, name
        if not all(scores[name] < scores["fitted"] for name, _ in tries):
            break  # each knob alone must help before both are replayed together
    out: dict[str, Any] = {
        "replicas_observed": round(off.observed, 2),
        "replicas_replayed": round(off.replay, 2),
        "apart": round(off.apart, 3),
        "scores": scores,
        "chosen": chosen,
        "window_s": kept.hpa.metric_window_s,
        "scale_down_hold_s": kept.hpa.scale_down.stabilization_s,
        "fitted_replay_error_pct": errors,
    }
    return kept, kept_sim, out


def _with_service(config: ScenarioConfig, service: ApiService) -> ScenarioConfig:
    api = config.api_server
    dist = replace(api.base_ms, kind="lognormal", median=service.base_ms, max=float("inf"))
    config = replace(
        config,
        api_server=replace(api, base_ms=dist, per_prompt_token_us=service.per_token_us),
    )
    if not service.windows:
        return config
    span = sum(p.duration_s for p in config.workload)
    width = window_width(span)
    phases = list(config.workload)
    if len(phases) == 1:  # one phase so far: cut it into the same windows the fits used
        n = math.ceil(span / width)
        phases = [
            replace(phases[0], name=f"window-{i}", duration_s=min(width, span - i * width))
            for i in range(n)
        ]
    by_start = {round(start / width): (b, k) for start, b, k in service.windows}
    out = []
    for i, ph in enumerate(phases):
        if i in by_start:
            b, k = by_start[i]
            settings = {
                **ph.set,
                "api_server.base_ms": dataclasses.asdict(replace(dist, median=b)),
                "api_server.per_prompt_token_us": k,
            }
            ph = replace(ph, set=settings)
        out.append(ph)
    return replace(config, workload=tuple(out))
