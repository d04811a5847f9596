"""Read the real vLLM runs in DATA/vllm_runs/ into Captures, independently of ``sources/``.

Clocks (SOURCES.md): ``arrival_time`` is wall-clock epoch, the ``*_ts`` columns are the
engine core's monotonic clock.  Upstream's metrics anchor on ``queued_ts`` (TTFT =
first_token_ts - queued_ts), so a request's arrival here is its ``queued_ts`` moved onto the
epoch by the run's largest ``arrival_time - queued_ts`` offset; the stages are engine_queue
(queued -> scheduled), prefill (scheduled -> first token) and decode (first -> last token)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S

RUNS = (
    "RTX4090_Llama-3.1-8B",
    "RTXPRO6000_Llama-3.1-8B",
    "RTXPRO6000_Qwen3-30B-A3B-Instruct-2507",
)


@dataclass(frozen=True)
class VllmRun:
    name: str
    capture: Capture
    meta: dict[str, Any]
    summary: dict[str, float]  # "TTFT P95" -> ms, the vLLM column of validation_summary.txt


def read_summary(path: Path) -> dict[str, float]:
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] in ("TTFT", "TPOT", "Latency"):
            out[f"{parts[0]} {parts[1]}"] = float(parts[2])
    return out


def load_run(root: Path, name: str) -> VllmRun:
    d = root / "vllm_runs" / name
    rows = [json.loads(line) for line in (d / "requests.jsonl").open()]
    col = lambda k: np.array([r[k] for r in rows], dtype=np.float64)  # noqa: E731
    queued, sched = col("queued_ts"), col("scheduled_ts")
    first, last = col("first_token_ts"), col("last_token_ts")
    offset = float((col("arrival_time") - queued).max())
    n = len(rows)
    ids = [r["request_id"] for r in rows]
    requests = make_table(
        S.REQUESTS,
        {
            "request_id": ids,
            "arrival": queued + offset,
            "first_token": first + offset,
            "finish": last + offset,
            "ttft": first - queued,
            "e2e": last - queued,
            "prompt_tokens": col("input_toks").astype(np.int64),
            "output_tokens": col("output_toks").astype(np.int64),
            "status": ["ok"] * n,
            "replica": ["engine-0"] * n,
            "model": [json.loads((d / "meta.json").read_text())["model"]] * n,
            "source": [str(d / "requests.jsonl")] * n,
        },
    )
    stage_rows: dict[str, list[Any]] = {"request_id": [], "stage": [], "start": [], "duration": []}
    for stage, a, b in (
        ("engine_queue", queued, sched),
        ("prefill", sched, first),
        ("decode", first, last),
    ):
        stage_rows["request_id"] += ids
        stage_rows["stage"] += [stage] * n
        stage_rows["start"] += list(a + offset)
        stage_rows["duration"] += list(b - a)
    stages = make_table(S.STAGES, stage_rows)
    return VllmRun(
        name=name,
        capture=Capture(requests=requests, stages=stages),
        meta=json.loads((d / "meta.json").read_text()),
        summary=read_summary(d / "validation_summary.txt"),
    )
