"""Arrivals and request sizes, generated up front as arrays (vectorised, seeded).

Arrival times come from a unit-rate renewal process (exponential gaps for Poisson, gamma gaps
with the given coefficient of variation for bursty traffic, constant gaps) mapped through the
inverse of the cumulative rate of the phase (time rescaling), so ramps, steps and diurnal
curves need no thinning and keep the process's burstiness.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tailtriage.errors import ConfigError, ParseError
from tailtriage.simulator.config import Arrivals, Dist, Phase, Replay, ScenarioConfig

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Workload:
    """One row per request, sorted by arrival (seconds after the scenario start)."""

    arrival: F64
    prompt_tokens: I64
    output_tokens: I64
    prefix_group: I64  # -1: no shared prefix
    prefix_tokens: I64  # shared-prefix length (cacheable tokens) of the group
    phase: I64  # index into config.workload (replay: the phase the time falls in)

    def __len__(self) -> int:
        return len(self.arrival)


def sample(dist: Dist, rng: np.random.Generator, n: int) -> F64:
    """Draw ``n`` values of ``dist`` (clipped to its [min, max])."""
    if dist.kind == "constant":
        out = np.full(n, dist.value, dtype=np.float64)
    elif dist.kind == "lognormal":
        out = dist.median * np.exp(dist.sigma * rng.standard_normal(n))
    elif dist.kind == "uniform":
        out = rng.uniform(dist.low, dist.high, n)
    elif dist.kind == "exponential":
        out = rng.exponential(dist.mean, n)
    else:  # normal
        out = dist.mean + dist.sigma * rng.standard_normal(n)
    return np.clip(out, dist.min, dist.max)


def _tokens(dist: Dist, rng: np.random.Generator, n: int) -> I64:
    return np.maximum(1, np.rint(sample(dist, rng, n))).astype(np.int64)


def _rate_curve(a: Arrivals, duration: float) -> tuple[F64, F64]:
    """(time grid, cumulative expected arrivals) of one phase."""
    t = np.linspace(0.0, duration, 4097)
    rate = np.full_like(t, a.rate)
    if a.rate_to >= 0:
        rate = a.rate + (a.rate_to - a.rate) * t / duration
    if a.process == "diurnal":
        rate = rate * (1.0 + a.amplitude * np.sin(2 * np.pi * t / a.period_s))
    rate = np.maximum(rate, 0.0)
    cum = np.concatenate([[0.0], np.cumsum((rate[1:] + rate[:-1]) * 0.5 * np.diff(t))])
    return t, cum


def phase_arrivals(a: Arrivals, duration: float, rng: np.random.Generator) -> F64:
    t, cum = _rate_curve(a, duration)
    total = float(cum[-1])
    if total <= 0:
        return np.empty(0)
    n_max = int(total + 10 * np.sqrt(total) + 20)
    if a.process == "constant":
        unit = np.arange(1, int(total) + 1, dtype=np.float64) - 0.5
    else:
        if a.process == "gamma":
            k = 1.0 / max(a.cv, 1e-3) ** 2
            gaps = rng.gamma(k, 1.0 / k, n_max)
        else:  # poisson and diurnal (a non-homogeneous Poisson process)
            gaps = rng.exponential(1.0, n_max)
        unit = np.cumsum(gaps)
        while unit[-1] < total:  # rare: draw more
            unit = np.concatenate([unit, unit[-1] + np.cumsum(rng.exponential(1.0, n_max))])
        unit = unit[unit < total]
    # strictly increasing cum is needed for the inverse; flat parts (rate 0) get no arrivals
    keep = np.concatenate([[True], np.diff(cum) > 0])
    times: F64 = np.interp(unit, cum[keep], t[keep])
    return times


def generate(cfg: ScenarioConfig, rng: np.random.Generator) -> Workload:
    """The whole scenario's requests: a trace replay, or the phases' processes."""
    if cfg.replay is not None and cfg.replay.path:
        return _replay(cfg, rng)
    parts: list[tuple[F64, I64, I64, I64, I64, I64]] = []
    offset = 0.0
    for i, ph in enumerate(cfg.workload):
        arr = phase_arrivals(ph.arrivals, ph.duration_s, rng) + offset
        n = len(arr)
        parts.append((arr, *_sizes(ph, rng, n), np.full(n, i, dtype=np.int64)))
        offset += ph.duration_s
    cols = [np.concatenate([p[j] for p in parts]) for j in range(6)]
    return Workload(*cols)


def _sizes(ph: Phase, rng: np.random.Generator, n: int) -> tuple[I64, I64, I64, I64]:
    prompt = _tokens(ph.prompt_tokens, rng, n)
    output = _tokens(ph.output_tokens, rng, n)
    pre = ph.prefix
    if pre.groups <= 0:
        return prompt, output, np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    group = rng.integers(0, pre.groups, n)
    if pre.hot_share > 0:
        group = np.where(rng.random(n) < pre.hot_share, 0, group)
    prefix = np.full(n, pre.shared_tokens, dtype=np.int64)
    prompt = prompt + prefix  # the shared prefix comes before the request's own tokens
    return prompt, output, group.astype(np.int64), prefix


def _replay(cfg: ScenarioConfig, rng: np.random.Generator) -> Workload:
    rp: Replay = cfg.replay  # type: ignore[assignment]
    times, ctx, gen = read_azure_trace(rp.path)
    rel = (times - times[0]) * rp.time_scale - rp.start_s
    keep = (rel >= 0) & (rel < cfg.duration_s)
    rel, ctx, gen = rel[keep], ctx[keep], gen[keep]
    if rp.max_requests:
        rel, ctx, gen = rel[: rp.max_requests], ctx[: rp.max_requests], gen[: rp.max_requests]
    bounds = np.cumsum([p.duration_s for p in cfg.workload])
    phase = np.minimum(np.searchsorted(bounds, rel, side="right"), len(bounds) - 1)
    n = len(rel)
    return Workload(
        rel.astype(np.float64),
        np.maximum(ctx, 1),
        np.maximum(gen, 1),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        phase.astype(np.int64),
    )


def read_azure_trace(path: str | Path) -> tuple[F64, I64, I64]:
    """Read an Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``).

    Returns (unix seconds, prompt tokens, output tokens), sorted by time.
    """
    p = Path(path)
    try:
        fh = p.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read trace ({exc.strerror or exc})") from exc
    stamps: list[str] = []
    ctx: list[int] = []
    gen: list[int] = []
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:3]] != [
            "TIMESTAMP",
            "ContextTokens",
            "GeneratedTokens",
        ]:
            raise ParseError(
                "expected header TIMESTAMP,ContextTokens,GeneratedTokens", str(p), "line 1"
            )
        for lineno, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                stamps.append(row[0].strip().replace(" ", "T"))
                ctx.append(int(row[1]))
                gen.append(int(row[2]))
            except (IndexError, ValueError) as exc:
                raise ParseError(f"bad row ({exc})", str(p), f"line {lineno}") from exc
    try:
        ns = np.array(stamps, dtype="datetime64[ns]").astype(np.int64)
    except ValueError as exc:
        raise ParseError(f"bad TIMESTAMP ({exc})", str(p)) from exc
    order = np.argsort(ns, kind="stable")
    return (
        ns[order].astype(np.float64) / 1e9,
        np.asarray(ctx, dtype=np.int64)[order],
        np.asarray(gen, dtype=np.int64)[order],
    )
