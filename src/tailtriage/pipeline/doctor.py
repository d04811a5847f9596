"""Capture -> DoctorResult: the telemetry gaps that keep a capture from being triaged.

    result = doctor(load_capture("bundle/"), "p95 ttft < 500ms")

The incident window (the analysis' own detection, or the one given) sets how fine the metric
scrape interval must be; a capture without requests is judged over its whole time range."""

from __future__ import annotations

from collections.abc import Sequence

from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.slo import parse_slos
from tailtriage.doctor import DoctorResult, examine
from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze


def doctor(
    capture: Capture,
    slos: Sequence[SloSpec] | str,
    *,
    incident: tuple[float, float] | None = None,
) -> DoctorResult:
    """Every telemetry gap of ``capture`` and whether ``slos`` can be triaged from it."""
    specs = parse_slos(slos) if isinstance(slos, str) else tuple(slos)
    if incident is None and capture.requests.num_rows:
        windows = analyze(capture, specs).windows
        incident = windows.incident if windows is not None else None
    return examine(capture, specs, incident or capture.time_range)
