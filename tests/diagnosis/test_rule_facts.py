"""The facts several rules share (``diagnosis.facts``), each tested once here."""

from __future__ import annotations

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.facts import completions_lag, queue_grew
from tailtriage.diagnosis.signals import GaugeStats, WindowSignals


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
