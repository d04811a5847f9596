"""The verdict: does the candidate keep accuracy within the user's budget, and what does it buy?

``pass``: the whole confidence interval of the accuracy change lies above ``-budget`` and no
task type drops significantly beyond it.  ``fail``: the interval lies wholly below ``-budget``,
or a task type drops beyond it with McNemar p < 0.05.  Otherwise ``inconclusive``: the set is
too small to tell, so add items rather than guess."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from tailtriage.errors import ConfigError
from tailtriage.loadgen.evalset import EvalItem, is_correct
from tailtriage.quantgate.ask import EndpointRun
from tailtriage.quantgate.paired import PairedComparison, compare

#: significance for a per-type drop to fail the gate on its own
TYPE_ALPHA: Final = 0.05
#: a prompt this many words long is long-context for the risk call-out
LONG_PROMPT_WORDS: Final = 4000
_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(pt|pts|points?|pp)?\s*$", re.I)

#: the known risk areas of quantization: (name, what goes wrong, categories / types that test it)
RISKS: Final = (
    ("math and code", "multi-step arithmetic and code lose accuracy first, int4 more than fp8",
     frozenset({"math", "code", "numeric"})),
    ("long-context retrieval", "finding a fact deep in a long prompt degrades, more so with a "
     "quantized KV cache", frozenset({"long_context", "retrieval"})),
    ("small models", "models under ~10B parameters lose more to 4-bit weights than large ones",
     frozenset({"small_model"})),
    ("KV-cache quantization", "an FP8/INT8 KV cache changes attention over long contexts; "
     "evaluate with long prompts", frozenset({"kv_cache", "long_context"})),
)  # fmt: skip


def parse_budget(text: str) -> float:
    """``1pt``, ``0.5pt`` or ``2``: the accuracy drop allowed, in percentage points."""
    m = _BUDGET.match(text)
    if not m:
        raise ConfigError(f"--budget {text!r}: expected percentage points such as 1pt or 0.5pt")
    return float(m.group(1))


@dataclass(frozen=True, slots=True)
class Speed:
    """Latency and throughput of one endpoint in this run."""

    ttft_p50_s: float | None
    tpot_p50_s: float | None
    output_tps: float  # output tokens per second of wall time (closed loop, same users)

    def to_dict(self) -> dict[str, Any]:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v * 1e3, 2)

        return {"ttft_p50_ms": ms(self.ttft_p50_s), "tpot_p50_ms": ms(self.tpot_p50_s),
                "output_tokens_per_s": round(self.output_tps, 1)}  # fmt: skip


def speed_of(run: EndpointRun) -> Speed:
    ok = [r for r in run.records if r.status == "ok"]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    tpot = [r.tpot for r in ok if r.tpot is not None]
    tokens = sum(r.output_tokens or 0 for r in ok)
    return Speed(
        float(np.median(ttft)) if ttft else None,
        float(np.median(tpot)) if tpot else None,
        tokens / run.wall_s if run.wall_s > 0 else 0.0,
    )


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    comparison: PairedComparison


@dataclass(frozen=True, slots=True)
class GateReport:
    budget_pt: float
    verdict: str  # pass | fail | inconclusive
    reasons: tuple[str, ...]
    overall: PairedComparison
    by_type: tuple[Group, ...]
    by_category: tuple[Group, ...]
    baseline_speed: Speed
    candidate_speed: Speed
    risks: tuple[tuple[str, str, int], ...]  # (area, why, items of this set that test it)
    unsupported: int  # code items: not scored
    failed: tuple[int, int]  # requests that failed on (baseline, candidate): left out

    @property
    def throughput_gain_pct(self) -> float | None:
        b, c = self.baseline_speed.output_tps, self.candidate_speed.output_tps
        return None if b <= 0 else (c / b - 1) * 100

    def to_dict(self) -> dict[str, Any]:
        gain = self.throughput_gain_pct
        return {
            "verdict": self.verdict,
            "budget_pt": self.budget_pt,
            "reasons": list(self.reasons),
            "overall": self.overall.to_dict(),
            "by_type": {g.name: g.comparison.to_dict() for g in self.by_type},
            "by_category": {g.name: g.comparison.to_dict() for g in self.by_category},
            "speed": {"baseline": self.baseline_speed.to_dict(),
                      "candidate": self.candidate_speed.to_dict(),
                      "throughput_gain_pct": None if gain is None else round(gain, 1)},
            "risks": [{"area": a, "why": w, "items": n} for a, w, n in self.risks],
            "unsupported_code_items": self.unsupported,
            "failed_requests": {"baseline": self.failed[0], "candidate": self.failed[1]},
        }  # fmt: skip


def _groups(keys: Sequence[str], b: Sequence[bool], c: Sequence[bool], seed: int
            ) -> tuple[Group, ...]:  # fmt: skip
    out = []
    for key in sorted(set(keys) - {""}):
        idx = [i for i, k in enumerate(keys) if k == key]
        out.append(Group(key, compare([b[i] for i in idx], [c[i] for i in idx], seed)))
    return tuple(out)


def gate(
    items: Sequence[EvalItem],
    baseline: EndpointRun,
    candidate: EndpointRun,
    budget_pt: float,
    *,
    seed: int = 0,
    small_model: bool = False,
) -> GateReport:
    """Score both runs item by item and decide against ``budget_pt``."""
    kept: list[int] = []
    unsupported = 0
    for i, item in enumerate(items):
        if item.type == "code":
            unsupported += 1
        elif baseline.answers[i] is not None and candidate.answers[i] is not None:
            kept.append(i)
    b = [bool(is_correct(items[i], baseline.answers[i] or "")) for i in kept]
    c = [bool(is_correct(items[i], candidate.answers[i] or "")) for i in kept]
    overall = compare(b, c, seed)
    by_type = _groups([items[i].type for i in kept], b, c, seed)
    by_category = _groups([items[i].category for i in kept], b, c, seed)
    reasons: list[str] = []
    if overall.n == 0:
        verdict = "inconclusive"
        reasons.append("no scored item was answered by both endpoints")
    else:
        sig = [g for g in by_type
               if g.comparison.delta_pt < -budget_pt and g.comparison.mcnemar_p < TYPE_ALPHA]  # fmt: skip
        ci = f"[{overall.ci_low_pt:+.1f}, {overall.ci_high_pt:+.1f}] pt"
        if overall.ci_high_pt < -budget_pt or sig:
            verdict = "fail"
            if overall.ci_high_pt < -budget_pt:
                reasons.append(f"accuracy change {overall.delta_pt:+.1f} pt, 95% CI {ci}: the "
                               f"whole interval is below -{budget_pt:g} pt")  # fmt: skip
            for g in sig:
                reasons.append(f"{g.name} items drop {g.comparison.delta_pt:+.1f} pt (McNemar "
                               f"p = {g.comparison.mcnemar_p:.3f}), beyond the budget")  # fmt: skip
        elif overall.ci_low_pt >= -budget_pt:
            verdict = "pass"
            reasons.append(f"accuracy change {overall.delta_pt:+.1f} pt, 95% CI {ci}: within "
                           f"-{budget_pt:g} pt with 95% confidence")  # fmt: skip
        else:
            verdict = "inconclusive"
            reasons.append(f"accuracy change {overall.delta_pt:+.1f} pt, 95% CI {ci} straddles "
                           f"-{budget_pt:g} pt: {overall.n} items cannot tell; add items")  # fmt: skip
    tags = [{items[i].category, items[i].type} for i in kept]
    if small_model:
        tags = [t | {"small_model"} for t in tags]
    long = sum(len(items[i].prompt.split()) >= LONG_PROMPT_WORDS for i in kept)
    risks = tuple(
        (area, why, sum(bool(t & keys) for t in tags) + (long if "long_context" in keys else 0))
        for area, why, keys in RISKS
    )
    return GateReport(budget_pt, verdict, tuple(reasons), overall, by_type, by_category,
                      speed_of(baseline), speed_of(candidate), risks, unsupported,
                      (baseline.failed, candidate.failed))  # fmt: skip
