"""The settings of one load run, and the request specs they imply."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from tailtriage.analyses.results import SloSpec
from tailtriage.errors import ConfigError
from tailtriage.loadgen.replay_formats import prompt_text
from tailtriage.loadgen.request import RequestSpec, Target
from tailtriage.loadgen.runner import Plan, Timeouts
from tailtriage.loadgen.schedule import RateProfile, arrivals
from tailtriage.loadgen.workload import (
    LengthDist,
    Prompt,
    file_prompts,
    replay_trace,
    synthetic_prompts,
)

ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass(frozen=True)
class LoadConfig:
    """Everything that defines a run.  Exactly one load mode: ``rate`` (open loop, optionally
    shaped by ``steps`` or ``ramp``), ``concurrency`` (closed loop) or ``replay``."""

    url: str
    model: str
    endpoint: str = "chat"  # chat | completions (ignored when url has a /v1/... path)
    stream: bool = True
    rate: float | None = None
    arrival: str = "poisson"  # constant | poisson | gamma
    burstiness: float = 1.0
    steps: str | None = None  # "10x30s,20x30s"
    ramp: str | None = None  # "1:50:60s"
    concurrency: int | None = None
    replay: Path | None = None
    duration: float | None = None  # measured seconds (after warm-up)
    requests: int | None = None  # measured requests (after warm-up)
    warmup: float = 0.0  # seconds excluded at the start
    warmup_requests: int = 0
    input_len: str = "128"
    output_len: str = "64"
    prompts_file: Path | None = None
    max_in_flight: int = 100_000
    drain: float | None = None  # default: the total timeout
    timeouts: Timeouts = field(default_factory=Timeouts)
    workers: int = 1
    seed: int = 0
    include_usage: bool = True
    continuous_usage: bool = False
    ignore_eos: bool = True
    slos: tuple[SloSpec, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    insecure: bool = False  # https: skip certificate verification
    ca_bundle: Path | None = None  # https: PEM file of trusted CAs

    def __post_init__(self) -> None:
        modes = [self.rate is not None or self.steps or self.ramp, self.concurrency, self.replay]
        if sum(bool(m) for m in modes) != 1:
            raise ConfigError(
                "give exactly one load mode: --rate (or --steps/--ramp), --concurrency or --replay"
            )
        if self.duration is None and self.requests is None and self.replay is None:
            raise ConfigError("bound the run: give --duration, --requests or both")
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError("--concurrency must be at least 1")
        if self.workers < 1:
            raise ConfigError("--workers must be at least 1")
        if self.endpoint not in ENDPOINTS:
            raise ConfigError(f"--endpoint must be one of {', '.join(ENDPOINTS)}")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"URL must be http(s)://HOST[:PORT][/path] (got {self.url!r})")
        if self.ca_bundle is not None and not Path(self.ca_bundle).is_file():
            raise ConfigError(f"--ca-bundle {self.ca_bundle}: no such file")

    def target(self) -> Target:
        parts = urlsplit(self.url)
        path = parts.path.rstrip("/")
        if not path.endswith("/completions"):
            path = path.removesuffix("/v1") + ENDPOINTS[self.endpoint]
        return Target(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or (443 if parts.scheme == "https" else 80),
            path=path,
            model=self.model,
            stream=self.stream,
            include_usage=self.include_usage,
            continuous_usage=self.continuous_usage,
            ignore_eos=self.ignore_eos,
            api_key=self.api_key,
            tls=parts.scheme == "https",
            insecure=self.insecure,
            ca_bundle=None if self.ca_bundle is None else str(self.ca_bundle),
        )

    def plan(self) -> Plan:
        per = self.workers
        dur = None if self.duration is None else self.warmup + self.duration
        n = None if self.requests is None else self.warmup_requests + self.requests
        conc = (
            0
            if self.concurrency is None
            else max(1, self.concurrency // per + (1 if self.concurrency % per else 0))
        )
        drain = self.timeouts.total if self.drain is None else self.drain
        return Plan(
            closed_loop_users=conc,
            duration=dur,
            max_requests=None if n is None else -(-n // per),
            max_in_flight=max(1, self.max_in_flight // per),
            drain=drain,
        )

    def specs(self, worker: int = 0) -> Iterator[RequestSpec]:
        """This worker's share of the run's requests (every ``workers``-th of one global stream,
        so the whole run keeps the arrival process it asked for)."""
        rng = np.random.default_rng(self.seed)
        prompts = self._prompts(rng)
        times = self._times(rng)
        for i, (t, p) in enumerate(zip(times, prompts, strict=False)):
            if i % self.workers != worker:
                continue
            warm = i < self.warmup_requests or (t is not None and t < self.warmup)
            yield RequestSpec(i, p.text, p.prompt_tokens, p.max_tokens, t, warm, p.messages)

    def _times(self, rng: np.random.Generator) -> Iterator[float | None]:
        if self.concurrency is not None:
            return itertools.repeat(None)
        if self.replay is not None:
            return (it.at for it in replay_trace(self.replay))
        if self.steps:
            prof = RateProfile.steps(self.steps)
        elif self.ramp:
            prof = RateProfile.ramp(self.ramp)
        else:
            assert self.rate is not None
            prof = RateProfile.constant(self.rate)
        return arrivals(
            prof, self.arrival, np.random.default_rng(rng.integers(2**63)), self.burstiness
        )

    def _prompts(self, rng: np.random.Generator) -> Iterator[Prompt]:
        out_len = LengthDist.parse(self.output_len)
        if self.replay is not None:
            items = replay_trace(self.replay)
            gen = synthetic_prompts(LengthDist.parse("1"), out_len, rng)
            return (
                replace(
                    next(gen),
                    text=prompt_text(it),
                    prompt_tokens=it.prompt_tokens,
                    max_tokens=it.output_tokens,
                )
                for it in items
            )
        if self.prompts_file is not None:
            return itertools.cycle(file_prompts(self.prompts_file, out_len, rng))
        return synthetic_prompts(LengthDist.parse(self.input_len), out_len, rng)
