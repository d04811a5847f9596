"""The replayed autoscaler must not scale out before the observed one (``calibrate.hpa_timing``):
a replay that holds more requests in flight per pod than the observation crosses a target set
just above the baseline's load minutes early, and its new pods serve when the observed ones
were still being scheduled."""

from __future__ import annotations

import dataclasses

import numpy as np

from builders import capture_from_arrays, make_events
from tailtriage.model import Capture
from tailtriage.remediation.calibrate.hpa_timing import (
    early_scale_up,
    first_scale_up,
    in_flight_per_pod,
)
from tailtriage.simulator.config import HpaConfig, PodsConfig, ScenarioConfig

T0 = 1_780_000_000.0
PODS = ("pod-a", "pod-b", "pod-c")


def _capture(e2e_s: float, rescale_at: float | None, keep: float = 1.0) -> Capture:
    """One request a second for 600 s over three pods, each in flight ``e2e_s``; a rescale
    3 -> 4 at ``rescale_at`` seconds; ``keep``: the share of requests traced."""
    n = 600
    rng = np.random.default_rng(1)
    kept = rng.uniform(size=n) < keep
    arrival = T0 + np.arange(n, dtype=float)[kept]
    cap = capture_from_arrays(
        arrival,
        {"prefill": np.full(len(arrival), 0.2), "decode": np.full(len(arrival), e2e_s - 0.2)},
        replica=[PODS[i % 3] for i in range(len(arrival))],
    )
    if rescale_at is None:
        return cap
    events = make_events(
        [(T0 + rescale_at, "hpa_rescale", {"replicas": 4})],
        object_kind="HorizontalPodAutoscaler",
        object_name="vllm",
    )
    return dataclasses.replace(cap, events=events)


def _config(
    metric: str = "concurrency", weights: tuple[float, ...] = (1, 1, 0, 0, 0)
) -> ScenarioConfig:
    return ScenarioConfig(
        start_unix_s=T0,
        hpa=HpaConfig(metric=metric, signal_weights=weights, target=4.0, min_replicas=3),
        pods=PodsConfig(initial_replicas=3),
    )


def test_requests_in_flight_per_pod_follow_littles_law_and_the_sampling() -> None:
    # one request a second, each 6 s in flight, over three pods: 2 per pod
    assert in_flight_per_pod(_capture(6.0, None), T0 + 60, T0 + 300, 1.0) == 2.0
    sampled = in_flight_per_pod(_capture(6.0, None, keep=0.3), T0 + 60, T0 + 300, 0.3)
    assert sampled is not None and abs(sampled - 2.0) < 0.3


def test_the_first_scale_up_is_the_first_rescale_past_the_initial_size() -> None:
    assert first_scale_up(_capture(6.0, 333.7), 3) == T0 + 333.7
    assert first_scale_up(_capture(6.0, 333.7), 4) is None  # 4 -> 4 is no scale-up
    assert first_scale_up(_capture(6.0, None), 3) is None


def test_a_replay_that_scales_out_early_on_more_in_flight_is_found() -> None:
    observed, replay = _capture(6.0, 333.7), _capture(9.0, 90.0)
    early = early_scale_up(observed, replay, _config())
    assert early is not None
    assert early.replay_s == 90.0 and early.observed_s is not None
    assert abs(early.ratio - 1.5) < 0.05  # 3 in flight per pod against 2


def test_an_observed_autoscaler_that_never_scaled_counts_as_late() -> None:
    early = early_scale_up(_capture(6.0, None), _capture(9.0, 90.0), _config())
    assert early is not None and early.observed_s is None


def test_no_correction_when_the_replay_decides_in_time_or_for_other_reasons() -> None:
    # the same minute as observed: jitter of the sync period
    assert early_scale_up(_capture(6.0, 120.0), _capture(9.0, 90.0), _config()) is None
    # early, but with no more in flight than observed: a burst drawn differently
    assert early_scale_up(_capture(6.0, 333.7), _capture(6.0, 90.0), _config()) is None
    # an autoscaler on queue depth or CPU reads another signal than requests in flight
    queue = _config("vllm:num_requests_waiting", ())
    assert early_scale_up(_capture(6.0, 333.7), _capture(9.0, 90.0), queue) is None
    assert early_scale_up(_capture(6.0, 333.7), _capture(9.0, 90.0), _config("cpu", ())) is None


def _kpa(window_s: float = 60.0, panic_s: float = 0.0) -> ScenarioConfig:
    """A KPA as calibrated: a stable window, and no scale-down delay."""
    cfg = _config()
    down = dataclasses.replace(cfg.hpa.scale_down, stabilization_s=0.0)
    hpa = dataclasses.replace(
        cfg.hpa, metric_window_s=window_s, panic_window_s=panic_s, scale_down=down
    )
    return dataclasses.replace(cfg, hpa=hpa)


def test_a_kpa_replay_whose_replicas_stray_from_the_observed_ones_is_off_track() -> None:
    """Observed: 3 -> 4 pods at 40 s, held; replayed: never scaled (a minute-long window
    averaging a jump away), a pod short for 560 of 600 s of ~4 pods."""
    from tailtriage.remediation.calibrate.hpa_timing import kpa_off_track, kpa_variants

    observed = _capture(6.0, 40.0)
    off = kpa_off_track(observed, _capture(6.0, None), _kpa(), 600.0)
    assert off is not None and off.observed > off.replay
    assert 0.2 < off.apart < 0.25
    # a pod short for 360 s of 600 is within the bar; on time; an autoscaler reading instant
    # values; panic mode on; an observed autoscaler that never scaled
    assert kpa_off_track(observed, _capture(6.0, 400.0), _kpa(), 600.0) is None
    assert kpa_off_track(observed, _capture(6.0, 45.0), _kpa(), 600.0) is None
    assert kpa_off_track(observed, _capture(6.0, None), _kpa(window_s=0.0), 600.0) is None
    assert kpa_off_track(observed, _capture(6.0, None), _kpa(panic_s=6.0), 600.0) is None
    assert kpa_off_track(_capture(6.0, None), _capture(6.0, 400.0), _kpa(), 600.0) is None
    short, held, both = (v.hpa for v in kpa_variants(_kpa()))
    assert short.metric_window_s < 60.0 and held.metric_window_s == 60.0
    assert held.scale_down.stabilization_s > 0 and short.scale_down.stabilization_s == 0
    assert both.metric_window_s == short.metric_window_s
    assert both.scale_down.stabilization_s == held.scale_down.stabilization_s
