"""``--find-max-rate``: the highest open-loop request rate whose run meets every SLO.

Doubling from a starting rate until a trial fails, then bisection between the last rate that
passed and the first that failed.  Each trial is a full short run (warm-up excluded); a trial
passes when every SLO holds and at least 99 % of its requests succeeded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tailtriage.errors import ConfigError
from tailtriage.loadgen.config import LoadConfig
from tailtriage.loadgen.results import Summary

MIN_OK_SHARE = 0.99


@dataclass(frozen=True)
class Trial:
    rate: float
    passed: bool
    summary: Summary


@dataclass(frozen=True)
class SearchResult:
    best_rate: float | None  # None: even the lowest rate failed
    trials: tuple[Trial, ...]


def trial_passes(summary: Summary) -> bool:
    if summary.requests == 0 or summary.ok < MIN_OK_SHARE * summary.requests:
        return False
    return all(o.met for o in summary.slos)


def find_max_rate(
    config: LoadConfig,
    run: Callable[[LoadConfig], Summary],
    *,
    start_rate: float = 1.0,
    max_rate: float = 10_000.0,
    bisections: int = 4,
    on_trial: Callable[[Trial], None] | None = None,
) -> SearchResult:
    """Search with ``run`` (one trial per call: a config in, its summary out)."""
    if not config.slos:
        raise ConfigError("--find-max-rate needs at least one --slo")
    trials: list[Trial] = []

    def trial(rate: float) -> bool:
        cfg = replace(config, rate=rate, concurrency=None, steps=None, ramp=None, replay=None)
        s = run(cfg)
        t = Trial(rate, trial_passes(s), s)
        trials.append(t)
        if on_trial is not None:
            on_trial(t)
        return t.passed

    lo: float | None = None
    hi: float | None = None
    rate = start_rate
    while rate <= max_rate:
        if trial(rate):
            lo = rate
            rate *= 2.0
        else:
            hi = rate
            break
    if lo is None:
        return SearchResult(None, tuple(trials))
    if hi is None:
        return SearchResult(lo, tuple(trials))
    for _ in range(bisections):
        mid = (lo + hi) / 2.0
        if trial(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult(lo, tuple(trials))
