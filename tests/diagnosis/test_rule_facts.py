"""The facts several rules share (``diagnosis.facts``), each tested once here."""

from __future__ import annotations

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.facts import (
    completions_lag,
    demand_per_request_grew,
    load_grew,
    load_per_replica_grew,
    outputs_grew,
    preempting,
    prompt_mix_shift,
    prompts_overload,
    queue_grew,
)
from tailtriage.diagnosis.signals import GaugeStats, ReplicaStats, Signals, WindowSignals


def _queue(mean: float, slope: float) -> GaugeStats:
    return GaugeStats("vllm:num_requests_waiting", mean, mean, mean, mean, slope, 10)


def test_a_queue_grew_when_it_rose_or_stood_high() -> None:
    assert queue_grew(_queue(0.5, 0.01), T.SATURATION_QUEUE_MEAN)  # rising, however short
    assert queue_grew(_queue(T.SATURATION_QUEUE_MEAN, -0.2), T.SATURATION_QUEUE_MEAN)
    assert not queue_grew(_queue(T.SATURATION_QUEUE_MEAN - 0.5, 0.0), T.SATURATION_QUEUE_MEAN)
    assert queue_grew(_queue(T.CAPACITY_QUEUE_MEAN, 0.0), T.CAPACITY_QUEUE_MEAN)
    assert not queue_grew(None, T.CAPACITY_QUEUE_MEAN)


def test_completions_lag_only_beyond_the_edge_noise() -> None:
    def w(done: float) -> WindowSignals:
        return WindowSignals(0.0, 60.0, arrival_rps=20.0, completion_rps=done)

    assert completions_lag(w(15.0))
    assert not completions_lag(w(19.9))  # half a percent: requests in flight at the edges
    assert not completions_lag(w(20.0))


def _window(
    rps: float, replicas: int, prompt: float, output: float, median: float
) -> WindowSignals:
    return WindowSignals(
        0.0,
        300.0,
        arrival_rps=rps,
        prompt_tokens_mean=prompt,
        output_tokens_mean=output,
        prompt_tokens_median=median,
        replicas={f"pod-{i}": ReplicaStats(10, None) for i in range(replicas)},
    )


def test_load_per_replica_and_demand_per_request_are_told_apart() -> None:
    base = _window(10.0, 4, 500.0, 200.0, 450.0)
    # twice the arrivals on the same four replicas, requests as heavy as before
    more = Signals(_window(20.0, 4, 510.0, 190.0, 460.0), base)
    assert load_per_replica_grew(more) is True
    assert demand_per_request_grew(more) is False
    # the same arrivals spread over twice the replicas: no more load per replica
    spread = Signals(_window(20.0, 8, 500.0, 200.0, 450.0), base)
    assert load_per_replica_grew(spread) is False
    # three-times longer prompts at the baseline's rate: heavier requests, not more of them
    heavier = Signals(_window(10.0, 4, 1500.0, 200.0, 1400.0), base)
    assert demand_per_request_grew(heavier) is True
    assert load_per_replica_grew(heavier) is False
    assert load_per_replica_grew(Signals(base, None)) is None


def test_a_long_prompt_minority_moves_the_mean_not_the_median() -> None:
    base = _window(10.0, 4, 500.0, 200.0, 450.0)
    # 15 % of requests at 10k tokens: the mean quadruples, the typical prompt does not move
    minority = Signals(_window(10.0, 4, 0.85 * 500 + 0.15 * 10000, 200.0, 460.0), base)
    assert (minority.incident.prompt_tokens_mean or 0) >= 3 * 500
    shift = prompt_mix_shift(minority)
    assert shift is not None and shift < T.PROMPT_SHIFT
    mix = Signals(_window(10.0, 4, 2500.0, 200.0, 2300.0), base)
    shift = prompt_mix_shift(mix)
    assert shift is not None and shift >= T.PROMPT_SHIFT


def test_prompts_overload_needs_the_whole_mix_longer_at_the_same_load() -> None:
    base = _window(10.0, 4, 500.0, 200.0, 450.0)
    # every prompt 2.5x longer at the baseline's arrivals per replica
    assert prompts_overload(Signals(_window(10.0, 4, 1250.0, 200.0, 1125.0), base))
    # a long minority (the median stays): interference's, not an overload of the mix
    assert not prompts_overload(Signals(_window(10.0, 4, 1250.0, 200.0, 470.0), base))
    # longer prompts and twice the arrivals per replica: the fleet is short too
    assert not prompts_overload(Signals(_window(20.0, 4, 1250.0, 200.0, 1125.0), base))
    # without a median (no token counts), nothing is claimed
    assert not prompts_overload(Signals(_window(10.0, 4, 1250.0, 200.0, 0.0), base))


def _evicting(preemptions: float, rps: float, replicas: int) -> Signals:
    kv = GaugeStats(
        "vllm:kv_cache_usage_perc",
        0.5,
        0.99,
        0.4,
        0.6,
        0.0,
        20,
        per_replica_samples={f"pod-{i}": 20 for i in range(replicas)},
    )
    w = WindowSignals(
        0.0,
        300.0,
        arrival_rps=rps,
        gauges={"kv_usage": kv},
        counters={"preemptions": preemptions},
    )
    return Signals(w, None)


def test_preempting_takes_evictions_per_request_and_per_replica() -> None:
    assert preempting(_evicting(60.0, 2.0, 4))  # 10 % of 600 requests, 15 per replica
    assert not preempting(_evicting(0.0, 2.0, 4))
    # two evictions on a fleet of eight serving 600 requests: one long sequence, once
    assert not preempting(_evicting(2.0, 2.0, 8))
    # one per replica but far under one in a hundred requests: a busy fleet's background
    assert not preempting(_evicting(8.0, 20.0, 8))


def test_fleet_arrivals_stand_in_for_per_replica_load_without_replica_counts() -> None:
    base = WindowSignals(0.0, 300.0, arrival_rps=4.0)
    assert load_grew(Signals(WindowSignals(0.0, 300.0, arrival_rps=8.0), base)) is True
    assert load_grew(Signals(WindowSignals(0.0, 300.0, arrival_rps=4.4), base)) is False
    assert load_grew(Signals(base, None)) is None


def test_outputs_grew_only_when_prompts_did_not() -> None:
    base = _window(10.0, 4, 500.0, 200.0, 450.0)
    assert outputs_grew(Signals(_window(10.0, 4, 510.0, 700.0, 460.0), base)) is True
    assert outputs_grew(Signals(_window(10.0, 4, 1500.0, 700.0, 1400.0), base)) is False
    assert outputs_grew(Signals(_window(10.0, 4, 510.0, 210.0, 460.0), base)) is False
    assert outputs_grew(Signals(base, None)) is None
