"""Arrivals and request lengths: a non-homogeneous Poisson process (phases with linear ramps, a
slow diurnal swing, bursts) sampled by thinning, and log-normal prompt/output lengths with an
optional share of RAG-length prompts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from realistic.spec import Phase, Workload

#: thinning grid: the rate is evaluated on this step (seconds) to bound the proposal rate
_RATE_GRID_S = 1.0


@dataclass(frozen=True)
class Requests:
    arrival: np.ndarray  # seconds from the window start, sorted
    prompt: np.ndarray  # tokens
    output: np.ndarray  # tokens
    phase: np.ndarray  # index of the phase each request arrived in
    tenant: np.ndarray  # 0..7, a request key used by hash-based routing


def rate_at(w: Workload, t: np.ndarray, duration_s: float) -> np.ndarray:
    """Requests per second at times ``t``."""
    rate = np.zeros_like(t)
    for i, ph in enumerate(w.phases):
        end = w.phases[i + 1].start_s if i + 1 < len(w.phases) else np.inf
        m = (t >= ph.start_s) & (t < end)
        if ph.rate_to >= 0 and ph.ramp_s > 0:
            f = np.clip((t[m] - ph.start_s) / ph.ramp_s, 0.0, 1.0)
            rate[m] = ph.rate + (ph.rate_to - ph.rate) * f
        else:
            rate[m] = ph.rate
    if w.diurnal:
        rate *= 1.0 + w.diurnal * np.sin(2 * np.pi * t / (4 * duration_s))
    for start, dur, extra in w.bursts:
        rate[(t >= start) & (t < start + dur)] += extra
    return np.maximum(rate, 0.0)


def sample(w: Workload, duration_s: float, rng: np.random.Generator) -> Requests:
    grid = np.arange(0.0, duration_s + _RATE_GRID_S, _RATE_GRID_S)
    peak = float(rate_at(w, grid, duration_s).max()) * 1.05 + 1e-9
    n = rng.poisson(peak * duration_s)
    t = np.sort(rng.uniform(0.0, duration_s, n))
    keep = rng.uniform(0.0, peak, n) < rate_at(w, t, duration_s)
    t = t[keep]
    starts = np.array([p.start_s for p in w.phases])
    phase = np.searchsorted(starts, t, side="right") - 1
    prompt = np.empty(len(t))
    output = np.empty(len(t))
    for i, ph in enumerate(w.phases):
        m = phase == i
        prompt[m], output[m] = _lengths(ph, int(m.sum()), rng)
    prompt = np.clip(np.rint(prompt), 8, w.max_prompt).astype(np.int64)
    output = np.clip(np.rint(output), 2, w.max_output).astype(np.int64)
    tenant = rng.integers(0, 8, len(t))
    return Requests(t, prompt, output, phase.astype(np.int64), tenant)


def _lengths(ph: Phase, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    prompt = ph.prompt_median * np.exp(ph.prompt_sigma * rng.standard_normal(n))
    long = rng.uniform(size=n) < ph.long_prompt_share
    prompt[long] = ph.long_prompt_tokens * np.exp(0.25 * rng.standard_normal(int(long.sum())))
    output = ph.output_median * np.exp(ph.output_sigma * rng.standard_normal(n))
    return prompt, output
