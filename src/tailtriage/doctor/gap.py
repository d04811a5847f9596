"""A telemetry gap: what is missing, what it leaves undecidable, the fix and its cost."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tailtriage.analyses.results import SloSpec


@dataclass(frozen=True)
class Gap:
    """One thing the stack does not record that triage needs.

    ``undecidable`` names stages (design 3.1) and root-cause categories (design 3.2) that
    cannot be told apart without it; ``metrics`` are the SLO metrics (ttft, itl, tpot, e2e)
    whose triage it limits: a gap with no metrics is advice, it never blocks."""

    check: str  # registry name of the check that found it
    what: str  # what is missing, one line
    undecidable: tuple[str, ...]
    fix: str  # one line, naming the `tailtriage instrument` file that closes it
    cost: str  # overhead at run time and effort to apply
    metrics: frozenset[str] = frozenset()
    evidence: str = ""  # the numbers that show it

    def __post_init__(self) -> None:
        # a stage and a category may share a name (gateway_queue): list each once
        object.__setattr__(self, "undecidable", tuple(dict.fromkeys(self.undecidable)))

    def limits(self, slos: Sequence[SloSpec]) -> bool:
        """Whether this gap keeps any of ``slos`` from being triaged."""
        return any(s.metric in self.metrics for s in slos)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "what": self.what,
            "undecidable": list(self.undecidable),
            "fix": self.fix,
            "cost": self.cost,
            "metrics": sorted(self.metrics),
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Gap:
        """The inverse of :meth:`to_dict` (extra keys, such as ``blocking``, are ignored)."""
        return cls(
            check=str(d["check"]),
            what=str(d["what"]),
            undecidable=tuple(str(u) for u in d.get("undecidable") or ()),
            fix=str(d["fix"]),
            cost=str(d["cost"]),
            metrics=frozenset(str(m) for m in d.get("metrics") or ()),
            evidence=str(d.get("evidence", "")),
        )


@dataclass(frozen=True)
class DoctorResult:
    """Every gap found, and whether the stack can be triaged for the given SLOs."""

    slos: tuple[SloSpec, ...]
    gaps: tuple[Gap, ...]
    #: checks that could not run on this input (e.g. span checks over a ClickHouse push-down)
    not_checked: tuple[str, ...] = ()
    #: the gateway and engine the telemetry shows (feed the `instrument` command line)
    gateway: str | None = None
    engine: str | None = None
    instrument_command: str = ""

    @property
    def blocking(self) -> tuple[Gap, ...]:
        """The gaps that limit triage of the given SLOs, in check order."""
        return tuple(g for g in self.gaps if g.limits(self.slos))

    @property
    def triage_ready(self) -> bool:
        return not self.blocking

    def to_dict(self) -> dict[str, Any]:
        return {
            "triage_ready": self.triage_ready,
            "slos": [str(s) for s in self.slos],
            "gaps": [g.to_dict() | {"blocking": g.limits(self.slos)} for g in self.gaps],
            "not_checked": list(self.not_checked),
            "gateway": self.gateway,
            "engine": self.engine,
            "instrument_command": self.instrument_command,
        }
