"""Run the simulator on an observed workload (through its trace-replay input), several runs
at once where the calibration and the what-if have several to make.

:class:`Replays` keeps every run of one calibration by its config, and fills a round of
the workers that would leave one idle with the runs its caller expects to need next (a spare
run costs a core that would have waited, and is found, not run again, when asked for)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from tailtriage.model import Capture
from tailtriage.simulator.config import Replay as TraceReplay
from tailtriage.simulator.config import ScenarioConfig
from tailtriage.simulator.parallel import run_many, run_one, workers
from tailtriage.simulator.workload import Workload


def write_trace(workload: Workload, start: float, path: Path) -> None:
    """The workload as an Azure-LLM-trace CSV, the simulator's trace-replay format."""
    ns = np.round((start + workload.arrival) * 1e9).astype(np.int64)
    stamps = np.datetime_as_string(ns.astype("datetime64[ns]"), unit="ns")
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [
        f"{t},{p},{o}"
        for t, p, o in zip(
            stamps.tolist(),
            workload.prompt_tokens.tolist(),
            workload.output_tokens.tolist(),
            strict=True,
        )
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def with_trace(config: ScenarioConfig, trace: Path, token_times: bool = False) -> ScenarioConfig:
    """``config`` replaying ``trace``; token times only when asked, and no metric series
    (the calibration and the what-if read requests and stages only; series cost time)."""
    return replace(
        config,
        replay=TraceReplay(path=str(trace)),
        output=replace(config.output, token_times="on" if token_times else "off", metrics=False),
    )


def simulate(config: ScenarioConfig, seed: int) -> Capture:
    return run_one(config, seed)


def simulate_workload(config: ScenarioConfig, workload: Workload, seed: int) -> Capture:
    """Simulate ``config`` with exactly ``workload`` (arrivals relative to its start)."""
    return simulate_workloads([config], workload, seed)[0]


def simulate_workloads(
    configs: Sequence[ScenarioConfig], workload: Workload, seed: int
) -> list[Capture]:
    """Simulate each of ``configs`` with exactly ``workload``, several at once
    (:func:`~tailtriage.simulator.parallel.run_many`: the same captures as one by one)."""
    with tempfile.TemporaryDirectory(prefix="tailtriage-replay-") as d:
        traces: dict[float, Path] = {}  # one trace per start (the arrivals are absolute)
        for c in configs:
            if c.start_unix_s not in traces:
                traces[c.start_unix_s] = Path(d) / f"workload-{len(traces)}.csv"
                write_trace(workload, c.start_unix_s, traces[c.start_unix_s])
        return run_many([with_trace(c, traces[c.start_unix_s]) for c in configs], seed)


class Replays:
    """The calibration's replays of one workload: each config run once (the same config and
    seed make the same run), ``workers()`` at a time.  A round that asks for fewer runs than
    there are workers takes the first ``spare`` configs not run yet with it: they are kept
    for a later :meth:`run` to find, so what is returned never depends on the spares, nor on
    the number of workers."""

    def __init__(self, workload: Workload, seed: int) -> None:
        self.workload = workload
        self.seed = seed
        self._done: dict[str, Capture] = {}
        #: every config run, in the order run (spares included): what a test can count
        self.ran: list[str] = []

    @property
    def width(self) -> int:
        """The runs one round takes: ``workers()`` now, as :func:`run_many` decides (the
        load may change during a calibration: a spare must not run where nothing is idle)."""
        return workers()

    def run(
        self,
        configs: Sequence[ScenarioConfig],
        spare: Sequence[ScenarioConfig] = (),
    ) -> list[Capture]:
        """The replay of each of ``configs`` (same order); the configs not run yet run in
        rounds of ``width``, the last round filled from ``spare``."""
        keys = [repr(c) for c in configs]
        todo = {k: c for k, c in zip(keys, configs, strict=True) if k not in self._done}
        idle = -len(todo) % self.width if todo and spare else 0
        for c in spare:
            if idle == 0:
                break
            k = repr(c)
            if k not in self._done and k not in todo:
                todo[k] = c
                idle -= 1
        if todo:
            runs = simulate_workloads(list(todo.values()), self.workload, self.seed)
            self._done.update(zip(todo, runs, strict=True))
            self.ran.extend(todo)
        return [self._done[k] for k in keys]

    def has(self, config: ScenarioConfig) -> bool:
        """Whether ``config`` has run (asked for, or as a spare)."""
        return repr(config) in self._done
