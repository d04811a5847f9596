"""Every quantile in tailtriage comes from here.

Two estimators, each for its kind of input:

* **exact** percentiles of samples, by linear interpolation between order statistics
  (Hyndman-Fan type 7: numpy's default, DuckDB ``quantile_cont``, ClickHouse
  ``quantileExactInclusive``), with a distribution-free confidence interval from order
  statistics (the count of samples below the true p-quantile is Binomial(n, p));
* **Prometheus classic histograms**: :func:`histogram_quantile` reproduces PromQL's
  ``histogram_quantile`` and also returns the bucket that bounds the true value, so a report can
  say when coarse buckets make a p95 unreliable.

Percentiles are given as percent (95.0, 99.9) everywhere in tailtriage except in
:func:`histogram_quantile`, which keeps PromQL's ``q`` in [0, 1]."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

#: The percentiles every table shows.
STANDARD_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)


# -- exact percentiles ------------------------------------------------------------------------
def percentile(values: ArrayLike, p: float) -> float:
    """Exact p-th percentile (type 7); NaN for no values."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return math.nan
    return float(np.percentile(arr, p))


def percentiles(values: ArrayLike, ps: Sequence[float]) -> tuple[float, ...]:
    """Exact percentiles at each of ``ps`` (percent), monotone in p."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return tuple(math.nan for _ in ps)
    return tuple(float(v) for v in np.percentile(arr, list(ps)))


def ci_ranks(n: int, p: float, confidence: float = 0.95) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the order statistics bounding the p-th percentile.

    ``P(X_(l) <= true quantile <= X_(u)) >= confidence``; an end is None when ``n`` is too small
    for it to exist (e.g. the upper end of p99 with fewer than ~370 samples)."""
    if n <= 0:
        return (None, None)
    q = p / 100.0
    alpha = 1.0 - confidence
    low = int(stats.binom.ppf(alpha / 2.0, n, q))
    # P(B >= u) <= alpha/2 with B ~ Binomial(n, q): u = ppf(1 - alpha/2) + 1.
    high = int(stats.binom.ppf(1.0 - alpha / 2.0, n, q)) + 1
    return (low if low >= 1 else None, high if high <= n else None)


def rank_fraction(rank: int, n: int) -> float:
    """The quantile fraction at which type-7 interpolation returns exactly ``X_(rank)``."""
    return 0.0 if n <= 1 else (rank - 1) / (n - 1)


def min_count(p: float, confidence: float = 0.95) -> int:
    """Fewest samples for which a two-sided distribution-free CI of the p-th percentile exists.

    Both ends exist when ``q**n <= alpha/2`` and ``(1-q)**n <= alpha/2`` (q = p/100): 72 for
    p95, 368 for p99, 3688 for p99.9."""
    q = p / 100.0
    worst = max(q, 1.0 - q)
    n = math.ceil(math.log((1.0 - confidence) / 2.0) / math.log(worst))
    # guard the float edge: step until the CI really exists
    while None in ci_ranks(n, p, confidence):
        n += 1
    return n


def too_few_warning(p: float, n: int, what: str = "samples") -> str | None:
    """A warning naming the minimum count when ``n`` is too small for the p-th percentile."""
    need = min_count(p)
    if n >= need:
        return None
    return (
        f"p{p:g} from {n} {what} is not reliable: at least {need} are needed "
        f"for a 95% confidence interval"
    )


@dataclass(frozen=True)
class QuantileEstimate:
    """An exact percentile with its order-statistic confidence interval (seconds)."""

    p: float
    value: float
    count: int
    ci_low: float | None = None
    ci_high: float | None = None
    warning: str | None = None


def estimate(values: ArrayLike, p: float, confidence: float = 0.95) -> QuantileEstimate:
    """Exact percentile of ``values`` with its confidence interval and a small-sample warning."""
    arr = np.sort(np.asarray(values, dtype=np.float64))
    n = int(arr.size)
    if n == 0:
        return QuantileEstimate(p, math.nan, 0, warning=too_few_warning(p, 0))
    lo, hi = ci_ranks(n, p, confidence)
    return QuantileEstimate(
        p=p,
        value=float(np.percentile(arr, p)),
        count=n,
        ci_low=None if lo is None else float(arr[lo - 1]),
        ci_high=None if hi is None else float(arr[hi - 1]),
        warning=too_few_warning(p, n),
    )


# -- Prometheus classic histograms ------------------------------------------------------------
@dataclass(frozen=True)
class HistogramQuantile:
    """PromQL ``histogram_quantile`` result plus the bucket that holds the true value.

    ``lower``/``upper`` bound the true quantile of the observations (``lower`` exclusive): any
    value in between is consistent with the buckets.  A wide interval relative to the value means
    the estimate is bucket-limited."""

    value: float
    lower: float
    upper: float
    forced_monotonic: bool = False  # PromQL's "input to histogram_quantile needed to be fixed"
    fixed_precision: bool = False

    @property
    def relative_width(self) -> float:
        """(upper - lower) / value: how much the buckets alone leave open."""
        if not math.isfinite(self.value) or self.value == 0:
            return math.inf
        return (self.upper - self.lower) / abs(self.value)


_NAN = HistogramQuantile(math.nan, math.nan, math.nan)
_SMALL_DELTA = 1e-12  # Prometheus smallDeltaTolerance
_MIN_NORMAL = 2.2250738585072014e-308


def _almost_equal(a: float, b: float, eps: float) -> bool:
    if a == b:
        return True
    abs_sum = abs(a) + abs(b)
    diff = abs(a - b)
    if a == 0 or b == 0 or abs_sum < _MIN_NORMAL:
        return diff < eps * _MIN_NORMAL
    return diff / min(abs_sum, math.inf) < eps


def _coalesce(buckets: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sum the counts of buckets with equal upper bound (``0.2`` and ``2e-1``)."""
    out: list[tuple[float, float]] = []
    for le, count in buckets:
        if out and out[-1][0] == le:
            out[-1] = (le, out[-1][1] + count)
        else:
            out.append((le, count))
    return out


def _monotone(counts: list[float]) -> tuple[list[float], bool, bool]:
    """Force cumulative counts to be non-decreasing (as Prometheus does), flagging repairs."""
    fixed = list(counts)
    forced = precision = False
    prev = fixed[0]
    for i in range(1, len(fixed)):
        cur = fixed[i]
        if cur == prev:
            continue
        if _almost_equal(prev, cur, _SMALL_DELTA):
            fixed[i], precision = prev, True
        elif cur < prev:
            fixed[i], forced = prev, True
        else:
            prev = cur
    return fixed, forced, precision


def _le(v: float | str) -> float:
    return float(v) if not isinstance(v, str) else float(v.replace("Inf", "inf"))


def histogram_quantile(q: float, buckets: Iterable[tuple[float | str, float]]) -> HistogramQuantile:
    """PromQL ``histogram_quantile(q, ...)`` over classic buckets ``(le, cumulative count)``.

    Same rules as Prometheus: q outside [0, 1] gives -Inf/+Inf, no ``+Inf`` bucket or no
    observations give NaN, a rank in the ``+Inf`` bucket returns the highest finite bound, a
    lowest bucket with a bound <= 0 returns that bound, otherwise linear interpolation."""
    if math.isnan(q):
        return _NAN
    if q < 0:
        return HistogramQuantile(-math.inf, -math.inf, -math.inf)
    if q > 1:
        return HistogramQuantile(math.inf, math.inf, math.inf)
    items = sorted(((_le(le), float(c)) for le, c in buckets), key=lambda b: b[0])
    if not items or not math.isinf(items[-1][0]):
        return _NAN
    items = _coalesce(items)
    counts, forced, precision = _monotone([c for _, c in items])
    bounds = [le for le, _ in items]
    if len(bounds) < 2 or counts[-1] == 0:
        return _NAN
    rank = q * counts[-1]
    b = next(i for i in range(len(bounds) - 1) if counts[i] >= rank) if counts[-2] >= rank else -1
    flags = {"forced_monotonic": forced, "fixed_precision": precision}
    if b == -1:  # the rank lies in the +Inf bucket: PromQL caps at the highest finite bound
        return HistogramQuantile(bounds[-2], bounds[-2], math.inf, **flags)
    if b == 0 and bounds[0] <= 0:
        return HistogramQuantile(bounds[0], -math.inf, bounds[0], **flags)
    start = bounds[b - 1] if b > 0 else 0.0
    count = counts[b] - (counts[b - 1] if b > 0 else 0.0)
    rank -= counts[b - 1] if b > 0 else 0.0
    value = start + (bounds[b] - start) * (rank / count) if count else math.nan
    return HistogramQuantile(value, start, bounds[b], **flags)
