"""The Kubernetes HPA algorithm (autoscaling/v2) with KEDA-style activation, as a pure step.

Each sync (15 s by default) the controller reads the metric as last scraped (scrape lag
included), computes ``desired = ceil(current_total / target)`` (the per-pod average over
``target`` times the replicas: unready pods count as zero on scale-up, as the HPA does), skips
changes within the tolerance, applies the stabilization windows (the highest recommendation
of the scale-down window, the lowest of the scale-up window) and the rate policies
(``max(pods, percent)`` per period), and clamps to [min, max].  With ``min_replicas: 0`` it
scales from zero only when the metric total exceeds ``activation`` (KEDA).  With
``panic_window_s`` it is Knative's KPA: a burst that asks for ``panic_threshold`` x the ready
pods over the short window scales up at once, and no pod is removed until the burst has been
gone for the stable window (``metric_window_s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tailtriage.simulator.config import HpaConfig, ScalePolicy


@dataclass(frozen=True)
class HpaState:
    """What the controller remembers between syncs."""

    #: (time, recommendation) of recent syncs, for the stabilization windows
    recommendations: tuple[tuple[float, int], ...] = ()
    #: (time, replicas before, replicas after) of recent rescales, for the rate policies
    rescales: tuple[tuple[float, int, int], ...] = ()
    #: Knative KPA: when the panic last held (None: not panicking), and the most pods it
    #: asked for since it began (a panicking KPA never scales in)
    panic_at: float | None = None
    panic_pods: int = 0


def recommend(cfg: HpaConfig, current: int, metric_total: float, ready_pods: int) -> int:
    """The raw recommendation before stabilization and policies."""
    if current == 0:
        return max(cfg.min_replicas, 1) if metric_total > cfg.activation else 0
    if ready_pods == 0:
        return current  # no metrics yet: hold (the HPA skips pods without metrics)
    usage_ratio = metric_total / (cfg.target * ready_pods)
    if abs(usage_ratio - 1.0) <= cfg.tolerance:
        return current
    desired = math.ceil(metric_total / cfg.target - 1e-9)
    if desired < current and ready_pods < current:
        # scale-down while pods are still starting: the HPA counts them as at the target
        desired = math.ceil(
            (metric_total + (current - ready_pods) * cfg.target) / cfg.target - 1e-9
        )
    if desired == 0 and cfg.min_replicas == 0 and metric_total > cfg.activation:
        desired = 1
    return desired


def _limit(policy: ScalePolicy, base: int, up: bool) -> int:
    by_pct = math.ceil(base * policy.percent / 100.0) if up else int(base * policy.percent / 100.0)
    step = max(policy.pods, by_pct)
    return base + step if up else base - step


def _panic(
    cfg: HpaConfig, state: HpaState, now: float, panic_total: float | None, ready_pods: int
) -> tuple[float | None, int]:
    """The KPA's panic mode after this tick: (when it last held, the most pods it asked
    for), as Knative's autoscaler decides it (pkg/autoscaler/scaling/autoscaler.go)."""
    if panic_total is None or cfg.panic_window_s <= 0 or cfg.target <= 0:
        return None, 0
    want = math.ceil(panic_total / cfg.target - 1e-9)
    over = ready_pods > 0 and want / ready_pods >= cfg.panic_threshold
    at = state.panic_at
    if over:
        at = now  # begins, or goes on
    elif at is not None and now - at > cfg.metric_window_s:
        return None, 0  # the surge has reached the stable window: calm again
    return at, max(state.panic_pods, want) if at is not None else 0


def sync(
    cfg: HpaConfig,
    state: HpaState,
    now: float,
    current: int,
    metric_total: float,
    ready_pods: int,
    panic_total: float | None = None,
) -> tuple[int, HpaState]:
    """One controller sync: (new desired replicas, new state).  ``panic_total``: the metric
    over the panic window, for a KPA (``hpa.panic_window_s``)."""
    raw = recommend(cfg, current, metric_total, ready_pods)
    panic_at, panic_pods = _panic(cfg, state, now, panic_total, ready_pods)
    if panic_at is not None:
        raw = max(panic_pods, current)  # in panic: up at once, never in
    keep = max(cfg.scale_up.stabilization_s, cfg.scale_down.stabilization_s)
    recs = (*tuple(r for r in state.recommendations if now - r[0] < keep), (now, raw))
    desired = raw
    if raw > current:
        window = [r for t, r in recs if now - t <= cfg.scale_up.stabilization_s]
        desired = max(current, min(window)) if window else raw
        base = _replicas_period_ago(state, now, cfg.scale_up.period_s, current, up=True)
        desired = min(desired, _limit(cfg.scale_up, max(base, 1), up=True))
    elif raw < current:
        window = [r for t, r in recs if now - t <= cfg.scale_down.stabilization_s]
        desired = min(current, max(window)) if window else raw
        base = _replicas_period_ago(state, now, cfg.scale_down.period_s, current, up=False)
        desired = max(desired, _limit(cfg.scale_down, base, up=False))
    lo = cfg.min_replicas if not (cfg.min_replicas == 0 and desired == 0) else 0
    desired = min(max(desired, lo), cfg.max_replicas)
    rescales = tuple(r for r in state.rescales if now - r[0] < 600.0)
    if desired != current:
        rescales += ((now, current, desired),)
    return desired, HpaState(recs, rescales, panic_at, panic_pods)


def _replicas_period_ago(state: HpaState, now: float, period: float, current: int, up: bool) -> int:
    """Replicas at the start of the policy period: the limit counts from there."""
    base = current
    for t, before, _after in reversed(state.rescales):
        if now - t < period:
            base = min(base, before) if up else max(base, before)
    return base
