"""What the exporter observes: one stage duration of one request, with its trace id.

A capture yields them (:func:`capture_observations`); a live source (an OTLP receiver) only
has to implement :class:`ObservationSource`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import numpy as np

from tailtriage.model.capture import Capture

#: stages whose time is waiting for a resource rather than work on it
QUEUE_STAGES: Final = frozenset({"gateway_queue", "pending", "engine_queue"})
#: the stages exported, in request order (design 2: the stage vocabulary, KV transfer included)
EXPORTED_STAGES: Final = (
    "gateway_queue", "pending", "api_server", "engine_queue", "prefill", "kv_transfer", "decode",
)  # fmt: skip
TTFT: Final = "ttft"


def stage_kind(stage: str) -> str:
    return "queue" if stage in QUEUE_STAGES else "execution"


@dataclass(frozen=True, slots=True)
class StageObservation:
    """``seconds`` spent in ``stage`` (or ``ttft``) by one request, known at ``time``."""

    time: float  # unix seconds the stage ended
    stage: str
    seconds: float
    trace_id: str | None = None


@runtime_checkable
class ObservationSource(Protocol):
    """Anything that yields observations in time order: a capture, a live receiver."""

    def observations(self) -> Iterator[StageObservation]: ...


@dataclass(frozen=True, slots=True)
class CaptureSource:
    """The stages and TTFTs of a capture's requests, in the order they ended."""

    capture: Capture

    def observations(self) -> Iterator[StageObservation]:
        yield from capture_observations(self.capture)


def capture_observations(capture: Capture) -> list[StageObservation]:
    """Every exported stage and every TTFT of ``capture``, sorted by the time it ended;
    stages outside :data:`EXPORTED_STAGES` and negative durations are left out."""
    req = capture.requests
    trace = dict(zip(req["request_id"].to_pylist(), req["trace_id"].to_pylist(), strict=True))
    out: list[StageObservation] = []
    st = capture.stages
    for rid, stage, start, duration in zip(
        st["request_id"].to_pylist(), st["stage"].to_pylist(),
        st["start"].to_pylist(), st["duration"].to_pylist(), strict=True,
    ):  # fmt: skip
        if stage in EXPORTED_STAGES and duration is not None and duration >= 0:
            out.append(StageObservation(start + duration, stage, duration, trace.get(rid)))
    ttft = np.asarray(req["ttft"].to_numpy(zero_copy_only=False), dtype=np.float64)
    arrival = req["arrival"].to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(np.isfinite(ttft) & (ttft >= 0)):
        tid = req["trace_id"][int(i)].as_py()
        out.append(StageObservation(float(arrival[i] + ttft[i]), TTFT, float(ttft[i]), tid))
    out.sort(key=lambda o: o.time)
    return out
