"""How long new replicas took to serve, and where that time went, from what a plain
Kubernetes cluster records (no Knative needed):

* image pull: the kubelet's ``Pulled`` event ("Successfully pulled image ... in 41.2s (41.2s
  including waiting)"), ``0`` for "already present on machine";
* weight loading and warm-up: container started -> ``Ready`` (pod conditions, the
  ``load_seconds`` of the ``cold_start`` row the Kubernetes source derives), with the
  readiness/startup-probe ``Unhealthy`` failures that mark it;
* the engine's own start-up where exported: vLLM's start-up spans
  (``vllm.engine_core.model_runner.load_model``, ``vllm.startup``) and ``sglang:engine_startup_time``.

Only pods that started from ``STARTUP_LEAD_S`` before the incident to its end count: they are the
capacity the incident waited for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import orjson

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext

#: vLLM start-up spans, whole start-up first (telemetry-conventions 1.1)
STARTUP_SPANS: Final = ("vllm.startup", "vllm.engine_core.model_runner.load_model")
STARTUP_METRICS: Final = ("sglang:engine_startup_time",)


@dataclass(frozen=True)
class Startup:
    pods: int  # pods with a start-up interval around the incident
    ready_s: float | None  # mean scheduled -> Ready
    pull_s: float | None  # mean image pull (0 for cached images)
    load_s: float | None  # mean container started -> Ready (weights, warm-up)
    probe_failures: int  # readiness / startup probe failures (event counts)
    engine_s: float | None  # engine start-up from its own spans or metric

    @property
    def seconds(self) -> float:
        """The best estimate of the time a new replica needs before it serves."""
        parts = [x for x in (self.ready_s, self.engine_s) if x is not None]
        if parts:
            return max(parts)
        return (self.pull_s or 0.0) + (self.load_s or 0.0)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def startup(ctx: DiagnosisContext) -> Startup:
    """The start-up of replicas around the incident (see module doc)."""
    if ctx.store is None:
        return Startup(0, None, None, None, 0, None)
    lo, hi = ctx.windows.incident[0] - T.STARTUP_LEAD_S, ctx.windows.incident[1]
    rows = ctx.store.query(
        "SELECT kind, duration, attributes FROM events WHERE time >= ? AND time <= ? "
        "AND kind IN ('image_pulled', 'cold_start', 'pod_unhealthy')",
        [lo, hi],
    ).to_pylist()
    ready: list[float] = []
    pull: list[float] = []
    load: list[float] = []
    probes = 0
    for r in rows:
        try:
            attrs = orjson.loads(r["attributes"] or "{}")
        except orjson.JSONDecodeError:
            attrs = {}
        attrs = attrs if isinstance(attrs, dict) else {}
        if r["kind"] == "image_pulled" and r["duration"] is not None:
            pull.append(float(r["duration"]))
        elif r["kind"] == "cold_start" and r["duration"] is not None:
            ready.append(float(r["duration"]))
            if isinstance(attrs.get("load_seconds"), int | float):
                load.append(float(attrs["load_seconds"]))
        elif r["kind"] == "pod_unhealthy" and attrs.get("probe") in ("readiness", "startup"):
            count = attrs.get("count")
            probes += int(count) if isinstance(count, int) else 1
    engine = _engine_startup(ctx, lo, hi)
    return Startup(len(ready), _mean(ready), _mean(pull), _mean(load), probes, engine)


def _engine_startup(ctx: DiagnosisContext, lo: float, hi: float) -> float | None:
    assert ctx.store is not None
    names = ", ".join(f"'{n}'" for n in STARTUP_SPANS)
    row = ctx.store.query(
        f'SELECT name, avg("end" - start) AS s FROM spans WHERE name IN ({names}) '
        "AND start >= ? AND start <= ? GROUP BY name",
        [lo, hi],
    ).to_pylist()
    by_name = {str(r["name"]): float(r["s"]) for r in row if r["s"] is not None}
    for name in STARTUP_SPANS:
        if name in by_name:
            return by_name[name]
    for metric in STARTUP_METRICS:
        if metric in ctx.signals.metric_names:
            got = ctx.store.query(
                "SELECT avg(value) AS s FROM series WHERE metric = ? AND time >= ? AND time <= ?",
                [metric, lo, hi],
            ).to_pylist()
            if got and got[0]["s"] is not None:
                return float(got[0]["s"])
    return None
