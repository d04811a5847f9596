"""Attribution of a breach to stages: counterfactual percentiles and Shapley values.

For a set S of stages, v(S) is the percentile the incident would show if the stages in S had
their baseline distribution and the others kept theirs.  It is computed on pairs: each incident
request i is paired with a baseline request j(i), and its metric becomes
``value_i + sum over s in S of (y_j(i),s - x_i,s)`` (x: incident stage durations, y: baseline).
The baseline partners are a stratified draw over the baseline sorted by metric (so their
collection reproduces the baseline distribution closely), assigned to incident requests in a
seeded random order (so the pairing carries no dependence of its own).  Stages keep their joint
behaviour within a request; only the stages in S are swapped.

The end points are known exactly: v(no stage) is the observed percentile and v(all stages) the
baseline percentile; the resampled estimate of the latter is kept in ``resampled_baseline`` as a
check.  A stage's contribution is its Shapley value in the game "how much of the breach goes
away when the stages in S are healthy", w(S) = v(none) - v(S):
phi_s = sum over S not containing s of |S|! (k-|S|-1)! / k! (w(S + s) - w(S)); the
contributions add up to observed - baseline exactly."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tailtriage.analyses.metrics import MetricSource
from tailtriage.analyses.results import Attribution
from tailtriage.model.vocabulary import STAGES
from tailtriage.store.base import Store
from tailtriage.store.dialect import dialect_of, literal, window_filter

MAX_POPULATION = 100_000  # pairs used for v(S); beyond this, a seeded subsample
MAX_STAGES = 12  # 2^12 subsets


def stage_matrix(
    store: Store,
    source: MetricSource,
    stages: Sequence[str],
    window: tuple[float, float] | None,
    sample_every: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Per request in ``window`` (ordered by id): its metric, and its duration in each stage.
    Stage names outside the vocabulary count as ``unattributed``.  With ``sample_every = k``
    only requests whose id hashes to 0 modulo k are read (a deterministic 1/k sample)."""
    return stage_matrices(store, source, stages, [(window, sample_every)])[0]


def stage_matrices(
    store: Store,
    source: MetricSource,
    stages: Sequence[str],
    parts: Sequence[tuple[tuple[float, float] | None, int]],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`stage_matrix` for several (window, sample_every) at once: one pass over
    ``stages`` serves them all (the scan of every stage row is the expensive part)."""
    d = dialect_of(store)
    known = ", ".join(literal(s) for s in STAGES)
    cols = []
    for i, s in enumerate(stages):
        cond = f"stage = {literal(s)}"
        if s == "unattributed":
            cond = f"({cond} OR stage NOT IN ({known}))"
        cols.append(f"sum(CASE WHEN {cond} THEN duration ELSE 0 END) AS c{i}")
    selects = []
    for k, (window, every) in enumerate(parts):
        sample = f" AND {d.hash64('request_id')} % {every} = 0" if every > 1 else ""
        selects.append(
            f"SELECT {k} AS part, request_id, value FROM ({source.sql}) AS s "
            f"WHERE {window_filter('arrival', window)}{sample}"
        )
    chosen = " UNION ALL ".join(selects)
    # a semi-join first: the pivot then groups only the chosen requests' stage rows
    pivot = (
        f"SELECT request_id, {', '.join(cols)} FROM stages "
        f"WHERE request_id IN (SELECT request_id FROM ({chosen}) AS c) GROUP BY request_id"
    )
    names = "".join(f", coalesce(p.c{i}, 0) AS c{i}" for i in range(len(stages)))
    tab = store.query(
        f"SELECT c.part AS part, c.request_id AS request_id, c.value AS value{names} "
        f"FROM ({chosen}) AS c LEFT JOIN ({pivot}) AS p ON p.request_id = c.request_id "
        "ORDER BY c.part, c.request_id"
    )
    part = tab.column("part").to_numpy(zero_copy_only=False)
    values = tab.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
    matrix = np.zeros((len(values), len(stages)))
    for i in range(len(stages)):
        matrix[:, i] = tab.column(f"c{i}").to_numpy(zero_copy_only=False)
    matrix = np.nan_to_num(matrix)
    return [(values[part == k], matrix[part == k]) for k in range(len(parts))]


def subset_percentiles(values: np.ndarray, delta: np.ndarray, p: float) -> np.ndarray:
    """v(mask) for every subset mask of the k columns of ``delta`` (Gray-code order: one column
    added or removed per step, so each subset costs one vector add and one percentile)."""
    k = delta.shape[1]
    out = np.empty(2**k)
    cur = values.astype(np.float64).copy()
    out[0] = np.percentile(cur, p)
    prev = 0
    for i in range(1, 2**k):
        gray = i ^ (i >> 1)
        bit = (gray ^ prev).bit_length() - 1
        cur += delta[:, bit] if gray & (1 << bit) else -delta[:, bit]
        out[gray] = np.percentile(cur, p)
        prev = gray
    return out


def shapley_values(v: np.ndarray, k: int) -> np.ndarray:
    """Exact Shapley values of the game ``v`` (indexed by subset bitmask) over k players."""
    masks = np.arange(2**k)
    sizes = np.array([bin(m).count("1") for m in masks])
    weight = np.array(
        [math.factorial(s) * math.factorial(k - s - 1) / math.factorial(k) for s in range(k)]
    )
    phi = np.empty(k)
    for s in range(k):
        without = masks[(masks >> s) & 1 == 0]
        phi[s] = np.sum(weight[sizes[without]] * (v[without | (1 << s)] - v[without]))
    return phi


def _partners(baseline_values: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n baseline row indices: evenly spread over the baseline's sorted order, shuffled."""
    order = np.argsort(baseline_values, kind="stable")
    pos = np.floor((np.arange(n) + 0.5) / n * len(order)).astype(np.int64)
    return np.asarray(order[np.minimum(pos, len(order) - 1)][rng.permutation(n)])


def attribute(
    metric: str,
    p: float,
    stages: Sequence[str],
    incident: tuple[np.ndarray, np.ndarray],
    baseline: tuple[np.ndarray, np.ndarray],
    seed: int = 0,
    max_population: int = MAX_POPULATION,
    exact: tuple[float, float] | None = None,
) -> Attribution | None:
    """Counterfactual percentiles and Shapley values of ``stages`` (see module docstring).

    ``incident``/``baseline`` are (metric values, stage matrix) as :func:`stage_matrix` returns.
    ``exact`` gives the observed and baseline percentiles over all requests when the matrices
    hold a sample (else they are taken from the matrices).  Stages with no time in either window
    are left out; None without requests on either side."""
    x_vals, x = incident
    y_vals, y = baseline
    if len(x_vals) == 0 or len(y_vals) == 0:
        return None
    used = [i for i in range(len(stages)) if x[:, i].any() or y[:, i].any()][:MAX_STAGES]
    names = tuple(stages[i] for i in used)
    if exact is None:
        exact = (float(np.percentile(x_vals, p)), float(np.percentile(y_vals, p)))
    observed, base = exact
    rng = np.random.default_rng(seed)
    rows = np.arange(len(x_vals))
    if len(rows) > max_population:
        rows = np.sort(rng.choice(len(rows), max_population, replace=False))
    partners = _partners(y_vals, len(rows), rng)
    cols = np.asarray(used, dtype=np.int64)
    delta = y[partners][:, cols] - x[rows][:, cols]
    v = subset_percentiles(x_vals[rows], delta, p)
    resampled = float(v[-1])
    v[0], v[-1] = observed, base  # the end points are known exactly
    # Shapley of "how much fixing S removes", v(none) - v(S): adds up to observed - baseline
    phi = shapley_values(v[0] - v, len(names))
    return Attribution(
        metric=metric,
        percentile=p,
        observed=observed,
        baseline=base,
        stages=names,
        counterfactual=tuple(float(v[1 << i]) for i in range(len(names))),
        shapley=tuple(float(f) for f in phi),
        seed=seed,
        population=len(rows),
        resampled_baseline=resampled,
    )
