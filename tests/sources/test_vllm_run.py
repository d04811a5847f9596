"""Real vLLM per-request timelines (DATA/vllm_runs) into requests, stages and series."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.errors import ParseError
from tailtriage.model.timeparse import parse_instant
from tailtriage.model.vocabulary import PRE_FIRST_TOKEN_STAGES
from tailtriage.sources import base
from tailtriage.sources.vllm_run import META_SOURCE, REQUESTS_SOURCE, TIMESERIES_SOURCE

OPTS = base.ReadOptions()
RUNS = ["RTX4090_Llama-3.1-8B", "RTXPRO6000_Llama-3.1-8B", "RTXPRO6000_Qwen3-30B-A3B-Instruct-2507"]


def _stages(cap: Any) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for r in cap.stages.to_pylist():
        out[r["request_id"]][r["stage"]] = r["duration"]
    return out


def _summary(path: Path) -> dict[str, float]:
    """validation_summary.txt: 'TTFT P95   122739.2   123430.6   +0.6%' -> vLLM column."""
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] in ("TTFT", "TPOT", "Latency"):
            out[f"{parts[0]} {parts[1]}"] = float(parts[2])
    return out


@pytest.mark.parametrize("run", RUNS)
def test_files_are_detected_by_content_not_name(
    shared_data: Path, tmp_path: Path, run: str
) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    for src, dst, source in (
        ("requests.jsonl", "a.txt", REQUESTS_SOURCE),
        ("timeseries.csv", "b.dat", TIMESERIES_SOURCE),
        ("meta.json", "c", META_SOURCE),
    ):
        shutil.copy(shared_data / "vllm_runs" / run / src, folder / dst)
        assert base.detect(folder / dst) is source
    for other in ("sim_config.json", "validation_summary.txt"):
        assert base.detect(shared_data / "vllm_runs" / run / other) is None


@pytest.mark.parametrize("run", RUNS)
def test_requests_and_stages_reproduce_the_upstream_validation(shared_data: Path, run: str) -> None:
    folder = shared_data / "vllm_runs" / run
    lines = [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines() if x]
    cap = REQUESTS_SOURCE.read(folder / "requests.jsonl", OPTS)
    assert cap.requests.num_rows == len(lines) == 300
    assert cap.stages.num_rows == 3 * 300
    stages = _stages(cap)
    reqs = {r["request_id"]: r for r in cap.requests.to_pylist()}
    offset = max(r["arrival_time"] - r["queued_ts"] for r in lines)
    for raw in lines:
        req, st_ = reqs[raw["request_id"]], stages[raw["request_id"]]
        assert set(st_) == {"engine_queue", "prefill", "decode"}
        assert req["prompt_tokens"] == raw["input_toks"]
        assert req["output_tokens"] == raw["output_toks"]
        assert req["arrival"] == pytest.approx(raw["queued_ts"] + offset, abs=1e-6)
        assert req["arrival"] >= raw["arrival_time"]  # entering the queue follows arrival
        assert st_["engine_queue"] == pytest.approx(
            raw["scheduled_ts"] - raw["queued_ts"], abs=1e-6
        )
        assert st_["prefill"] == pytest.approx(
            raw["first_token_ts"] - raw["scheduled_ts"], abs=1e-6
        )
        assert st_["decode"] == pytest.approx(
            raw["last_token_ts"] - raw["first_token_ts"], abs=1e-6
        )
        ttft = sum(v for k, v in st_.items() if k in PRE_FIRST_TOKEN_STAGES)
        assert req["ttft"] == pytest.approx(ttft, abs=1e-6)
        assert req["e2e"] == pytest.approx(sum(st_.values()), abs=1e-6)
        assert req["model"] == json.loads((folder / "meta.json").read_text())["model"]

    # golden: the vLLM column of upstream's validation_summary.txt, straight from `requests`
    golden = _summary(folder / "validation_summary.txt")
    rows = list(reqs.values())
    ttft = np.array([r["ttft"] for r in rows]) * 1000
    tpot = np.array([(r["e2e"] - r["ttft"]) / max(1, r["output_tokens"] - 1) for r in rows]) * 1000
    e2e = np.array([r["e2e"] for r in rows]) * 1000
    for name, values in (("TTFT", ttft), ("TPOT", tpot), ("Latency", e2e)):
        assert round(float(values.mean()), 1) == pytest.approx(golden[f"{name} Mean"], abs=0.051)
        for label, q in (("Median", 50), ("P90", 90), ("P95", 95), ("P99", 99)):
            got = float(np.percentile(values, q))
            assert got == pytest.approx(golden[f"{name} {label}"], abs=0.051), (name, label)
    extra = cap.metadata.extra["vllm_run"]
    assert 0 <= extra["prequeue_p50_s"] <= extra["prequeue_max_s"] < 0.25


def test_exact_first_request_of_the_rtx4090_run(shared_data: Path) -> None:
    cap = REQUESTS_SOURCE.read(shared_data / "vllm_runs/RTX4090_Llama-3.1-8B/requests.jsonl", OPTS)
    first = cap.requests.to_pylist()[0]
    assert first["request_id"] == "bench-0"
    assert (first["prompt_tokens"], first["output_tokens"]) == (2358, 531)
    offset = 1787240443.423884  # the run's largest arrival_time - queued_ts (SOURCES.md)
    assert first["arrival"] == pytest.approx(27536.660701067 + offset, abs=1e-5)
    assert first["ttft"] == pytest.approx(27537.350135653 - 27536.660701067, abs=1e-9)
    st_ = _stages(cap)["bench-0"]
    assert st_["engine_queue"] == pytest.approx(27536.660721646 - 27536.660701067, abs=1e-6)
    assert st_["prefill"] == pytest.approx(27537.350135653 - 27536.660721646, abs=1e-6)
    assert st_["decode"] == pytest.approx(27554.231018618 - 27537.350135653, abs=1e-6)
    # the run finished within meta.json's started_at..finished_at
    meta = json.loads((shared_data / "vllm_runs/RTX4090_Llama-3.1-8B/meta.json").read_text())
    lo, hi = parse_instant(meta["started_at"]), parse_instant(meta["finished_at"])
    for r in cap.requests.to_pylist():
        assert lo <= r["arrival"] <= r["first_token"] <= r["finish"] <= hi
    extra = cap.metadata.extra["vllm_run"]
    assert extra["engine_kwargs"]["max_num_batched_tokens"] == 2048
    assert extra["clock_offset_s"] > 1e9


def test_timeseries_becomes_vllm_series(shared_data: Path) -> None:
    folder = shared_data / "vllm_runs/RTX4090_Llama-3.1-8B"
    cap = TIMESERIES_SOURCE.read(folder / "timeseries.csv", OPTS)
    rows = (folder / "timeseries.csv").read_text().splitlines()[1:]
    assert cap.series.num_rows == 5 * len(rows) == 5 * 184
    start = parse_instant(json.loads((folder / "meta.json").read_text())["started_at"])
    at = {(r["metric"], r["time"]): r["value"] for r in cap.series.to_pylist()}
    t2 = start + 2.0  # row "2.0,9045.0,79.0,16,0,39.7"
    assert at[("vllm:num_requests_running", t2)] == 16
    assert at[("vllm:num_requests_waiting", t2)] == 0
    assert at[("vllm:kv_cache_usage_perc", t2)] == pytest.approx(0.397)
    assert at[("vllm:prompt_tokens_total", t2)] == 3392 + 9045
    assert at[("vllm:generation_tokens_total", t2)] == 2 + 79
    labels = set(cap.series.column("labels").to_pylist())
    assert labels == {'{"model_name":"meta-llama/Llama-3.1-8B"}'}


@pytest.mark.parametrize("run", RUNS[1:])
def test_all_zero_kv_cache_is_missing_not_idle(shared_data: Path, run: str) -> None:
    cap = TIMESERIES_SOURCE.read(shared_data / "vllm_runs" / run / "timeseries.csv", OPTS)
    assert "vllm:kv_cache_usage_perc" not in set(cap.series.column("metric").to_pylist())
    assert cap.metadata.quality["series.kv_cache_missing"] > 0
    assert any("recorder bug" in w for w in cap.metadata.warnings)


def test_bad_lines_are_skipped_and_counted(shared_data: Path, tmp_path: Path) -> None:
    src = (shared_data / "vllm_runs/RTX4090_Llama-3.1-8B/requests.jsonl").read_text().splitlines()
    broken = [
        *src[:3],
        src[3][:40],
        json.dumps({"request_id": "x", "arrival_time": "soon"}),
        *src[4:6],
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(broken) + "\n")
    cap = REQUESTS_SOURCE.read(path, OPTS)
    assert cap.requests.num_rows == 5
    assert cap.metadata.quality["requests.bad_lines"] == 2
    assert any("r.jsonl:line 4" in w for w in cap.metadata.warnings)
    assert cap.metadata.provenance[0].skipped == 2
    path.write_text(src[0][:50] + "\n")
    with pytest.raises(ParseError, match=r"r\.jsonl: no valid vLLM request record"):
        REQUESTS_SOURCE.read(path, OPTS)


_t = st.floats(0, 50, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_t, _t, _t, _t, _t), min_size=1, max_size=10), st.booleans())
def test_stages_never_negative_and_always_add_up(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[tuple[float, ...]], mixed: bool
) -> None:
    """Any timestamps, ordered or not, same or mixed clocks: no negative stage, no lost time."""
    offset = 1.7e9 if mixed else 0.0
    lines = []
    for i, (a, q, s, f, last) in enumerate(gaps):
        lines.append(json.dumps({
            "request_id": f"r{i}", "input_toks": 1, "output_toks": 2,
            "arrival_time": 1000 + a + offset, "queued_ts": 1000 + q, "scheduled_ts": 1000 + s,
            "first_token_ts": 1000 + f, "last_token_ts": 1000 + last,
        }))  # fmt: skip
    path = tmp_path_factory.mktemp("v") / "r.jsonl"
    path.write_text("\n".join(lines))
    cap = REQUESTS_SOURCE.read(path, OPTS)
    stages = _stages(cap)
    for req in cap.requests.to_pylist():
        st_ = stages[req["request_id"]]
        assert min(st_.values()) >= 0
        assert req["e2e"] == pytest.approx(sum(st_.values()), abs=1e-6)
        assert req["ttft"] == pytest.approx(req["e2e"] - st_["decode"], abs=1e-6)
        assert req["first_token"] - req["arrival"] == pytest.approx(req["ttft"], abs=1e-6)
