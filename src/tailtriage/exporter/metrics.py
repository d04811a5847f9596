"""The exported series (``prometheus_client`` histograms in their own registry).

``tailtriage_stage_duration_seconds{stage, kind}`` holds every stage, ``kind`` being ``queue``
or ``execution``; ``tailtriage_ttft_seconds`` the time to first token.  Each sample carries
its trace id as an exemplar (exposed in the OpenMetrics format)."""

from __future__ import annotations

import re
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.openmetrics.exposition import generate_latest

from tailtriage.exporter.observations import TTFT, StageObservation, stage_kind

STAGE_METRIC: Final = "tailtriage_stage_duration_seconds"
TTFT_METRIC: Final = "tailtriage_ttft_seconds"
OBSERVED_METRIC: Final = "tailtriage_observations"  # _total: samples taken, by stage
#: 1 ms to 80 s: vLLM's TTFT buckets up to 80 s (telemetry-conventions 1.2), so queue and
#: execution series share bounds and a p95 of each is read at the same resolution
BUCKETS: Final = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                  5.0, 7.5, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
_TRACE_ID = re.compile(r"^[0-9a-f]{1,64}$")


class StageMetrics:
    """The exporter's registry; :meth:`observe` files one observation."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._stage = Histogram(
            STAGE_METRIC, "Time requests spent in each stage (kind: queue or execution).",
            ["stage", "kind"], buckets=BUCKETS, registry=self.registry,
        )  # fmt: skip
        self._ttft = Histogram(
            TTFT_METRIC, "Time to first token.", buckets=BUCKETS, registry=self.registry
        )
        self._count = Counter(
            OBSERVED_METRIC, "Observations filed, by stage.", ["stage"], registry=self.registry
        )

    def observe(self, obs: StageObservation) -> None:
        tid = (obs.trace_id or "").lower()
        exemplar = {"trace_id": tid} if _TRACE_ID.match(tid) else None
        if obs.stage == TTFT:
            self._ttft.observe(obs.seconds, exemplar=exemplar)
        else:
            hist = self._stage.labels(stage=obs.stage, kind=stage_kind(obs.stage))
            hist.observe(obs.seconds, exemplar=exemplar)
        self._count.labels(stage=obs.stage).inc()

    def openmetrics(self) -> bytes:
        """The registry in the OpenMetrics text format (exemplars included)."""
        return bytes(generate_latest(self.registry))  # type: ignore[no-untyped-call]
