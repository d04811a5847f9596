"""Arrival processes, size distributions and trace replay."""

from __future__ import annotations

import numpy as np
import pytest

from support import DATA
from tailtriage.errors import ParseError
from tailtriage.simulator import simulate
from tailtriage.simulator.config import Arrivals, Dist, from_dict
from tailtriage.simulator.workload import phase_arrivals, read_azure_trace, sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_poisson_rate_and_exponential_gaps() -> None:
    t = phase_arrivals(Arrivals("poisson", rate=50.0), 400.0, rng())
    assert len(t) == pytest.approx(20_000, rel=0.03)
    gaps = np.diff(t)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.05)
    assert np.all(gaps >= 0) and t[-1] < 400.0


def test_gamma_burstiness_and_constant_spacing() -> None:
    bursty = np.diff(phase_arrivals(Arrivals("gamma", rate=20.0, cv=3.0), 500.0, rng(1)))
    assert np.std(bursty) / np.mean(bursty) == pytest.approx(3.0, rel=0.15)
    even = np.diff(phase_arrivals(Arrivals("constant", rate=4.0), 10.0, rng()))
    assert np.allclose(even, 0.25)


def test_ramp_and_diurnal_follow_the_rate_curve() -> None:
    ramp = phase_arrivals(Arrivals("poisson", rate=10.0, rate_to=50.0), 600.0, rng(2))
    first, last = np.sum(ramp < 60), np.sum(ramp > 540)
    assert last / first == pytest.approx(48 / 12, rel=0.2)  # mean rates 12 and 48 /s
    day = phase_arrivals(Arrivals("diurnal", rate=20.0, amplitude=0.8, period_s=400), 400.0, rng(3))
    peak, trough = np.sum((day > 50) & (day < 150)), np.sum((day > 250) & (day < 350))
    assert peak > 3 * trough


def test_dist_sampling_clips_and_centres() -> None:
    x = sample(Dist("lognormal", median=200, sigma=0.5, max=400), rng(), 50_000)
    assert np.median(x) == pytest.approx(200, rel=0.03)
    assert x.max() <= 400
    assert np.all(sample(Dist("constant", value=7), rng(), 5) == 7)


def test_read_real_azure_trace() -> None:
    times, ctx, gen = read_azure_trace(DATA / "workloads" / "AzureLLMInferenceTrace_conv.csv")
    assert len(times) == 19_366  # SOURCES.md
    assert np.all(np.diff(times) >= 0)
    assert 3000 < times[-1] - times[0] < 4000  # about an hour
    assert ctx.min() >= 1 and gen.min() >= 0


def test_bad_trace_rows_name_file_and_line(tmp_path: object) -> None:
    from pathlib import Path

    p = Path(str(tmp_path)) / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,12,3\nx,y\n")
    with pytest.raises(ParseError, match=r"t\.csv:line 3"):
        read_azure_trace(p)
    p.write_text("time,a,b\n")
    with pytest.raises(ParseError, match="line 1"):
        read_azure_trace(p)


def test_replay_drives_the_simulation() -> None:
    path = DATA / "workloads" / "AzureLLMInferenceTrace_code.csv"
    cfg = from_dict({
        "name": "replay", "hpa": {"enabled": False}, "pods": {"initial_replicas": 2},
        "workload": [{"name": "steady", "duration_s": 120}],
        "replay": {"path": str(path), "time_scale": 1.0},
    })  # fmt: skip
    cap = simulate(cfg)
    times, ctx, _ = read_azure_trace(path)
    expected = int(np.sum(times - times[0] < 120))
    assert cap.requests.num_rows == expected
    assert cap.requests["prompt_tokens"].to_pylist()[:5] == np.maximum(ctx[:5], 1).tolist()
