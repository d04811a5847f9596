"""Write a case: ``<dir>/bundle/`` (the files a user would collect), ``<dir>/truth.json`` (what
really happened, outside the bundle), and derived copies with telemetry removed on purpose
(``<dir>/<copy>/``, each listed in the truth with what was removed).

The SLO of a case sits between its true baseline and incident p95 (35 % of the way up), so
every case breaches; for a compound, the primary cause is the one whose removal (the same run
with that cause taken away) lowers the incident p95 the most."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from realistic.calibrate import intensified
from realistic.fleet import simulate
from realistic.outcome import Outcome
from realistic.spec import Spec, with_overrides
from realistic.truth import Truth, Window, per_request, served, tpot, truth_of, ttft
from realistic.variants import Case, Scenario, build, split_of
from realistic.write_kube import write_events, write_pods
from realistic.write_otlp import TraceOptions, write_traces
from realistic.write_prom import write_metrics

#: every request's truth (arrival, TTFT, stages), beside ``truth.json`` and outside the bundle
REQUESTS_FILE = "requests.npz"
#: where between the baseline and the incident p95 the SLO threshold sits
SLO_POSITION = 0.35
#: the incident must raise the p95 by this factor over the baseline to count as an incident
MIN_INCIDENT_RATIO = 1.1
#: severity the generator aims for (incident p95 / baseline p95), per SLO metric
SEVERITY = {"ttft": (1.4, 6.0), "tpot": (1.2, 3.0)}
#: traffic factor per retry when the incident is too mild / too severe, and the retries
_STRONGER, _MILDER, _TRIES = 1.12, 0.92, 4


@dataclass(frozen=True)
class Derived:
    """A copy of the bundle with parts of the telemetry removed (issues 16 and 17)."""

    name: str
    removed: tuple[str, ...]  # what doctor must name
    traces: bool = True
    engine_spans: bool = True
    gateway_events: bool = True
    sampling_x: float = 1.0
    drop_families: tuple[str, ...] = ()


DERIVED: Mapping[str, Derived] = {
    "metrics_only": Derived("metrics_only", ("traces",), traces=False),
    "no_engine_spans": Derived("no_engine_spans", ("engine_spans",), engine_spans=False),
    "no_hpa": Derived("no_hpa", ("hpa_series",), drop_families=("hpa",)),
    "no_dcgm": Derived("no_dcgm", ("dcgm",), drop_families=("dcgm",)),
    "no_gateway_events": Derived("no_gateway_events", ("gateway_events",), gateway_events=False),
    "traces_5pct": Derived("traces_5pct", ("95_percent_of_traces",), sampling_x=0.05),
}


def _present(spec: Spec) -> dict[str, bool]:
    """Which removable parts the full bundle has (a copy lists only what it really removed)."""
    drop = spec.telemetry.drop_families
    return {
        "traces": True,
        "engine_spans": spec.telemetry.engine_spans,
        "hpa_series": spec.hpa.metric != "none" and "hpa" not in drop,
        "dcgm": "dcgm" not in drop,
        "gateway_events": spec.gateway.verbose_events,
        "95_percent_of_traces": True,
    }


def _slo(metric: str, t: Truth) -> tuple[str, float]:
    inc = t.ttft_p95_ms if metric == "ttft" else t.tpot_p95_ms
    base = t.baseline_ttft_p95_ms if metric == "ttft" else t.baseline_tpot_p95_ms
    thr = 0.7 * inc if np.isnan(base) else max(base * 1.05, base + SLO_POSITION * (inc - base))
    step = 10.0 if metric == "ttft" and thr > 100 else 1.0
    thr = max(step, round(thr / step) * step)
    return f"p95 {metric} < {thr:g}ms", thr


def _p95(o: Outcome, metric: str, w: tuple[float, float]) -> float:
    m = served(o, Window(*w))
    x = (ttft(o) if metric == "ttft" else tpot(o))[m]
    x = x[~np.isnan(x)]
    return float(np.percentile(x, 95)) * 1e3 if len(x) else float("nan")


def explained(sc: Scenario, o: Outcome) -> dict[str, float]:
    """Per cause, how many ms of the incident p95 its removal takes away."""
    actual = _p95(o, sc.slo_metric, sc.incident)
    out = {}
    for cause, removal in sc.removals.items():
        alt = simulate(with_overrides(sc.spec, removal), sc.case.seed)
        out[cause] = round(actual - _p95(alt, sc.slo_metric, sc.incident), 3)
    return out


def _unix(spec: Spec, w: tuple[float, float] | None) -> list[float] | None:
    return None if w is None else [spec.t0 + w[0], spec.t0 + w[1]]


def _jsonable(v: object) -> object:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {k: _jsonable(x) for k, x in dataclasses.asdict(v).items()}
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def _write_bundle(o: Outcome, folder: Path, seed: int, d: Derived | None) -> dict[str, int]:
    t = o.spec.telemetry
    counts: dict[str, int] = {}
    if d is None or d.traces:
        opts = TraceOptions(
            sampling=t.sampling * (d.sampling_x if d else 1.0),
            skew_ms=t.skew_ms,
            orphan_share=t.orphan_share,
            engine_spans=t.engine_spans and (d is None or d.engine_spans),
            sidecar_spans=t.sidecar_spans,
            gateway_events=o.spec.gateway.verbose_events and (d is None or d.gateway_events),
        )
        counts |= write_traces(o, folder, opts, seed)
    if d is not None and d.drop_families:
        spec = dataclasses.replace(
            o.spec,
            telemetry=dataclasses.replace(t, drop_families=(*t.drop_families, *d.drop_families)),
        )
        o = dataclasses.replace(o, spec=spec)
    counts["metric_files"] = write_metrics(o, folder)
    counts["events"] = write_events(o, folder)
    counts["pods"] = write_pods(o, folder)
    return counts


def _severity(sc: Scenario) -> tuple[Scenario, Outcome]:
    """``sc`` with its incident traffic adjusted until the incident's severity is in SEVERITY
    (a few re-runs; deterministic), and its outcome."""
    o = simulate(sc.spec, sc.case.seed)
    if sc.baseline is None:
        return sc, o
    lo, hi = SEVERITY[sc.slo_metric]
    for _ in range(_TRIES):
        ratio = _p95(o, sc.slo_metric, sc.incident) / _p95(o, sc.slo_metric, sc.baseline)
        if lo <= ratio <= hi or np.isnan(ratio):
            break
        spec = intensified(sc.spec, _STRONGER if ratio < lo else _MILDER)
        sc = dataclasses.replace(sc, spec=spec)
        o = simulate(spec, sc.case.seed)
    return sc, o


def _excess(sc: Scenario, o: Outcome) -> float:
    assert sc.baseline is not None
    return _p95(o, sc.slo_metric, sc.incident) - _p95(o, sc.slo_metric, sc.baseline)


def tuned(sc: Scenario) -> tuple[Scenario, Outcome]:
    """``sc`` at a severity in SEVERITY; a single cause with a STRENGTHEN rule is made stronger
    (and the severity re-tuned) until its removal takes away at least MIN_EXPLAINED of the p95
    excess, so that the label is what drove the incident and not the traffic the severity loop
    added."""
    sc, o = _severity(sc)
    if sc.baseline is None or len(sc.case.causes) != 1:
        return sc, o
    cause = sc.case.causes[0]
    if cause not in STRENGTHEN:
        return sc, o
    for _ in range(_STRENGTHEN_TRIES):
        excess = _excess(sc, o)
        if not excess > 0 or explained(sc, o)[cause] >= MIN_EXPLAINED * excess:
            break
        sc, o = _severity(dataclasses.replace(sc, spec=STRENGTHEN[cause](sc.spec)))
    return sc, o


def _smaller_cache(spec: Spec) -> Spec:
    e = spec.engine
    return dataclasses.replace(
        spec, engine=dataclasses.replace(e, kv_tokens=int(e.kv_tokens * _KV_SHRINK))
    )


#: per cause, how its mechanism is made stronger when it explains too little of the excess
STRENGTHEN = {"kv_cache_pressure": _smaller_cache}
#: the share of the p95 excess a single cause's removal must take away to carry the label
MIN_EXPLAINED = 0.5
#: causes whose removal only weakens the mechanism (twice the memory bandwidth; chunks of 512
#: tokens still share steps with decodes; an instant autoscaler still waits for pods to load):
#: what it takes away is no test of the label
PARTIAL_REMOVAL = ("decode_memory_bound", "prefill_interference", "scaling_lag")
#: ... but it must take away something: a scaling lag whose fleet sat at its maximum before
#: the incident began is no lag (an instant autoscaler removes nothing)
PARTIAL_MIN = 0.05
#: a compound's runner-up explaining this share of what its primary explains is a tie
COMPOUND_TIE = 0.9
#: the cache shrinks by this factor per try, and the tries
_KV_SHRINK, _STRENGTHEN_TRIES = 0.7, 3


def _undecided(causes: Sequence[str], expl: Mapping[str, float], excess_ms: float) -> bool:
    """A compound whose primary the counterfactual cannot name: the first cause alone explains
    less than MIN_EXPLAINED of the excess (the two act only together), or the second explains
    nearly as much (either one's removal cures it)."""
    first, second = expl[causes[0]], expl[causes[1]]
    return first < MIN_EXPLAINED * excess_ms or second >= COMPOUND_TIE * first


def write_case(
    case: Case,
    out: Path,
    derived: Sequence[str] = ("metrics_only",),
    counterfactual: bool | None = None,
) -> dict[str, Any]:
    """Generate ``case`` into ``out``; return the truth (also written to ``out/truth.json``)."""
    sc, o = tuned(build(case))
    base = Window(*sc.baseline) if sc.baseline else None
    t = truth_of(o, Window(*sc.incident), base)
    slo, thr = _slo(sc.slo_metric, t)
    counts = _write_bundle(o, out / "bundle", case.seed, None)
    copies = {}
    present = _present(sc.spec)
    for name in derived:
        d = DERIVED[name]
        _write_bundle(o, out / name, case.seed, d)
        copies[name] = {"removed": [x for x in d.removed if present[x]]}
    # every cause is checked against its removal: a compound's primary is the cause that
    # explains most, and a single cause must explain MIN_EXPLAINED to carry its label
    do_cf = sc.baseline is not None if counterfactual is None else counterfactual
    expl = explained(sc, o) if do_cf else {}
    causes = list(case.causes)
    if expl:
        causes = sorted(causes, key=lambda c: -expl[c])
    inc_p95 = t.ttft_p95_ms if sc.slo_metric == "ttft" else t.tpot_p95_ms
    base_p95 = t.baseline_ttft_p95_ms if sc.slo_metric == "ttft" else t.baseline_tpot_p95_ms
    s = sc.spec
    truth = {
        "case": case.name,
        "primary": causes[0],
        "secondary": causes[1] if len(causes) > 1 else None,
        "causes": list(case.causes),
        "platform": case.platform,
        "mechanism": case.mechanism,
        "seed": case.seed,
        "split": split_of(case, s.telemetry.sampling),
        "slo": slo,
        "slo_metric": sc.slo_metric,
        "threshold_ms": thr,
        # too mild to count, a single cause whose removal leaves most of the excess, or a
        # compound whose primary is a coin toss
        "weak": bool(
            not np.isnan(base_p95)
            and (
                inc_p95 < MIN_INCIDENT_RATIO * base_p95
                or (
                    len(case.causes) == 1
                    and case.causes[0] in expl
                    and expl[case.causes[0]]
                    < (PARTIAL_MIN if case.causes[0] in PARTIAL_REMOVAL else MIN_EXPLAINED)
                    * (inc_p95 - base_p95)
                )
                or (len(causes) > 1 and bool(expl) and _undecided(causes, expl, inc_p95 - base_p95))
            )
        ),
        "windows": {"incident": _unix(s, sc.incident), "baseline": _unix(s, sc.baseline)},
        "true_p95_ms": {
            "ttft": t.ttft_p95_ms,
            "tpot": t.tpot_p95_ms,
            "e2e": t.e2e_p95_ms,
            "itl": t.itl_p95_ms,
        },
        "baseline_p95_ms": {"ttft": t.baseline_ttft_p95_ms, "tpot": t.baseline_tpot_p95_ms},
        "breakdown_ms": t.breakdown_ms,
        "baseline_breakdown_ms": t.baseline_breakdown_ms,
        "requests": t.requests,
        "exported_requests": int(
            np.sum(~np.isnan(o.dispatch) & ((o.status != 200) | ~np.isnan(o.finish)))
        ),
        "errors": t.errors,
        "preemptions": int(o.preempted[served(o, Window(*sc.incident))].sum()),
        "sampling": s.telemetry.sampling,
        "sampled_requests": counts.get("sampled_requests", 0),
        "removed_telemetry": sorted(s.telemetry.drop_families),
        "copies": copies,
        "confounders": list(sc.confounders),
        "excess_explained_ms": expl,
        "fixes": _jsonable(sc.fixes),
        "after_fix": {
            "cause": causes[0],
            "overrides": _jsonable(sc.fixes[causes[0]]),
            "rerun": "realistic.corpus.after_fix(case, overrides)",
        },
        "stack": {
            "model": s.model,
            "gpu": s.gpu,
            "tp": s.tp,
            "interconnect": s.interconnect,
            "replicas": s.replicas,
            "routing": s.routing,
            "engine": s.engine.version,
            "spans": s.engine.spans,
            "hpa_metric": s.hpa.metric,
            "kv_capacity_tokens": o.kv_capacity,
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / REQUESTS_FILE, **per_request(o))
    (out / "truth.json").write_bytes(orjson.dumps(_jsonable(truth), option=orjson.OPT_INDENT_2))
    return truth


def after_fix(case: Case, overrides: Mapping[str, object]) -> dict[str, float]:
    """True p95s of ``case`` re-run with ``overrides`` applied (issue 15's after-fix truth)."""
    sc, _ = tuned(build(case))
    o = simulate(with_overrides(sc.spec, overrides), case.seed)
    base = Window(*sc.baseline) if sc.baseline else None
    t = truth_of(o, Window(*sc.incident), base)
    return {"ttft": t.ttft_p95_ms, "tpot": t.tpot_p95_ms, "e2e": t.e2e_p95_ms}


def case_by_name(name: str) -> Case:
    from realistic.variants import corpus_cases

    for c in corpus_cases():
        if c.name == name:
            return c
    raise KeyError(name)


def read_requests(case_dir: Path) -> dict[str, np.ndarray] | None:
    """The per-request truth written beside the bundle (None for a case generated before it)."""
    path = case_dir / REQUESTS_FILE
    if not path.exists():
        return None
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def read_truth(case_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((case_dir / "truth.json").read_bytes())
    return data
