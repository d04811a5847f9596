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
keeps it only when it replays the observation better."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tailtriage.model import Capture
from tailtriage.remediation.calibrate.infer import rescale_events
from tailtriage.simulator.config import HPA_SIGNALS, ScenarioConfig

#: a replayed first scale-up this much earlier than the observed one is a different decision,
#: not the sync period's jitter (four 15 s syncs)
HPA_EARLY_S = 60.0
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
