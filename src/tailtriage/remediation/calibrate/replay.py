"""Run the simulator on an observed workload (through its trace-replay input)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from tailtriage.model import Capture
from tailtriage.simulator.config import Replay as TraceReplay
from tailtriage.simulator.config import ScenarioConfig
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
    from tailtriage.simulator.simulation import run

    capture = run(config, seed=seed).capture
    if not isinstance(capture, Capture):  # pragma: no cover - a broken simulator
        raise TypeError("the simulator returned no capture")
    return capture


def simulate_workload(config: ScenarioConfig, workload: Workload, seed: int) -> Capture:
    """Simulate ``config`` with exactly ``workload`` (arrivals relative to its start)."""
    with tempfile.TemporaryDirectory(prefix="tailtriage-replay-") as d:
        trace = Path(d) / "workload.csv"
        write_trace(workload, config.start_unix_s, trace)
        return simulate(with_trace(config, trace), seed)
