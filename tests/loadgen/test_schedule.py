"""Arrival processes, rate profiles and workload inputs."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tailtriage.errors import ConfigError, ParseError
from tailtriage.loadgen.schedule import RateProfile, arrivals, parse_duration
from tailtriage.loadgen.workload import LengthDist, file_prompts, replay_trace, synthetic_prompts


def _take(profile: RateProfile, kind: str, n: int, seed: int = 1, b: float = 1.0) -> np.ndarray:
    it = arrivals(profile, kind, np.random.default_rng(seed), b)
    return np.array(list(itertools.islice(it, n)))


def test_constant_arrivals_are_evenly_spaced() -> None:
    t = _take(RateProfile.constant(20.0), "constant", 50)
    assert np.allclose(np.diff(t), 0.05)


@pytest.mark.parametrize(("kind", "burst"), [("poisson", 1.0), ("gamma", 0.25), ("gamma", 4.0)])
def test_mean_rate_holds(kind: str, burst: float) -> None:
    t = _take(RateProfile.constant(50.0), kind, 20000, b=burst)
    rate = len(t) / t[-1]
    assert 47.0 < rate < 53.0


def test_burstiness_changes_dispersion() -> None:
    cv = {}
    for b in (0.25, 1.0, 4.0):
        gaps = np.diff(_take(RateProfile.constant(50.0), "gamma", 5000, b=b))
        cv[b] = gaps.std() / gaps.mean()
    # gamma shape k has CV 1/sqrt(k): bursty > Poisson > smooth
    assert cv[0.25] > cv[1.0] > cv[4.0]
    assert abs(cv[1.0] - 1.0) < 0.1


def test_steps_follow_their_rates_and_end() -> None:
    prof = RateProfile.steps("10x10s,0x5s,40x10s")
    t = _take(prof, "constant", 10_000)
    assert t[-1] < 25.0  # the profile ends
    assert abs(np.sum(t < 10.0) - 100) <= 1
    assert np.sum((t >= 10.0) & (t < 15.0)) == 0
    assert abs(np.sum(t >= 15.0) - 400) <= 2


def test_ramp_increases_density() -> None:
    t = _take(RateProfile.ramp("1:41:20s"), "constant", 10_000)
    t = t[t < 20.0]
    first, second = np.sum(t < 10.0), np.sum(t >= 10.0)
    assert second > 2 * first
    assert abs(len(t) - 420) < 20  # integral of the linear ramp


@given(st.floats(min_value=0.1, max_value=500.0), st.sampled_from(["constant", "poisson", "gamma"]))
def test_arrivals_are_nondecreasing(rate: float, kind: str) -> None:
    t = _take(RateProfile.constant(rate), kind, 200, b=0.5)
    assert np.all(np.diff(t) >= 0) and t[0] >= 0


@pytest.mark.parametrize("bad", ["x", "10x", "axb", "1:2", "fast"])
def test_bad_profiles_are_config_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        RateProfile.steps(bad) if "x" in bad or bad == "fast" else RateProfile.ramp(bad)


def test_durations() -> None:
    assert parse_duration("500ms") == 0.5 and parse_duration("2m") == 120.0
    assert parse_duration("3") == 3.0
    with pytest.raises(ConfigError):
        parse_duration("-1s")


def test_length_distributions() -> None:
    rng = np.random.default_rng(0)
    assert LengthDist.parse("32").sample(rng) == 32
    u = [LengthDist.parse("uniform:5:9").sample(rng) for _ in range(500)]
    assert min(u) == 5 and max(u) == 9
    n = [LengthDist.parse("normal:100:10").sample(rng) for _ in range(2000)]
    assert 98 < np.mean(n) < 102
    with pytest.raises(ConfigError):
        LengthDist.parse("zipf:1:2")


def test_synthetic_prompts_have_the_asked_length() -> None:
    gen = synthetic_prompts(LengthDist.parse("17"), LengthDist.parse("8"), np.random.default_rng(0))
    p = next(gen)
    assert len(p.text.split()) == 17 and p.prompt_tokens == 17 and p.max_tokens == 8


def test_prompt_file_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "p.jsonl"
    good.write_text(
        '{"prompt": "a b c", "max_tokens": 5}\n\n'
        '{"messages": [{"role": "user", "content": "hi there"}]}\n'
    )
    ps = file_prompts(good, LengthDist.parse("9"), np.random.default_rng(0))
    assert [p.max_tokens for p in ps] == [5, 9]
    assert ps[1].messages == ({"role": "user", "content": "hi there"},)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": \n')
    with pytest.raises(ParseError, match=r"bad.jsonl:line 2"):
        file_prompts(bad, LengthDist.parse("9"), np.random.default_rng(0))


def test_replay_trace_formats(tmp_path: Path) -> None:
    mooncake = tmp_path / "m.jsonl"
    mooncake.write_text(
        '{"timestamp": 2000, "input_length": 10, "output_length": 3, "hash_ids": [1]}\n'
        '{"timestamp": 500, "input_length": 20, "output_length": 4}\n'
    )
    items = replay_trace(mooncake)
    assert [(i.at, i.prompt_tokens, i.output_tokens) for i in items] == [(0.0, 20, 4), (1.5, 10, 3)]
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"t": 1, "prompt_tokens": 3, "output_tokens": 2}\n{"x": 1}\n')
    with pytest.raises(ParseError, match="line 2"):
        replay_trace(bad)
