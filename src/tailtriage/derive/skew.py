"""Span trees as index arrays, and clock-skew correction the way Jaeger's adjuster does it
(analysis-anchors 5.3, jaeger ``cmd/query/app/querysvc/adjuster/clockskew.go``).

Everything is vectorised with numpy, one tree level at a time (real traces are a handful of
levels deep), so a million spans cost milliseconds.  ``parent[i]`` is the row index of span
``i``'s parent in the same trace, or -1.

Skew semantics: spans on the same host as their parent inherit the parent's shift; a span on
another host (or with no host key) that does not fit inside its (already shifted) parent is
shifted: when it lasted longer than the parent only so that it does not start before it,
otherwise so that it sits in the middle of the parent (network latency assumed symmetric).
The shift applies to the whole span (start and end) and so to its events, which are stored
relative to the span's start."""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

#: shifts larger than this are not applied (Jaeger's --query.max-clock-skew-adjustment)
MAX_SKEW_S: Final = 600.0
#: overflows up to this are float rounding of ns/µs timestamps, not skew
TOLERANCE_S: Final = 1e-6
#: deeper trees than this are cut (hostile input); real traces are far shallower
MAX_DEPTH: Final = 4096
#: levels the stage graph adds above a span tree (virtual request roots, engine intervals):
#: a tree cut at MAX_DEPTH must stay measurable after they are added
GRAPH_HEADROOM: Final = 8

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def depths(parent: IntArray, limit: int = MAX_DEPTH + GRAPH_HEADROOM) -> IntArray:
    """Depth of every span (roots 0); -1 where no root is reached within ``limit`` levels
    (parent cycles, chains cut by :func:`break_cycles`)."""
    n = len(parent)
    depth = np.full(n, -1, dtype=np.int64)
    depth[parent < 0] = 0
    pending = np.flatnonzero(parent >= 0)
    level = 0
    while len(pending) and level < limit:
        known = depth[parent[pending]] == level
        if not known.any():
            break
        level += 1
        depth[pending[known]] = level
        pending = pending[~known]
    return depth


def break_cycles(parent: IntArray, start: FloatArray) -> tuple[IntArray, int]:
    """Cut parent cycles (and chains deeper than MAX_DEPTH): the earliest unreached span
    becomes a root, until every span is reached.  Returns the new parent array and the number
    of cuts."""
    depth = depths(parent, MAX_DEPTH)
    cuts = 0
    if (depth >= 0).all():
        return parent, 0
    parent = parent.copy()
    while True:
        stuck = np.flatnonzero(depth < 0)
        if not len(stuck):
            return parent, cuts
        if cuts >= 256:
            # hostile input (thousands of cycles or absurdly deep chains): cut them all at once
            parent[stuck] = -1
            return parent, cuts + len(stuck)
        first = stuck[np.lexsort((stuck, start[stuck]))[0]]
        parent[first] = -1
        cuts += 1
        depth = depths(parent, MAX_DEPTH)


def levels(depth: IntArray) -> list[IntArray]:
    """Span indices grouped by depth, level 0 first; spans of no depth (-1: unreachable)
    are left out rather than breaking the grouping."""
    if len(depth) and depth.min() < 0:
        reached = np.flatnonzero(depth >= 0)
        return [reached[g] for g in levels(depth[reached])]
    order = np.argsort(depth, kind="stable")
    counts = np.bincount(depth, minlength=int(depth.max()) + 1 if len(depth) else 0)
    return np.split(order, np.cumsum(counts)[:-1]) if len(depth) else []


def skew_deltas(
    parent: IntArray,
    lv: list[IntArray],
    start: FloatArray,
    end: FloatArray,
    host: IntArray,
    max_delta: float = MAX_SKEW_S,
) -> FloatArray:
    """Seconds to add to each span's start and end; ``host`` is a code per span (-1: unknown)."""
    delta = np.zeros(len(parent), dtype=np.float64)
    for idx in lv[1:]:
        p = parent[idx]
        ps, pe = start[p] + delta[p], end[p] + delta[p]
        cs, ce = start[idx], end[idx]
        cdur, pdur = ce - cs, pe - ps
        longer = np.where(cs < ps - TOLERANCE_S, ps - cs, 0.0)
        fits = (cs >= ps - TOLERANCE_S) & (ce <= pe + TOLERANCE_S)
        centred = np.where(fits, 0.0, ps + (pdur - cdur) / 2.0 - cs)
        own = np.where(cdur > pdur, longer, centred)
        same_host = (host[idx] == host[p]) & (host[idx] >= 0)
        d = np.where(same_host, delta[p], own)
        delta[idx] = np.where(np.abs(d) > max_delta, 0.0, d)
    return delta
