"""From ranked findings to ranked remediations with predicted effects.

Every candidate of the catalog is replayed on the calibrated simulator (through a
:class:`Predictor`, which the pipeline builds from ``remediation.whatif``).  Where the top
findings need different fixes, their best candidates are also evaluated together as one
``combined`` remediation: the worked example needs two fixes at once.  Remediations are ranked
by whether every SLO is predicted to hold, then by the worst predicted percentile relative to
its threshold, then by throughput kept.

A prediction is only as good as the model behind it.  The predictor may report, per SLO, the
calibrated model's own error (``forecast.ModelFacts``, see ``whatif.Prediction.forecast``):
predictions from a model that misses the observation by more than the tolerance are marked
``low_confidence`` and ranked after the confident ones, in finding order, not by their value;
a change predicted to make an SLO percentile worse than observed (and above its threshold) is
never recommended: ``recommended=False``, ranked last, with a caveat saying why.  Nor is a fix
that comes back without a prediction (the what-if failed, or the simulator cannot model it),
or whose replay equals the calibrated baseline (``Forecast.inert``: the model predicts no
effect, e.g. FP8 weights on a step time fitted without the model's shape): it is ranked
after every fix predicted to change something, so it can never be the headline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from tailtriage.analyses.results import SloSpec
from tailtriage.diagnosis import DiagnosisContext, Finding, saturation_proof
from tailtriage.remediation.actions import Remediation
from tailtriage.remediation.catalog import Candidate, candidates_for
from tailtriage.remediation.configs import Target
from tailtriage.remediation.forecast import OBSERVED_CONFIDENCE, THROUGHPUT, Forecast, ModelFacts

#: actions that change the model's outputs: never recommended on latency alone, only with an
#: accuracy verdict from `tailtriage quantgate` or the user's say-so (``accuracy_accepted``)
ACCURACY_GATED = frozenset({"quantization", "kv_cache_dtype"})
ACCURACY_GATE_CAVEAT = (
    "Not recommended until `tailtriage quantgate` passes your accuracy budget on your own "
    "evaluation set (or you accept the accuracy risk)."
)


class Predictor(Protocol):
    """A calibrated model of the user's stack."""

    def current(self, key: str) -> Any:
        """The calibrated value of a dotted simulator key (None when unknown)."""
        ...

    def predict(self, overrides: Mapping[str, Any]) -> Forecast | None:
        """The predicted percentile of every SLO (keyed ``<metric>_p<N>``) and the throughput
        change, optionally with the model's facts about each; None when the run failed."""
        ...


@runtime_checkable
class BatchPredictor(Predictor, Protocol):
    """A predictor that can run several predictions' work at once, ahead of asking for them."""

    def prefetch(self, overrides: Sequence[Mapping[str, Any]]) -> None:
        """Prepare the predictions of ``overrides`` (each then answered by :meth:`predict`
        exactly as without this call)."""
        ...


@dataclass(frozen=True)
class _Scored:
    candidate: Candidate
    predicted: Mapping[str, float]
    finding_rank: int
    #: the predictor's whole answer (values and the model's facts about them)
    forecast: Forecast | None = None
    observed: Mapping[str, float] = field(default_factory=dict)  # from the analysis, seconds
    #: guardrail: adds GPUs while compute saturation is not proven (ranked after every other)
    blocked: bool = False
    #: a model was there to predict it, and no prediction came back (ranked after every
    #: predicted fix, never recommended)
    unpredicted: bool = False

    @classmethod
    def of(
        cls,
        candidate: Candidate,
        answer: Forecast | None,
        rank: int,
        observed: Mapping[str, float],
        saturated: bool = False,
        predicting: bool = False,
    ) -> _Scored:
        pred = {} if answer is None else answer.predicted()
        blocked = candidate.adds_capacity and not saturated
        return cls(candidate, pred, rank, answer, observed, blocked, predicting and not pred)

    def facts(self, key: str) -> ModelFacts | None:
        return None if self.forecast is None else self.forecast.facts(key)

    @property
    def low_confidence(self) -> bool:
        return self.forecast is not None and self.forecast.low_confidence

    @property
    def inert(self) -> bool:
        """The model predicts no effect at all: nothing to recommend it by."""
        return self.forecast is not None and self.forecast.inert

    def worse(self, slos: Sequence[SloSpec]) -> list[str]:
        """SLO keys predicted worse than observed and above their threshold."""
        out = []
        for s in slos:
            k = slo_key(s)
            facts = self.facts(k)
            observed = (facts.observed if facts else None) or self.observed.get(k)
            if (
                k in self.predicted
                and observed is not None
                and self.predicted[k] > max(observed, s.threshold)
            ):
                out.append(k)
        return out

    def key(self, slos: Sequence[SloSpec]) -> tuple[int, int, float, float, int]:
        """Sort key: fixes that add GPUs without proven saturation, fixes without a
        prediction and fixes predicted to change nothing, after every other, then
        :meth:`_key`."""
        return (int(self.blocked or self.unpredicted or self.inert), *self._key(slos))

    def _key(self, slos: Sequence[SloSpec]) -> tuple[int, float, float, int]:
        if not self.predicted:
            return (5, float("inf"), 0.0, self.finding_rank)
        if self.worse(slos):
            return (4, worst_ratio(self.predicted, slos), 0.0, self.finding_rank)
        if self.low_confidence:
            # the model does not reproduce the incident: its numbers do not order the fixes
            return (3, float(self.finding_rank), 0.0, self.finding_rank)
        worst = worst_ratio(self.predicted, slos)
        loss = max(-self.predicted.get(THROUGHPUT, 0.0), 0.0)
        # latency first; a fix that costs much throughput to get there ranks lower
        cost = 1.0 + loss / 100.0 + self.candidate.risk
        if worst > 1.0:
            return (2, worst * cost, loss, self.finding_rank)
        # every SLO holds: a config change that keeps the model and the fleet as they are
        # comes before one that changes the model or keeps more GPUs (design 1: "the SLO
        # holds without changing the model"; never "add GPUs" when a config fix suffices)
        return (0 if self.candidate.risk == 0 else 1, worst * cost, loss, self.finding_rank)


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
    accuracy_accepted: bool = False,
) -> tuple[Remediation, ...]:
    """Remediations for the top findings, predicted and ranked (best first).
    ``accuracy_accepted``: quantgate passed, or the user accepts the accuracy risk, so a
    quantization may be recommended."""
    slos = tuple(s.spec for s in ctx.slos)
    observed = {slo_key(s.spec): s.observed for s in ctx.slos if s.observed is not None}
    actionable = [f for f in findings if f.category != "insufficient_telemetry"][:max_findings]
    if not actionable:
        return ()
    tgt = target or Target()
    saturated = saturation_proof(ctx).proven

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
    chosen = sorted(keyed, key=lambda k: (k[0], k[1]))[: max(budget, 0)]
    answers: dict[int, Forecast | None] = {}

    def ask(i: int) -> None:
        c = chosen[i][2]
        can = predictor is not None and not c.not_predicted
        answers[i] = predictor.predict(c.parameters) if can and predictor is not None else None

    def scored_now() -> list[_Scored]:
        return [
            _Scored.of(c, answers.get(i), rank, observed, saturated, predictor is not None)
            for i, (_, rank, c) in enumerate(chosen)
        ]

    # the runs are independent: a batch predictor runs them together, all but one fix alone
    # in its finding's rank, which joins the combination whatever it predicts: its run waits
    # for the combination's to be known, so the two share a round of the workers where each
    # would have left one idle
    held = _alone(chosen) if isinstance(predictor, BatchPredictor) else None
    if isinstance(predictor, BatchPredictor):
        early = [c for i, (_, _, c) in enumerate(chosen) if i != held and not c.not_predicted]
        predictor.prefetch([c.parameters for c in early])
    for i in range(len(chosen)):
        if i != held:
            ask(i)
    if held is not None and isinstance(predictor, BatchPredictor):
        parts = _parts(_best_direction(scored_now(), slos), slos)
        together = [_merged(parts)] if len(parts) >= 2 else []
        predictor.prefetch([chosen[held][2].parameters, *together])
        ask(held)
    scored = _best_direction(scored_now(), slos)
    combined = _combine(scored, predictor, slos, observed)
    if combined is not None:
        scored.append(combined)
    scored.sort(key=lambda s: s.key(slos))
    return tuple(_to_remediation(s, slos, accuracy_accepted) for s in scored)


def _best_direction(scored: list[_Scored], slos: Sequence[SloSpec]) -> list[_Scored]:
    """Of the candidates that move one knob both ways, keep the direction predicted better."""
    best: dict[tuple[str, str], _Scored] = {}
    rest = []
    for s in scored:
        if s.candidate.action not in _BOTH_WAYS or not s.predicted:
            rest.append(s)
            continue
        k = (s.candidate.action, s.candidate.addresses[0])
        if k not in best or s.key(slos) < best[k].key(slos):
            best[k] = s
    return rest + list(best.values())


def _alone(chosen: Sequence[tuple[int, int, Candidate]]) -> int | None:
    """The index of the last fix to predict that is alone in its finding's rank (whatever it
    predicts, :func:`_parts` takes it or leaves it alike), None when there is none; never a
    fix whose direction :func:`_best_direction` picks by its prediction."""
    ranks = [rank for _, rank, _ in chosen]
    for i in reversed(range(len(chosen))):
        _, rank, c = chosen[i]
        if ranks.count(rank) == 1 and not c.not_predicted and c.action not in _BOTH_WAYS:
            return i
    return None


#: actions proposed in both directions, of which :func:`_best_direction` keeps one
_BOTH_WAYS = ("max_num_batched_tokens",)


def _parts(scored: Sequence[_Scored], slos: Sequence[SloSpec]) -> list[_Scored]:
    """The best candidate of each of the top findings (at most three, each a different
    action and different settings) that :func:`_combine` applies together."""
    parts: list[_Scored] = []
    keys: set[str] = set()
    for rank in sorted({s.finding_rank for s in scored}):
        mine = sorted((s for s in scored if s.finding_rank == rank), key=lambda s: s.key(slos))
        for s in mine:
            if s.candidate.action == "replicas" or s.blocked:
                continue
            if keys.isdisjoint(s.candidate.parameters) and all(
                p.candidate.action != s.candidate.action for p in parts
            ):
                parts.append(s)
                keys |= set(s.candidate.parameters)
                break
        if len(parts) == 3:
            break
    return parts


def _merged(parts: Sequence[_Scored]) -> dict[str, Any]:
    """The settings of ``parts`` applied together."""
    params: dict[str, Any] = {}
    for p in parts:
        params.update(p.candidate.parameters)
    return params


def _combine(
    scored: list[_Scored],
    predictor: Predictor | None,
    slos: Sequence[SloSpec],
    observed: Mapping[str, float],
) -> _Scored | None:
    """The best candidate of each of the top findings, applied together."""
    if predictor is None:
        return None
    parts = _parts(scored, slos)
    if len(parts) < 2:
        return None
    params = _merged(parts)
    answer = predictor.predict(params)
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
        adds_capacity=any(p.candidate.adds_capacity for p in parts),
    )
    # its parts are never blocked (see above), so neither is the combination
    return _Scored.of(cand, answer, 0, observed, saturated=True, predicting=True)


def _to_remediation(
    s: _Scored, slos: Sequence[SloSpec], accuracy_accepted: bool = False
) -> Remediation:
    c = s.candidate
    caveats = list(c.caveats)
    actions = {c.action, *c.parameters.get("combined", ())}
    gated = not accuracy_accepted and bool(ACCURACY_GATED & actions)
    if gated:
        caveats.append(ACCURACY_GATE_CAVEAT)
    if c.not_predicted:
        caveats.append(f"Not predicted: {c.not_predicted}")
    if c.larger_batch:
        ttft = [slo_key(x) for x in slos if x.metric == "ttft"]
        if ttft and ttft[0] in s.predicted:
            caveats.append(
                f"Predicted TTFT with the larger batch: p{ttft[0].split('_p')[1]} "
                f"{s.predicted[ttft[0]] * 1000:.0f} ms."
            )
    if s.predicted and worst_ratio(s.predicted, slos) > 1.0:
        caveats.append("Predicted not to meet every SLO on its own.")
    errors = {}
    for spec in slos:
        k = slo_key(spec)
        facts = s.facts(k)
        err = None if facts is None else facts.model_error_pct
        if facts is not None and err is not None and k in s.predicted:
            errors[k] = round(err, 1)
            if facts.low_confidence:
                caveats.append(
                    f"Low confidence: the calibrated model misses the observed {_label(k)} by "
                    f"{err:+.0f}%; this prediction does not rank the fix."
                )
            elif facts.within_interval is not None:
                lo, hi = facts.within_interval
                caveats.append(
                    f"The calibrated model misses the observed {_label(k)} by {err:+.0f}%, "
                    f"inside what the traced requests can tell ({lo * 1e3:.0f}-{hi * 1e3:.0f} ms"
                    f" at {OBSERVED_CONFIDENCE:.0%}): too few were measured to check the model "
                    "more closely; read the prediction with that spread."
                )
    if s.blocked:
        caveats.append(
            "Not recommended first: it adds GPUs while compute saturation is not proven; "
            "fix the cause the findings name first."
        )
    worse = s.worse(slos)
    if worse:
        caveats.append(
            "Not recommended: predicted to make "
            + ", ".join(_label(k) for k in worse)
            + " worse than observed."
        )
    if s.forecast is not None:
        caveats.extend(s.forecast.notes)
    if s.unpredicted and not c.not_predicted:
        caveats.append("Not recommended: no predicted effect (the what-if did not run).")
    if s.inert:
        caveats.append(
            "Not recommended: the calibrated model predicts no change from it (it may not "
            "model this change on this stack); measure it before relying on it."
        )
    anchored = any((f := s.facts(slo_key(x))) is not None and f.anchored for x in slos)
    basis = ""
    if s.forecast is not None and s.forecast.has_facts:
        basis = "low_confidence" if s.low_confidence else "anchored" if anchored else "raw"
    return Remediation(
        action=c.action,
        addresses=c.addresses,
        summary=c.summary,
        parameters=dict(c.parameters),
        predicted=dict(s.predicted),
        config=c.config,
        caveats=tuple(caveats),
        model_error_pct=errors,
        prediction_basis=basis,
        recommended=not (s.unpredicted or worse or gated or s.blocked or s.inert),
    )


def headline(rems: Sequence[Remediation], slos: Sequence[SloSpec]) -> Remediation | None:
    """The fix to headline as "the recommended fix": the best-ranked one that is recommended,
    predicted by a model that reproduces the incident, and predicted to meet every SLO.  None
    when no fix is predicted to meet the SLO (say so rather than headline a partial fix)."""
    for r in rems:
        if not r.recommended or r.prediction_basis == "low_confidence":
            continue
        if r.predicted and worst_ratio(r.predicted, slos) <= 1.0:
            return r
    return None


def tentative(rems: Sequence[Remediation], slos: Sequence[SloSpec]) -> Remediation | None:
    """Where nothing is headlined (:func:`headline`), the best-ranked recommended fix that a
    low-confidence model predicts to meet every SLO: the report names it as a direction to
    verify, so that "no fix predicted to meet the SLO" is not said beside a fix listed as
    meeting it."""
    if headline(rems, slos) is not None:
        return None
    for r in rems:
        if not r.recommended or r.prediction_basis != "low_confidence":
            continue
        if r.predicted and worst_ratio(r.predicted, slos) <= 1.0:
            return r
    return None


def accuracy_held(rems: Sequence[Remediation], slos: Sequence[SloSpec]) -> Remediation | None:
    """Where nothing is headlined nor tentative, the best-ranked fix predicted to meet every
    SLO that only the accuracy gate holds back (FP8 weights or KV cache before `tailtriage
    quantgate` passed): the report names it with the gate, rather than say "no fix predicted
    to meet the SLO" beside it."""
    if headline(rems, slos) is not None or tentative(rems, slos) is not None:
        return None
    for r in rems:
        if r.recommended or ACCURACY_GATE_CAVEAT not in r.caveats:
            continue
        if r.predicted and worst_ratio(r.predicted, slos) <= 1.0:
            return r
    return None


def _label(key: str) -> str:
    """``ttft_p95`` -> ``p95 TTFT``."""
    metric, _, p = key.rpartition("_p")
    return f"p{p} {metric.upper()}"
