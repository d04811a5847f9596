"""When to send: open-loop arrival processes over a rate profile, and closed loop.

Open-loop arrivals are a unit-rate renewal process (gaps of mean 1: constant, exponential for
Poisson, gamma for bursty traffic) stretched by the rate profile, so the same burstiness holds
under step and ramp schedules.  vLLM's ``--burstiness`` convention: gamma shape = burstiness,
1 is Poisson, larger is smoother."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from tailtriage.errors import ConfigError

ARRIVALS = ("constant", "poisson", "gamma")


@dataclass(frozen=True)
class RateSegment:
    start: float  # seconds after the run's start
    end: float
    rate_start: float  # requests per second at ``start``
    rate_end: float  # ... and at ``end`` (linear in between)

    def rate(self, t: float) -> float:
        if self.end <= self.start:
            return self.rate_start
        f = (t - self.start) / (self.end - self.start)
        return self.rate_start + f * (self.rate_end - self.rate_start)


@dataclass(frozen=True)
class RateProfile:
    segments: tuple[RateSegment, ...]

    @classmethod
    def constant(cls, rate: float) -> RateProfile:
        if rate <= 0:
            raise ConfigError("--rate must be positive")
        return cls((RateSegment(0.0, float("inf"), rate, rate),))

    @classmethod
    def steps(cls, text: str) -> RateProfile:
        """``"10x30s,20x30s,40x30s"``: RATE x DURATION stages, one after another."""
        segs: list[RateSegment] = []
        t = 0.0
        for part in text.split(","):
            try:
                r, d = part.strip().split("x")
                rate, dur = float(r), _seconds(d)
            except ValueError:
                raise ConfigError(f"bad step {part!r}; use RATExDURATION, e.g. 20x30s") from None
            segs.append(RateSegment(t, t + dur, rate, rate))
            t += dur
        return cls(tuple(segs))

    @classmethod
    def ramp(cls, text: str) -> RateProfile:
        """``"1:50:60s"``: from 1 to 50 requests/s linearly over 60 s, then hold 50."""
        try:
            a, b, d = text.split(":")
            r0, r1, dur = float(a), float(b), _seconds(d)
        except ValueError:
            raise ConfigError(f"bad ramp {text!r}; use FROM:TO:DURATION, e.g. 1:50:60s") from None
        return cls((RateSegment(0.0, dur, r0, r1), RateSegment(dur, float("inf"), r1, r1)))

    @property
    def end(self) -> float:
        return self.segments[-1].end

    def rate_at(self, t: float) -> tuple[float, float]:
        """(rate at t, start of the next segment) — the latter to skip idle stages."""
        for s in self.segments:
            if s.start <= t < s.end:
                return s.rate(t), s.end
        return 0.0, float("inf")


def arrivals(
    profile: RateProfile, kind: str, rng: np.random.Generator, burstiness: float = 1.0
) -> Iterator[float]:
    """Endless intended send times (seconds after start); ends where the profile ends."""
    if kind not in ARRIVALS:
        raise ConfigError(f"unknown arrival process {kind!r}; use {', '.join(ARRIVALS)}")
    if kind == "gamma" and burstiness <= 0:
        raise ConfigError("--burstiness must be positive")
    t = 0.0
    while True:
        if kind == "constant":
            g = 1.0
        elif kind == "poisson":
            g = float(rng.exponential(1.0))
        else:
            g = float(rng.gamma(burstiness, 1.0 / burstiness))
        t = _advance(profile, t, g)
        if t == float("inf"):
            return
        yield t


def _advance(profile: RateProfile, t: float, units: float) -> float:
    """Move ``t`` forward until ``units`` of cumulative rate have passed."""
    while units > 0:
        rate, seg_end = profile.rate_at(t)
        if seg_end == float("inf") and rate <= 0:
            return float("inf")
        if rate <= 0:
            t = seg_end
            continue
        dt = units / rate
        if t + dt <= seg_end:
            return t + dt
        # crosses into the next segment: spend what this one holds (midpoint rule)
        span = seg_end - t
        used = span * (rate + profile.rate_at(t + span * 0.999999)[0]) / 2.0
        if used <= 0:
            t = seg_end
            continue
        if used >= units:
            return t + units / rate
        units -= used
        t = seg_end
    return t


def _seconds(text: str) -> float:
    text = text.strip()
    for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * mult
    return float(text)


def parse_duration(text: str) -> float:
    """``30s``, ``2m``, ``500ms`` or plain seconds."""
    try:
        v = _seconds(text)
    except ValueError:
        raise ConfigError(f"bad duration {text!r}; use e.g. 30s, 2m, 500ms") from None
    if v <= 0:
        raise ConfigError(f"duration must be positive: {text!r}")
    return v
