"""The tail analysis from the engines' own histograms, for captures without request spans.

Most clusters scrape the engines before they trace them.  This module answers what
``analyses.tail`` answers, from Prometheus histograms alone:

* **percentiles**: ``histogram_quantile(p, sum by (le) (increase(<family>_bucket[W])))``
  (``quantiles.histogram_quantile``) with the bucket that bounds the true value;
* **windows**: the same percentile per time bin (the rate window of each point is the bin
  width, at least two scrapes), then ``windows.detect_windows`` as for requests;
* **decomposition**: the engine's phase histograms (queue, prefill, decode, ...).  Each
  stage's share of the percentile is its share of the mean (``_sum / _count`` over the window:
  exact whatever the buckets), so the stages add up to the observed percentile; what the phases
  leave of TTFT or e2e goes to the profile's residual (the engine's API server, or a
  frontend's routing).  Labelled ``source="engine_histograms"``: nothing before the engine is
  seen, so gateway, pending and network time are not in it.

Which families mean what, per engine, is data: ``model.engine_phases``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tailtriage.analyses import quantiles as Q
from tailtriage.analyses import windows as W
from tailtriage.analyses.histograms import Histogram, load_histogram, present_families
from tailtriage.analyses.results import (
    Decomposition,
    PercentilePoint,
    SloResult,
    SloSpec,
    StageValue,
    Windows,
)
from tailtriage.analyses.tail import TailAnalysis, TailOptions
from tailtriage.model.engine_phases import FRONTENDS, PROFILES, EngineProfile, Family
from tailtriage.model.metric_catalog import names_for
from tailtriage.model.vocabulary import STAGES
from tailtriage.store.base import Store

#: scrapes per rate window at least (PromQL's rule of thumb: rate over >= 2 scrape intervals)
MIN_SCRAPES_PER_BIN = 2
TABLE_PERCENTILES = Q.STANDARD_PERCENTILES
SERIES_PERCENTILES: tuple[float, ...] = (50.0, 95.0, 99.0)
#: the bounding bucket is "wide" when it leaves more than this share of the value open
WIDE_BUCKET = 0.5
#: engines that observe their phase histograms (queue, prefill, decode, inference) when the
#: request finishes and TTFT at the first token: vLLM V1 ``PrometheusStatLogger.record``
#: (``finished_requests`` vs ``time_to_first_tokens_iter``), TensorRT-LLM's collector (vLLM's)
PHASES_AT_FINISH: frozenset[str] = frozenset({"vllm", "tensorrt-llm"})
#: (SLO metric, the latency histogram that stands in when the engine exports none for it):
#: vLLM before 0.11 and TensorRT-LLM export only the per-gap ITL histogram, no per-request TPOT
STAND_INS: tuple[tuple[str, str], ...] = (("tpot", "itl"),)
#: a phase window shifted by less than this share of the mean decode time misses most of the
#: window's requests (the capture ended before they finished)
TRUNCATED_SHIFT = 0.5

SOURCE = "engine_histograms"
ENGINE_SIDE_NOTE = (
    "engine-side only: the percentiles and stages come from the {engine} histograms "
    "({families}), measured from the request's arrival at the {where}; time in the gateway, "
    "waiting for pods and on the network is not in them"
)
METHOD = (
    "stage shares of the mean phase times (_sum/_count of each phase histogram over the "
    "window) scaled to the observed p{p:g} {metric}; the p{p:g} itself is histogram_quantile "
    "over increase() of the buckets in the window"
)


@dataclass(frozen=True)
class Picked:
    """One histogram family found in the capture, with its per-scrape increases."""

    family: Family
    histogram: Histogram
    profile: EngineProfile
    #: set when the histogram stands in for another metric than its own (``STAND_INS``)
    stands_in_for: str = ""


@dataclass(frozen=True)
class EngineHistograms:
    """The histograms one capture has, resolved against the engine profiles."""

    engine: EngineProfile
    frontend: EngineProfile | None
    latencies: Mapping[str, Picked]  # SLO metric -> the outermost histogram measuring it
    engine_latencies: Mapping[str, Picked]  # SLO metric -> the engine's own histogram
    phases: Mapping[str, Picked]  # stage (or "running") -> histogram
    start: float
    end: float
    step: float

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(str(p.family) for p in (*self.latencies.values(), *self.phases.values()))
        )


def _pick(
    store: Store, families: Sequence[Family], profile: EngineProfile, start: float
) -> Picked | None:
    for fam in families:
        for name in present_families(store, [fam.name]):
            hist = load_histogram(store, name, dict(fam.where), capture_start=start)
            if hist is not None:
                return Picked(Family(name, fam.where), hist, profile)
    return None


def _resolve(store: Store, profile: EngineProfile, start: float) -> dict[str, Picked]:
    out = {}
    for metric, fams in profile.latencies:
        if (got := _pick(store, fams, profile, start)) is not None:
            out[metric] = got
    return out


def find_histograms(store: Store, *, phases: bool = True) -> EngineHistograms | None:
    """The engine (and frontend) histograms of the capture; None when it has none.
    ``phases=False`` reads only the latency histograms (what a request capture compares)."""
    row = store.query("SELECT min(time) AS lo, max(time) AS hi FROM series").to_pylist()[0]
    if row["lo"] is None:
        return None
    start, end = float(row["lo"]), float(row["hi"])
    best: tuple[int, EngineProfile, dict[str, Picked], dict[str, Picked]] | None = None
    for profile in PROFILES:
        lat = _resolve(store, profile, start)
        found_phases = {
            stage: got
            for stage, fams in (profile.phases if phases else ())
            if (got := _pick(store, fams, profile, start)) is not None
        }
        score = len(lat) + len(found_phases)
        if score and (best is None or score > best[0]):
            best = (score, profile, lat, found_phases)
    front: tuple[EngineProfile, dict[str, Picked]] | None = None
    for profile in FRONTENDS:
        lat = _resolve(store, profile, start)
        if lat:
            front = (profile, lat)
            break
    if best is None and front is None:
        return None
    stages: dict[str, Picked] = {}
    if best is not None:
        engine, engine_lat, stages = best[1], best[2], best[3]
    else:
        assert front is not None
        engine, engine_lat = front[0], {}
    latencies = {**engine_lat, **(front[1] if front else {})}
    for metric, other in STAND_INS:
        if metric not in latencies and other in latencies:
            latencies[metric] = replace(latencies[other], stands_in_for=metric)
    steps = [p.histogram.step for p in (*latencies.values(), *stages.values()) if p.histogram.step]
    return EngineHistograms(
        engine=engine,
        frontend=front[0] if front else None,
        latencies=latencies,
        engine_latencies=engine_lat,
        phases=stages,
        start=start,
        end=end,
        step=min(steps) if steps else 0.0,
    )


# -- windows ------------------------------------------------------------------------------------
def rate_window(found: EngineHistograms, count: float) -> float:
    """The bin width (rate window) of the percentile series: the adaptive width requests get,
    but never under two scrape intervals."""
    width = W.bin_width(int(count), max(found.end - found.start, 1e-9))
    floor = MIN_SCRAPES_PER_BIN * found.step
    if width < floor:
        width = next((v for v in W.NICE_WIDTHS if v >= floor), floor)
    return width


def _windows(
    found: EngineHistograms, slos: Sequence[SloSpec], options: TailOptions
) -> tuple[Windows, tuple[PercentilePoint, ...], str, float, tuple[str, ...]]:
    specs = [s for s in slos if s.metric in found.latencies] or [
        SloSpec(m, 95.0, math.inf) for m in ("ttft", "e2e", "itl", "tpot") if m in found.latencies
    ][:1]
    lead_hist = found.latencies[specs[0].metric].histogram
    total = lead_hist.window(-math.inf, math.inf).count
    width = options.bin_width or rate_window(found, total)
    origin = (found.start // width) * width
    series: dict[str, tuple[PercentilePoint, ...]] = {}
    for metric in dict.fromkeys(s.metric for s in specs):
        ps = sorted(set(SERIES_PERCENTILES) | {s.percentile for s in specs if s.metric == metric})
        series[metric] = found.latencies[metric].histogram.series(ps, origin, width, found.end)
    breaches = [W.bin_breaches(series[s.metric], [s])[0] for s in specs]
    # the ttft/e2e SLO decides the incident (a chronic ITL breach must not swallow it)
    additive = [i for i, s in enumerate(specs) if s.metric in ("ttft", "e2e") and any(breaches[i])]
    deciding = additive[:1] or list(range(len(specs)))
    lead = specs[deciding[0]].metric
    chosen = [breaches[i] for i in deciding]
    rng = W.TimeRange(found.start, found.end, int(total))
    if options.incident is not None and options.baseline is not None:
        got = W.DetectedWindows(Windows(options.incident, options.baseline, False))
    elif options.incident is not None:
        got = W.baseline_before(series[lead], chosen, options.incident)
    else:
        got = W.detect_windows(series[lead], chosen, rng, specs[deciding[0]])
        if options.baseline is not None:
            got = W.DetectedWindows(Windows(got.windows.incident, options.baseline, True))
    note = (
        f"percentiles over time from the {found.latencies[lead].family} buckets: one point per "
        f"{width:g} s (the rate window; scrape interval {found.step:g} s); the incident's "
        f"percentile is over increase() across the whole incident window"
        if found.step > 0
        else f"one /metrics snapshot: the {found.latencies[lead].family} percentiles count "
        f"every request since the engine started (no second scrape to take a rate from)"
    )
    return got.windows, series[lead], lead, width, (*got.notes, note)


# -- SLOs -----------------------------------------------------------------------------------------
def _definition(picked: Picked, spec: SloSpec) -> str:
    where = (
        "a frontend in front of the engines"
        if picked.profile.measured_at == "frontend"
        else ("the engine")
    )
    text = (
        f"{spec.metric}: histogram_quantile({spec.percentile / 100:g}) over increase() of "
        f"{picked.family}_bucket, measured by {where} ({picked.profile.engine}; engine-side: "
        f"no gateway or pending time)"
    )
    if picked.stands_in_for:
        text += (
            f"; no per-request {picked.stands_in_for} histogram: the per-gap inter-token "
            f"histogram stands in (a percentile of gaps reads at or above the same percentile "
            f"of per-request means)"
        )
    return text


def bucket_warning(q: Q.HistogramQuantile, spec: SloSpec) -> str | None:
    """Why the buckets leave the percentile open, when they do."""
    if math.isinf(q.upper):
        return (
            f"the p{spec.percentile:g} lies in the +Inf bucket: it is above "
            f"{q.lower * 1000:g} ms, by an unknown amount"
        )
    if q.lower < spec.threshold < q.upper:
        return (
            f"the p{spec.percentile:g} lies in the bucket ({q.lower * 1000:g}, "
            f"{q.upper * 1000:g}] ms, which holds the threshold: the buckets cannot decide the "
            f"breach; the value is interpolated"
        )
    if q.relative_width > WIDE_BUCKET:
        return (
            f"the p{spec.percentile:g} lies in the wide bucket ({q.lower * 1000:g}, "
            f"{q.upper * 1000:g}] ms; the value is interpolated"
        )
    return None


def slo_result(picked: Picked | None, spec: SloSpec, window: tuple[float, float]) -> SloResult:
    """The SLO's percentile from the histogram over ``window``; ci_low/ci_high are the bounds
    of the bucket holding it."""
    if picked is None:
        return SloResult(
            spec,
            None,
            False,
            0,
            definition=f"{spec.metric}: no engine histogram measures it",
            warning=f"no {spec.metric} histogram in the capture",
            source=SOURCE,
        )
    w = picked.histogram.window(*window)
    if w.count <= 0:
        return SloResult(
            spec,
            None,
            False,
            0,
            definition=_definition(picked, spec),
            warning=f"no {spec.metric} observations in the window",
            source=SOURCE,
        )
    q = w.quantile(spec.percentile)
    return SloResult(
        spec=spec,
        observed=q.value,
        breached=q.value > spec.threshold,
        count=round(w.count),
        ci_low=q.lower if math.isfinite(q.lower) else None,
        ci_high=q.upper if math.isfinite(q.upper) else None,
        definition=_definition(picked, spec),
        warning=bucket_warning(q, spec),
        source=SOURCE,
    )


# -- decomposition --------------------------------------------------------------------------------
def _mean(picked: Picked | None, window: tuple[float, float]) -> float | None:
    return None if picked is None else picked.histogram.window(*window).mean


def phase_window(
    found: EngineHistograms, metric: str, window: tuple[float, float]
) -> tuple[float, float]:
    """Where the phases of the requests whose ``metric`` was observed in ``window`` are.

    An engine in ``PHASES_AT_FINISH`` observes TTFT at the first token but the queue and
    prefill times when the request finishes, a decode time later: in an incident whose
    requests queue for seconds and decode for a minute, the phases of the window's TTFTs land
    a minute after it.  So for TTFT the phase window is shifted by the mean decode time
    (clipped to the capture); e2e is observed at finish like its phases."""
    if metric != "ttft" or found.engine.engine not in PHASES_AT_FINISH:
        return window
    decode = _mean(found.phases.get("decode"), window)
    if decode is None:
        e2e, ttft = (_mean(found.engine_latencies.get(m), window) for m in ("e2e", "ttft"))
        decode = None if e2e is None or ttft is None else max(e2e - ttft, 0.0)
    if not decode:
        return window
    lo, hi = window
    shift = min(decode, max(found.end - hi, 0.0))
    return (lo + shift, hi + shift)


def phases_truncated(found: EngineHistograms, metric: str, window: tuple[float, float]) -> bool:
    """The capture ends before most of the window's requests finished: their phases were
    never observed (``phase_window`` could shift by less than ``TRUNCATED_SHIFT`` of the
    decode time)."""
    at = phase_window(found, metric, window)
    if metric != "ttft" or found.engine.engine not in PHASES_AT_FINISH:
        return False
    decode = _mean(found.phases.get("decode"), window)
    return bool(decode) and (at[0] - window[0]) < TRUNCATED_SHIFT * float(decode or 0.0)


def phase_means(
    found: EngineHistograms, metric: str, window: tuple[float, float]
) -> dict[str, float] | None:
    """Stage -> mean seconds over ``window`` for the stages of ``metric`` (ttft or e2e),
    the residual included, so the values add up to the metric's mean; None without phases.
    The phase histograms are read over ``phase_window`` (the same requests' phases)."""
    eng = found.engine
    order = eng.ttft_stages if metric == "ttft" else eng.e2e_stages
    at = phase_window(found, metric, window)
    means = {s: m for s in order if (m := _mean(found.phases.get(s), at)) is not None}
    running = _mean(found.phases.get("running"), at)
    if running is not None:
        if "prefill" in order and "prefill" not in means and "decode" in means:
            means["prefill"] = max(running - means["decode"], 0.0)
        elif metric == "e2e" and "decode" not in means and "prefill" in means:
            means["decode"] = max(running - means["prefill"], 0.0)
        elif metric == "e2e" and "prefill" not in means and "decode" not in means:
            means["unattributed"] = running  # execution the engine does not split
    means.pop("running", None)
    if not means:
        return None
    engine_total = _mean(found.engine_latencies.get(metric), window)
    if engine_total is not None:
        covered = sum(means.values())
        # phases not observed yet: the TTFT they leave is the queue (the phase that grows
        # without bound), not the API server
        residual = (
            "engine_queue"
            if "engine_queue" in order and phases_truncated(found, metric, window)
            else eng.residual
        )
        means[residual] = means.get(residual, 0.0) + max(engine_total - covered, 0.0)
    outer = found.latencies.get(metric)
    if found.frontend is not None and outer is not None and outer.profile is found.frontend:
        front_total = _mean(outer, window)
        if front_total is not None:
            inner = engine_total if engine_total is not None else sum(means.values())
            res = found.frontend.residual
            means[res] = means.get(res, 0.0) + max(front_total - inner, 0.0)
    return {s: v for s, v in means.items() if v > 0}


def _scaled(means: Mapping[str, float], total: float) -> dict[str, float]:
    covered = sum(means.values())
    return {s: v * total / covered for s, v in means.items()} if covered > 0 else {}


def decompose(
    found: EngineHistograms,
    metric: str,
    p: float,
    windows: Windows,
) -> Decomposition | None:
    """The engine-side decomposition of the p-th percentile of ``metric`` (ttft or e2e)."""
    picked = found.latencies.get(metric)
    inc = phase_means(found, metric, windows.incident)
    if picked is None or inc is None:
        return None
    w_inc = picked.histogram.window(*windows.incident)
    observed = w_inc.quantile(p).value
    if not math.isfinite(observed):
        return None
    stages_inc = _scaled(inc, observed)
    stages_base: dict[str, float] = {}
    base_total, base_count = None, 0
    if windows.baseline is not None:
        w_base = picked.histogram.window(*windows.baseline)
        b = w_base.quantile(p).value if w_base.count > 0 else math.nan
        base_means = phase_means(found, metric, windows.baseline)
        if math.isfinite(b) and base_means:
            stages_base, base_total, base_count = _scaled(base_means, b), b, int(w_base.count)
    present = [s for s in STAGES if s in stages_inc or s in stages_base]
    return Decomposition(
        metric=metric,
        percentile=p,
        total=observed,
        stages=tuple(
            StageValue(s, stages_inc.get(s, 0.0), stages_base.get(s, 0.0) if base_total else None)
            for s in present
        ),
        count=round(w_inc.count),
        baseline_total=base_total,
        baseline_count=base_count,
        source=SOURCE,
        method=METHOD.format(p=p, metric=metric),
    )


# -- the analysis -------------------------------------------------------------------------------
def _table(
    pickeds: Mapping[str, Picked], window: tuple[float, float] | None
) -> tuple[dict[str, dict[str, float]], dict[str, int]]:
    table: dict[str, dict[str, float]] = {}
    counts: dict[str, int] = {}
    if window is None:
        return table, counts
    for name, picked in pickeds.items():
        w = picked.histogram.window(*window)
        counts[name] = round(w.count)
        if w.count > 0:
            vals = {f"p{p:g}": w.quantile(p).value for p in TABLE_PERCENTILES}
            table[name] = {k: v for k, v in vals.items() if math.isfinite(v)}
    return table, counts


def _primary(results: Sequence[SloResult], found: EngineHistograms) -> SloSpec | None:
    additive = [s for s in results if s.spec.metric in ("ttft", "e2e") and s.observed is not None]
    if additive:
        return max(
            additive, key=lambda s: (s.breached, (s.observed or 0.0) / s.spec.threshold)
        ).spec
    for m in ("ttft", "e2e"):
        if m in found.latencies:
            return SloSpec(m, 95.0, math.inf)
    return None


def analyze_histograms(
    store: Store, slos: Sequence[SloSpec], options: TailOptions | None = None
) -> TailAnalysis | None:
    """The tail analysis from the engine histograms; None when the capture has none."""
    options = options or TailOptions()
    found = find_histograms(store)
    if found is None or not found.latencies:
        return None
    windows, series, lead, width, notes = _windows(found, slos, options)
    results = tuple(slo_result(found.latencies.get(s.metric), s, windows.incident) for s in slos)
    primary = _primary(results, found)
    decomposition = (
        None if primary is None else decompose(found, primary.metric, primary.percentile, windows)
    )
    percentiles, counts = _table(found.latencies, windows.incident)
    stage_pcts, _ = _table(found.phases, windows.incident)
    where = "frontend" if found.frontend is not None else "engine"
    side = ENGINE_SIDE_NOTE.format(
        engine=" + ".join(p.engine for p in (found.frontend, found.engine) if p is not None),
        families=", ".join(found.families),
        where=where,
    )
    lead_w = found.latencies[lead].histogram.window(*windows.incident)
    span = windows.incident[1] - windows.incident[0]
    return TailAnalysis(
        slos=results,
        windows=windows,
        series_metric=lead,
        series=series,
        decomposition=decomposition,
        attribution=None,
        percentiles=percentiles,
        baseline_percentiles=_table(found.latencies, windows.baseline)[0],
        definitions={m: _definition(p, SloSpec(m, 95.0, 0.0)) for m, p in found.latencies.items()},
        counts=counts,
        stage_percentiles={s: v for s, v in stage_pcts.items() if s in STAGES},
        breakdowns=(),
        cdfs={},
        throughput={
            "requests": lead_w.count,
            "requests_per_s": lead_w.count / span if span > 0 else 0.0,
        },
        bin_width=width,
        warnings=(
            *(f"{r.spec}: {r.warning}" for r in results if r.warning),
            *skipped_warnings(found),
        ),
        notes=(side, *notes),
    )


def skipped_warnings(found: EngineHistograms) -> tuple[str, ...]:
    """One warning per histogram family read with bucket series skipped for a bad ``le``."""
    picked = {
        str(p.family): p.histogram for p in (*found.latencies.values(), *found.phases.values())
    }
    return tuple(
        f"{family}: {h.skipped_buckets} bucket series skipped (their `le` label is not a "
        f"number); the percentiles are read from the other buckets"
        for family, h in picked.items()
        if h.skipped_buckets
    )


def request_rates(store: Store, window: tuple[float, float]) -> tuple[float, float] | None:
    """(first tokens per second, finished requests per second) over ``window`` from the
    TTFT and e2e histograms' counts; None without either histogram."""
    found = find_histograms(store)
    if found is None:
        return None
    span = max(window[1] - window[0], 1e-9)
    rates = []
    for metric in ("ttft", "e2e"):
        picked = found.latencies.get(metric) or found.latencies.get(
            "e2e" if metric == "ttft" else "ttft"
        )
        rates.append(0.0 if picked is None else picked.histogram.window(*window).count / span)
    return rates[0], rates[1]


#: per-request token histograms (observed when the request finishes), per engine spelling
TOKEN_HISTOGRAMS: Mapping[str, tuple[str, ...]] = {
    "prompt": names_for("request_prompt_tokens"),
    "output": names_for("request_generation_tokens"),
}


def token_means(store: Store, window: tuple[float, float]) -> dict[str, float]:
    """Mean prompt and output tokens per request over ``window`` from the engines' token
    histograms (``_sum / _count``), for captures without request spans; keys ``prompt`` /
    ``output``, absent when no histogram has observations in the window; ``prompt_median``
    too (``histogram_quantile(0.5, ...)``: interpolated inside its bucket, so it tells a
    shift of the whole mix from a long minority, not the exact median)."""
    out: dict[str, float] = {}
    for key, names in TOKEN_HISTOGRAMS.items():
        for family in present_families(store, names):
            found = load_histogram(store, family)
            hist = None if found is None else found.window(*window)
            if hist is None or hist.mean is None:
                continue
            out[key] = hist.mean
            median = hist.quantile(50.0).value if key == "prompt" else math.nan
            if math.isfinite(median):
                out[f"{key}_median"] = median
            break
    return out
