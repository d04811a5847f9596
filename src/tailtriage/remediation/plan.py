"""From ranked findings to ranked remediations with predicted effects.

Every candidate of the catalog is replayed on the calibrated simulator (through a
:class:`Predictor`, which the pipeline builds from ``remediation.whatif``).  Where the top
findings need different fixes, their best candidates are also evaluated together as one
``combined`` remediation: the worked example needs two fixes at once.  Remediations are ranked
by whether every SLO is predicted to hold, then by the worst predicted percentile relative to
its threshold, then by throughput kept."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from tailtriage.analyses.results import SloSpec
from tailtriage.diagnosis import DiagnosisContext, Finding
from tailtriage.remediation.actions import Remediation
from tailtriage.remediation.catalog import Candidate, candidates_for
from tailtriage.remediation.configs import Target

THROUGHPUT = "throughput_change_pct"


class Predictor(Protocol):
    """A calibrated model of the user's stack."""

    def current(self, key: str) -> Any:
        """The calibrated value of a dotted simulator key (None when unknown)."""
        ...

    def predict(self, overrides: Mapping[str, Any]) -> Mapping[str, float]:
        """``{"<metric>_p<N>": seconds for every SLO, "throughput_change_pct": pct}``."""
        ...


@dataclass(frozen=True)
class _Scored:
    candidate: Candidate
    predicted: Mapping[str, float]
    finding_rank: int

    def key(self, slos: Sequence[SloSpec]) -> tuple[int, float, float, int]:
        if not self.predicted:
            return (2, float("inf"), 0.0, self.finding_rank)
        worst = worst_ratio(self.predicted, slos)
        loss = max(-self.predicted.get(THROUGHPUT, 0.0), 0.0)
        # latency first; a fix that costs much throughput to get there ranks lower
        cost = 1.0 + loss / 100.0 + self.candidate.risk
        return (0 if worst <= 1.0 else 1, worst * cost, loss, self.finding_rank)


def slo_key(spec: SloSpec) -> str:
    return f"{spec.metric}_p{spec.percentile:g}"


def worst_ratio(predicted: Mapping[str, float], slos: Sequence[SloSpec]) -> float:
    """The largest predicted/threshold over the SLOs (<= 1: every SLO holds)."""
    ratios = [
        predicted[slo_key(s)] / s.threshold
        for s in slos
        if slo_key(s) in predicted and s.threshold > 0
    ]
    return max(ratios) if ratios else float("inf")


def overrides_of(rem: Remediation) -> dict[str, Any]:
    """The simulator overrides of a remediation (dotted keys only, ``combined`` list dropped)."""
    return {k: v for k, v in rem.parameters.items() if "." in k}


def plan(
    ctx: DiagnosisContext,
    findings: Sequence[Finding],
    predictor: Predictor | None,
    *,
    target: Target | None = None,
    max_findings: int = 3,
    max_runs: int = 8,
) -> tuple[Remediation, ...]:
    """Remediations for the top findings, predicted and ranked (best first)."""
    slos = tuple(s.spec for s in ctx.slos)
    actionable = [f for f in findings if f.category != "insufficient_telemetry"][:max_findings]
    if not actionable:
        return ()
    tgt = target or Target()

    def current(key: str) -> Any:
        return predictor.current(key) if predictor is not None else None

    proposals: dict[tuple[tuple[str, str], ...], tuple[Candidate, int]] = {}
    for rank, f in enumerate(actionable):
        for c in candidates_for(ctx, [f], current, tgt):
            key = tuple(sorted((k, repr(v)) for k, v in c.parameters.items()))
            if key in proposals:  # one change that addresses several findings: run it once
                first, r = proposals[key]
                merged = tuple(dict.fromkeys((*first.addresses, *c.addresses)))
                proposals[key] = (replace(first, addresses=merged), r)
            else:
                proposals[key] = (c, rank)
    # each what-if replays the whole capture: spend the budget round-robin over the findings
    # (first proposal of each, then the second of each, ...) so every top finding is tried
    budget = max_runs - 1 if predictor is not None else len(proposals)
    nth: dict[int, int] = {}
    keyed: list[tuple[int, int, Candidate]] = []
    for c, rank in proposals.values():
        keyed.append((nth.get(rank, 0), rank, c))
        nth[rank] = nth.get(rank, 0) + 1
    scored: list[_Scored] = []
    for _, rank, c in sorted(keyed, key=lambda k: (k[0], k[1])):
        if predictor is not None and len(scored) >= budget:
            break
        pred = dict(predictor.predict(c.parameters)) if predictor is not None else {}
        scored.append(_Scored(c, pred, rank))
    scored = _best_direction(scored, slos)
    combined = _combine(scored, predictor, slos)
    if combined is not None:
        scored.append(combined)
    scored.sort(key=lambda s: s.key(slos))
    return tuple(_to_remediation(s, slos) for s in scored)


def _best_direction(scored: list[_Scored], slos: Sequence[SloSpec]) -> list[_Scored]:
    """Of the candidates that move one knob both ways, keep the direction predicted better."""
    best: dict[tuple[str, str], _Scored] = {}
    rest = []
    for s in scored:
        if s.candidate.action not in ("max_num_batched_tokens",) or not s.predicted:
            rest.append(s)
            continue
        k = (s.candidate.action, s.candidate.addresses[0])
        if k not in best or s.key(slos) < best[k].key(slos):
            best[k] = s
    return rest + list(best.values())


def _combine(
    scored: list[_Scored], predictor: Predictor | None, slos: Sequence[SloSpec]
) -> _Scored | None:
    """The best candidate of each of the top findings, applied together."""
    if predictor is None:
        return None
    parts: list[_Scored] = []
    keys: set[str] = set()
    for rank in sorted({s.finding_rank for s in scored}):
        mine = sorted((s for s in scored if s.finding_rank == rank), key=lambda s: s.key(slos))
        for s in mine:
            if s.candidate.action == "replicas":
                continue
            if keys.isdisjoint(s.candidate.parameters) and all(
                p.candidate.action != s.candidate.action for p in parts
            ):
                parts.append(s)
                keys |= set(s.candidate.parameters)
                break
        if len(parts) == 3:
            break
    if len(parts) < 2:
        return None
    params: dict[str, Any] = {}
    for p in parts:
        params.update(p.candidate.parameters)
    pred = dict(predictor.predict(params))
    actions = [p.candidate.action for p in parts]
    cand = Candidate(
        "combined",
        tuple(dict.fromkeys(a for p in parts for a in p.candidate.addresses)),
        "Apply together: " + " + ".join(p.candidate.summary.rstrip(".") for p in parts) + ".",
        {**params, "combined": actions},
        "\n---\n".join(p.candidate.config.strip() for p in parts if p.candidate.config) + "\n",
        tuple(dict.fromkeys(c for p in parts for c in p.candidate.caveats)),
        larger_batch=any(p.candidate.larger_batch for p in parts),
        risk=max(p.candidate.risk for p in parts),
    )
    return _Scored(cand, pred, 0)


def _to_remediation(s: _Scored, slos: Sequence[SloSpec]) -> Remediation:
    c = s.candidate
    caveats = list(c.caveats)
    if c.larger_batch:
        ttft = [slo_key(x) for x in slos if x.metric == "ttft"]
        if ttft and ttft[0] in s.predicted:
            caveats.append(
                f"Predicted TTFT with the larger batch: p{ttft[0].split('_p')[1]} "
                f"{s.predicted[ttft[0]] * 1000:.0f} ms."
            )
    if s.predicted and worst_ratio(s.predicted, slos) > 1.0:
        caveats.append("Predicted not to meet every SLO on its own.")
    return Remediation(
        action=c.action,
        addresses=c.addresses,
        summary=c.summary,
        parameters=dict(c.parameters),
        predicted=dict(s.predicted),
        config=c.config,
        caveats=tuple(caveats),
    )
