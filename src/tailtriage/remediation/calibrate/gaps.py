"""What a calibration could not read from the telemetry, and what it assumed instead.

A calibration never aborts on a deployment it does not recognise: a part the telemetry does
not show is kept at a stand-in, and a :class:`Gap` says which part, why it was not inferred,
what stands in for it and which telemetry would let the next calibration infer it.  The
gaps travel in ``FitQuality.gaps`` and are shown in the triage report beside the model error
(a low-confidence prediction usually has one of these behind it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gap:
    """One part of the deployment the calibration could not infer."""

    part: str  # a dotted simulator key (``engine.num_gpu_blocks``) or a part's name
    reason: str  # why the telemetry did not show it
    assumed: str  # what the replay uses instead
    telemetry: str  # what to export so the next calibration infers it

    def line(self) -> str:
        """One report line: ``part: not inferred (reason); assumed ...; export ... to fix``."""
        return (
            f"calibration: {self.part} not inferred ({self.reason}); "
            f"assumed {self.assumed}; to infer it export {self.telemetry}"
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "part": self.part,
            "reason": self.reason,
            "assumed": self.assumed,
            "telemetry": self.telemetry,
        }
