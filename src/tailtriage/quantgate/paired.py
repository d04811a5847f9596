"""Paired accuracy statistics: both endpoints answered the same items, so compare per item.

McNemar's exact test looks only at the discordant items (right on one endpoint, wrong on the
other): under "no difference" each is equally likely to go either way, so their split is
Binomial(n, 1/2).  The confidence interval of the accuracy change is a paired bootstrap:
resample items (both answers together) and take percentiles of the change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from scipy import stats

#: bootstrap resamples: the 2.5 % / 97.5 % percentiles move by well under 0.1 point beyond this
RESAMPLES: Final = 4000
CONFIDENCE: Final = 0.95


@dataclass(frozen=True, slots=True)
class PairedComparison:
    n: int
    baseline_correct: int
    candidate_correct: int
    only_baseline: int  # right on the baseline, wrong on the candidate
    only_candidate: int
    delta_pt: float  # candidate - baseline accuracy, percentage points
    ci_low_pt: float
    ci_high_pt: float
    mcnemar_p: float

    @property
    def baseline_acc(self) -> float:
        return self.baseline_correct / self.n if self.n else float("nan")

    @property
    def candidate_acc(self) -> float:
        return self.candidate_correct / self.n if self.n else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "baseline_accuracy": round(self.baseline_acc, 4) if self.n else None,
            "candidate_accuracy": round(self.candidate_acc, 4) if self.n else None,
            "delta_pt": round(self.delta_pt, 2),
            "ci_pt": [round(self.ci_low_pt, 2), round(self.ci_high_pt, 2)],
            "only_baseline_right": self.only_baseline,
            "only_candidate_right": self.only_candidate,
            "mcnemar_p": round(self.mcnemar_p, 4),
        }


def compare(baseline: Sequence[bool], candidate: Sequence[bool], seed: int = 0) -> PairedComparison:
    """Paired comparison of per-item correctness (same items, same order)."""
    if len(baseline) != len(candidate):
        raise ValueError("baseline and candidate must score the same items")
    b = np.asarray(baseline, dtype=bool)
    c = np.asarray(candidate, dtype=bool)
    n = int(b.size)
    only_b, only_c = int((b & ~c).sum()), int((c & ~b).sum())
    if n == 0:
        nan = float("nan")
        return PairedComparison(0, 0, 0, 0, 0, nan, nan, nan, 1.0)
    discordant = only_b + only_c
    p = 1.0 if discordant == 0 else float(stats.binomtest(only_c, discordant, 0.5).pvalue)
    diff = c.astype(np.float64) - b.astype(np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, n, size=(RESAMPLES, n))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail]) * 100
    return PairedComparison(n, int(b.sum()), int(c.sum()), only_b, only_c,
                            float(diff.mean() * 100), float(lo), float(hi), p)  # fmt: skip
