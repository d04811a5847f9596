"""Facts several rules test, each written once: the engine queue grew, completions fell
behind arrivals, replicas were asked for and not ready.  Their thresholds are in
``diagnosis.thresholds``."""

from __future__ import annotations

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.signals import GaugeStats, Signals, WindowSignals


def queue_grew(q: GaugeStats | None, min_mean: float) -> bool:
    """The queue rose over the window, or stood at ``min_mean`` requests or more on average."""
    return q is not None and (q.slope > 0 or q.mean >= min_mean)


def completions_lag(w: WindowSignals) -> bool:
    """Fewer requests completed than arrived (by more than the noise of a window's edges)."""
    return w.completion_rps < T.COMPLETION_LAG_RATIO * w.arrival_rps


def desired_gap(sig: Signals) -> float | None:
    """Desired minus current replicas, averaged over the incident (None without both)."""
    d, c = sig.incident.gauge("hpa_desired"), sig.incident.gauge("hpa_current")
    if d is None or c is None:
        return None
    return d.mean - c.mean


def replicas_short(sig: Signals) -> bool:
    """The autoscaler asked for more replicas than were ready, on average over the incident."""
    return (desired_gap(sig) or 0.0) >= T.DESIRED_GAP_MIN
