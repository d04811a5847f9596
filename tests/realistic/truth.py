"""What really happened, from the mechanism (every request, sampled or not).

Stage times along each request's path are contiguous by construction, so per request they sum
to its TTFT.  The breakdown of a percentile follows the design's definition (how-it-works.md,
"The decomposition of a percentile"): the mean of each stage over the requests whose TTFT lies
between the p94 and the p96 of the window, scaled by p95 / band mean, so the stages add up to
the true p95."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from realistic.outcome import Outcome

#: stages before the first token, in path order (design 3.1)
TTFT_STAGES = ("ingress", "gateway_queue", "pending", "api_server", "engine_queue", "prefill")
#: the band around the percentile whose mean is decomposed (percentile points either side)
BAND_PCT = 1.0


@dataclass(frozen=True)
class Window:
    start: float  # seconds from the window start of the run
    end: float


@dataclass(frozen=True)
class Truth:
    ttft_p95_ms: float
    tpot_p95_ms: float
    e2e_p95_ms: float
    itl_p95_ms: float
    baseline_ttft_p95_ms: float
    baseline_tpot_p95_ms: float
    breakdown_ms: dict[str, float]
    baseline_breakdown_ms: dict[str, float]
    requests: int
    errors: int


def stage_seconds(o: Outcome) -> dict[str, np.ndarray]:
    """Per request, seconds spent in each pre-first-token stage."""
    wait = o.dispatch - o.pool_in
    ingress = (o.pool_in - o.gw_in) + (o.pod_in - o.dispatch) + (o.edge_first - o.first)
    return {
        "ingress": ingress,
        "gateway_queue": np.where(o.wait_pending, 0.0, wait) + (o.qp_done - o.pod_in),
        "pending": np.where(o.wait_pending, wait, 0.0),
        "api_server": o.queued - o.qp_done,
        "engine_queue": o.scheduled - o.queued,
        "prefill": o.first - o.scheduled,
    }


def ttft(o: Outcome) -> np.ndarray:
    return o.edge_first - o.gw_in


def tpot(o: Outcome) -> np.ndarray:
    """Per-request mean gap after the first token (design 3.1)."""
    n = o.req.output - 1
    return np.where(n > 0, (o.finish - o.first) / np.maximum(n, 1), np.nan)


def served(o: Outcome, w: Window) -> np.ndarray:
    a = o.req.arrival
    return (a >= w.start) & (a < w.end) & (o.status == 200) & ~np.isnan(o.first)


def breakdown(o: Outcome, mask: np.ndarray) -> dict[str, float]:
    """Stage ms of the p95 TTFT (band p94..p96 mean, scaled to the p95)."""
    return band_breakdown(ttft(o), stage_seconds(o), mask)


def per_request(o: Outcome) -> dict[str, np.ndarray]:
    """Every request's unix arrival, TTFT, served flag and stage seconds: what the corpus runner
    needs to recompute the true breakdown over the window a report chose (``requests.npz``)."""
    inf = Window(-np.inf, np.inf)
    cols = {"arrival": o.req.arrival + o.spec.t0, "ttft": ttft(o), "served": served(o, inf)}
    return cols | {f"stage:{k}": v for k, v in stage_seconds(o).items()}


def breakdown_in(cols: dict[str, np.ndarray], start: float, end: float) -> dict[str, float]:
    """The true p95 breakdown over the requests served with a unix arrival in [start, end)."""
    a = cols["arrival"]
    mask = cols["served"].astype(bool) & (a >= start) & (a < end)
    stages = {k.split(":", 1)[1]: v for k, v in cols.items() if k.startswith("stage:")}
    return band_breakdown(cols["ttft"], stages, mask)


def band_breakdown(
    ttft_s: np.ndarray, stages: dict[str, np.ndarray], mask: np.ndarray
) -> dict[str, float]:
    """Stage ms of the p95 of ``ttft_s[mask]`` (band p94..p96 mean, scaled to the p95)."""
    x = ttft_s[mask]
    if not len(x):
        return dict.fromkeys(TTFT_STAGES, 0.0)
    lo, p95, hi = np.percentile(x, [95 - BAND_PCT, 95, 95 + BAND_PCT])
    band = (x >= lo) & (x <= hi)
    means = {k: float(np.mean(v[mask][band])) for k, v in stages.items()}
    total = sum(means.values())
    scale = p95 / total if total > 0 else 1.0
    return {k: round(float(v * scale * 1e3), 3) for k, v in means.items()}


def _p95_ms(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return round(float(np.percentile(x, 95)) * 1e3, 3) if len(x) else float("nan")


def truth_of(o: Outcome, incident: Window, baseline: Window | None) -> Truth:
    inc = served(o, incident)
    base = served(o, baseline) if baseline is not None else np.zeros_like(inc)
    a = o.req.arrival
    in_window = (a >= incident.start) & (a < incident.end)
    gaps = np.repeat(tpot(o)[inc], np.maximum(o.req.output[inc] - 1, 0))
    return Truth(
        ttft_p95_ms=_p95_ms(ttft(o)[inc]),
        tpot_p95_ms=_p95_ms(tpot(o)[inc]),
        e2e_p95_ms=_p95_ms((o.edge_end - o.gw_in)[inc]),
        itl_p95_ms=_p95_ms(gaps),
        baseline_ttft_p95_ms=_p95_ms(ttft(o)[base]) if base.any() else float("nan"),
        baseline_tpot_p95_ms=_p95_ms(tpot(o)[base]) if base.any() else float("nan"),
        breakdown_ms=breakdown(o, inc),
        baseline_breakdown_ms=breakdown(o, base) if base.any() else {},
        requests=int(inc.sum()),
        errors=int((in_window & (o.status != 200)).sum()),
    )
