"""When the replayed autoscaler decides: the replay must not scale out before the observed one.

The replayed HPA reads the simulator's own engine gauges.  Where the replay runs a little
slower than the observation (a few percent of step time is inside the fit's error), it holds
more requests in flight, and against a target set tight above the baseline's load (Knative's
concurrency target, an in-flight HPA) it crosses the line minutes before the observed
autoscaler did: the replay then has new pods serving when the observed ones were still being
scheduled, and every fix is predicted against capacity that did not exist (a cold start
missed by -60 %).

:func:`early_scale_up` finds that: the replay's first scale-up ``HPA_EARLY_S`` or more before
the observed one (or the observed HPA never scaled), with more requests in flight per pod in
the replay than in the observation over the stretch before the replay's decision (Little's law
over the request timelines: the replays record no metric series, and the signal is the same
on both sides).  Only for an autoscaler on requests in flight, whose signal that is.  The target
scaled by that ratio keeps the HPA's trigger where the observed load put it; the calibration
keeps it only when it replays the observation better.

The other way, :func:`kpa_off_track`: a Knative KPA replayed with config-autoscaler's defaults
(a 60 s stable window, scale-down as soon as the window's average falls) can keep a replica
count far from the observed one - scaling out tens of seconds late when the load jumps, in
late when the observed KPA held its pods for minutes.  Both are per-revision settings
(``autoscaling.knative.dev/window``, 6 s to 1 h; ``scale-down-delay``, up to 1 h), so where
the replayed replica count strays from the observed one by REPLICAS_APART on average, a
shorter window, a held scale-down and both are replayed, each kept only when it replays the
observation better."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tailtriage.model import Capture
from tailtriage.remediation.calibrate.infer import rescale_events
from tailtriage.simulator.config import HPA_SIGNALS, ScenarioConfig

#: a replayed first scale-up this much earlier than the observed one is a different decision,
#: not the sync period's jitter (four 15 s syncs)
HPA_EARLY_S = 60.0
#: the replayed replica count strays from the observed one by this share of the observed
#: count on average over the capture: a different autoscaler, not a sync period's jitter
REPLICAS_APART = 0.2
#: the shorter stable window tried, as a share of the fitted one (60 s: 15 s)
WINDOW_SHARE = 0.25
#: the scale-down hold tried (s): an HPA's default down-stabilization, which a scale-down
#: delay on the revision gives a KPA too
SCALE_DOWN_HOLD_S = 300.0
#: the replay's signal must exceed the observation's by this ratio before the target moves:
#: below it the early decision is not the signal's level (a burst the replay drew differently)
SIGNAL_RATIO_MIN = 1.05


@dataclass(frozen=True)
class EarlyScaleUp:
    """The replay's first scale-up against the observed one, and the HPA signal before it."""

    replay_s: float  # seconds after the capture's start
    observed_s: float | None  # None: the observed HPA never scaled out
    replay_signal: float
    observed_signal: float

    @property
    def ratio(self) -> float:
        return self.replay_signal / self.observed_signal


def first_scale_up(capture: Capture, initial: int) -> float | None:
    """Unix time of the first rescale event that grew the deployment past ``initial`` (or past
    its previous size where the event names it)."""
    last = initial
    for t, size, named in rescale_events(capture):
        if size > (named or last):
            return t
        last = size
    return None


def _reads_in_flight(config: ScenarioConfig) -> bool:
    """The HPA's per-pod signal is requests in flight: running and waiting weighed alike (the
    KPA's concurrency, an in-flight HPA) or running alone (at a baseline nothing waits)."""
    h = config.hpa
    if h.signal_weights:
        w = tuple(h.signal_weights) + (0.0,) * (len(HPA_SIGNALS) - len(h.signal_weights))
        waiting, running, kv, gpu = w[:4]
        return running > 0 and waiting in (0.0, running) and kv == 0.0 and gpu == 0.0
    return h.metric == "vllm:num_requests_running"


def in_flight_per_pod(capture: Capture, lo: float, hi: float, share: float) -> float | None:
    """Requests in flight per serving pod over ``[lo, hi)``, by Little's law over the request
    timelines (each request's time inside the window, summed, over its length and the pods
    that served in it); ``share``: the fraction of requests the capture holds (sampling)."""
    r = capture.requests
    if r.num_rows == 0 or hi <= lo or share <= 0:
        return None
    arrival = np.asarray(r["arrival"].to_numpy(zero_copy_only=False), dtype=float)
    e2e = np.asarray(r["e2e"].to_numpy(zero_copy_only=False), dtype=float)
    replica = np.asarray(r["replica"].to_pylist(), dtype=object)
    end = np.where(np.isnan(e2e), hi, arrival + e2e)
    inside = np.clip(np.minimum(end, hi) - np.maximum(arrival, lo), 0.0, None)
    served = inside > 0
    pods = {p for p in replica[served] if p}
    if not pods:
        return None
    return float(inside[served].sum()) / share / (hi - lo) / len(pods)


def early_scale_up(
    capture: Capture, replay: Capture, config: ScenarioConfig, share: float = 1.0
) -> EarlyScaleUp | None:
    """The replay's autoscaler, on requests in flight, scaled out ``HPA_EARLY_S`` before the
    observed one with more in flight per pod than observed before then; else None.
    ``share``: the fraction of the requests the observed capture's traces hold."""
    if not config.hpa.enabled or not _reads_in_flight(config):
        return None
    initial = config.pods.initial_replicas
    rep = first_scale_up(replay, initial)
    if rep is None:
        return None
    obs = first_scale_up(capture, initial)
    if obs is not None and rep > obs - HPA_EARLY_S:
        return None
    lo = config.start_unix_s
    ours = in_flight_per_pod(replay, lo, rep, 1.0)
    theirs = in_flight_per_pod(capture, lo, rep, share)
    if ours is None or theirs is None or theirs <= 0 or ours < SIGNAL_RATIO_MIN * theirs:
        return None
    return EarlyScaleUp(rep - lo, None if obs is None else obs - lo, ours, theirs)


def with_target_scaled(config: ScenarioConfig, factor: float) -> ScenarioConfig:
    return replace(config, hpa=replace(config.hpa, target=config.hpa.target * factor))


@dataclass(frozen=True)
class OffTrack:
    """Observed and replayed replicas, each averaged over the capture."""

    observed: float
    replay: float
    apart: float  # mean |replay - observed| over the observed mean


def replica_track(
    events: tuple[tuple[float, int, int | None], ...], initial: int, start: float, span: float
) -> Any:
    """The replica count the autoscaler set (its rescale ``events``) at each second of
    ``[start, start + span)``."""
    t = start + np.arange(0.0, max(span, 1.0))
    size = np.full(t.size, float(initial))
    for when, n, _ in events:
        size[t >= when] = n
    return size


def kpa_off_track(
    capture: Capture, replay: Capture, config: ScenarioConfig, span: float
) -> OffTrack | None:
    """The replayed KPA (a stable-window average, no panic mode) kept a replica count
    REPLICAS_APART or more from the observed one over the ``span`` seconds; else None."""
    h = config.hpa
    if not h.enabled or h.metric_window_s <= 0 or h.panic_window_s > 0:
        return None
    observed = rescale_events(capture)
    if not observed:
        return None
    lo, initial = config.start_unix_s, config.pods.initial_replicas
    obs = replica_track(observed, initial, lo, span)
    rep = replica_track(rescale_events(replay), initial, lo, span)
    apart = float(np.mean(np.abs(rep - obs)) / max(float(np.mean(obs)), 1.0))
    if apart < REPLICAS_APART:
        return None
    return OffTrack(float(np.mean(obs)), float(np.mean(rep)), apart)


def kpa_variants(config: ScenarioConfig) -> list[ScenarioConfig]:
    """A shorter stable window, a held scale-down, and both."""
    h = config.hpa
    short = replace(h, metric_window_s=WINDOW_SHARE * h.metric_window_s)
    down = replace(
        h.scale_down, stabilization_s=max(h.scale_down.stabilization_s, SCALE_DOWN_HOLD_S)
    )
    return [
        replace(config, hpa=short),
        replace(config, hpa=replace(h, scale_down=down)),
        replace(config, hpa=replace(short, scale_down=down)),
    ]
