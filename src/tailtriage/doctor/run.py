"""Run every registered check over one capture."""

from __future__ import annotations

from collections.abc import Sequence

from tailtriage.analyses.results import SloSpec
from tailtriage.doctor.check import registered
from tailtriage.doctor.facts import build_facts
from tailtriage.doctor.fixes import instrument_command
from tailtriage.doctor.gap import DoctorResult, Gap
from tailtriage.model import Capture


def examine(
    capture: Capture,
    slos: Sequence[SloSpec],
    incident: tuple[float, float] | None = None,
) -> DoctorResult:
    """The telemetry gaps of ``capture`` for ``slos``.  ``incident`` is the window the SLO is
    judged on (its length sets how fine the scrape interval must be); without it the scrape
    check is skipped."""
    facts = build_facts(capture, slos, incident)
    gaps: list[Gap] = []
    skipped: list[str] = []
    for check in registered():
        if check.needs_spans and not facts.traces.spans_loaded and facts.traces.requests:
            skipped.append(check.name)  # requests came back without their spans
            continue
        gaps.extend(check.run(facts))
    return DoctorResult(
        slos=tuple(slos),
        gaps=tuple(gaps),
        not_checked=tuple(skipped),
        gateway=facts.gateway,
        engine=facts.engine,
        instrument_command=instrument_command(facts),
    )
