"""`tailtriage export-workload` writes an incident's full-rate arrival schedule, and `tailtriage
bench --replay` sends it to a server (serve-sim over loopback) on that schedule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tailtriage.loadgen.replay_formats import (
    MOONCAKE_BLOCK_TOKENS,
    ReplayItem,
    prompt_text,
    read_replay,
    write_replay,
)
from tailtriage.loadgen.server.sim import SimSettings
from tailtriage.model import Capture
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.config import apply_overrides

from .servers import sim_server


def _tt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tailtriage", *args], capture_output=True, text=True,
        timeout=300, check=False, env=dict(os.environ),
    )  # fmt: skip


@pytest.fixture(scope="module")
def sampled_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A 40 s simulated incident (short outputs: quick to replay) with a third of its traces
    kept, saved as a capture; and how many requests the full capture had."""
    cfg = apply_overrides(
        resolve_scenario("compute_saturation"),
        {"workload.0.duration_s": 20, "workload.1.duration_s": 20, "workload.*.arrivals.rate": 4,
         "workload.1.arrivals.rate_to": 6, "workload.*.output_tokens.median": 6,
         "workload.*.output_tokens.sigma": 0.2, "workload.*.prompt_tokens.median": 64},
    )  # fmt: skip
    full = simulate(cfg)
    rng = np.random.default_rng(3)
    ids = full.requests["request_id"].to_pylist()
    kept = pa.array([i for i in ids if rng.random() < 1 / 3])
    cap = full.replace(
        requests=full.requests.filter(pc.is_in(full.requests["request_id"], kept)),
        stages=full.stages.filter(pc.is_in(full.stages["request_id"], kept)),
    )
    path = tmp_path_factory.mktemp("sampled") / "capture.duckdb"
    cap.save(path)
    return path, full.requests.num_rows


@pytest.mark.slow
def test_export_rebuilds_the_full_rate_and_bench_replays_it(
    sampled_capture: tuple[Path, int], tmp_path: Path
) -> None:
    path, n_full = sampled_capture
    trace = tmp_path / "incident.jsonl"
    done = _tt("export-workload", str(path), "-o", str(trace), "--json", str(tmp_path / "x.json"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "x.json").read_text())
    assert summary["sampling"]["rebuilt"] and summary["sampling"]["ratio"] < 0.5
    items = read_replay(trace)
    # the counters miss only requests finishing after the last scrape
    assert len(items) == summary["requests"]
    assert 0.85 * n_full <= len(items) <= 1.05 * n_full, (len(items), n_full)
    with sim_server(SimSettings(served_model="m")) as port:
        ran = _tt(
            "bench", f"http://127.0.0.1:{port}", "--model", "m", "--replay", str(trace),
            "--out", str(tmp_path / "run"), "--json", str(tmp_path / "s.json"), "--quiet",
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["requests"] == len(items) and s["ok"] == len(items)
    sent = Capture.load(tmp_path / "run" / "capture.duckdb").requests
    arrival = np.sort(sent["arrival"].to_numpy(zero_copy_only=False))
    # the schedule is kept: the replay spans the trace's span (within a scheduling tick)
    assert arrival[-1] - arrival[0] == pytest.approx(items[-1].at, abs=0.5)
    tokens = sent["prompt_tokens"].to_numpy(zero_copy_only=False)
    assert sorted(tokens.tolist()) == sorted(it.prompt_tokens for it in items)


@pytest.mark.parametrize("fmt", ["tailtriage", "mooncake", "inference-perf"])
def test_every_format_reads_back_what_was_written(fmt: str, tmp_path: Path) -> None:
    items = [ReplayItem(0.0, 700, 20), ReplayItem(0.25, 1500, 3), ReplayItem(1.5, 9, 99)]
    path = tmp_path / "trace"
    assert write_replay(items, path, fmt, start_unix_s=1_700_000_000.0) == 3
    back = read_replay(path)
    assert [(round(b.at, 3), b.prompt_tokens, b.output_tokens) for b in back] == [
        (round(i.at, 3), i.prompt_tokens, i.output_tokens) for i in items
    ]
    if fmt == "mooncake":  # unknown prefixes: every block id is the request's own
        ids = [h for b in back for h in b.hash_ids]
        assert len(ids) == len(set(ids)) == 2 + 3 + 1


def test_the_sample_azure_trace_is_replayable() -> None:
    from support import DATA

    path = DATA / "workloads" / "AzureLLMInferenceTrace_code.csv"
    items = read_replay(path)
    rows = [line for line in path.read_text().splitlines()[1:] if line.strip()]
    assert len(items) == len(rows) and items[0].at == 0.0
    assert items[-1].at > 3000.0  # the code trace spans about an hour


def test_shared_hash_ids_give_shared_prompt_prefixes() -> None:
    a = prompt_text(ReplayItem(0.0, 2 * MOONCAKE_BLOCK_TOKENS + 10, 1, (7, 8, 9)))
    b = prompt_text(ReplayItem(0.0, MOONCAKE_BLOCK_TOKENS + 30, 1, (7, 5)))
    block = MOONCAKE_BLOCK_TOKENS
    assert a.split()[:block] == b.split()[:block]
    assert a.split()[block:block + 30] != b.split()[block:block + 30]  # fmt: skip
    assert len(a.split()) == 2 * block + 10 and len(b.split()) == block + 30


def test_a_broken_line_names_file_and_line(tmp_path: Path) -> None:
    from tailtriage.errors import ParseError

    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,12,3\nnope\n")
    with pytest.raises(ParseError) as err:
        read_replay(bad)
    assert "line 3" in str(err.value) and "bad.csv" in str(err.value)
