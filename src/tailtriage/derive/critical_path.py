"""The critical path of a trace, with the semantics of Jaeger UI's critical-path view
(analysis-anchors 5.1, jaeger-ui ``TracePage/CriticalPath``):

* start at a root; the span owns the time from its last-finishing child's end to its own end;
  recurse into that child; back in the parent, take the child that finished latest before the
  previous child started, and so on; the parent owns every gap, down to its own start;
* a sibling that overlaps the child on the path is skipped, so overlapped time is counted once;
* children are first clipped to their parent (and dropped, with their subtree, when entirely
  outside it); a CONSUMER child of a PRODUCER (or a FOLLOWS_FROM child) does not block its
  parent and is pruned.

One deliberate difference: a child that ends exactly when the previous one starts is on the
path (Jaeger requires "ends strictly before", which drops back-to-back stages such as vLLM's
queue -> prefill -> decode).

Written iteratively (explicit stack) so hostile, very deep traces cannot overflow the stack."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

Section = tuple[str, float, float]
#: children overlapping by less than this are back to back (ns/µs rounding of timestamps)
EPS = 1e-6
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def critical_path(spans: Iterable[Mapping[str, Any]]) -> list[Section]:
    """Ordered critical-path sections ``(span_id, start, end)`` of one trace.

    ``spans`` are dicts with ``span_id``, ``parent_id`` (None for a root), ``start`` and
    ``end`` (seconds), and optionally ``kind`` (SERVER, CLIENT, PRODUCER, CONSUMER, INTERNAL)
    and ``follows_from`` (True when the parent does not wait for the span).  A span whose
    parent is missing is a root; each root's tree is walked in start order.  Duplicate ids keep
    the first span; spans with end before start are ignored; parent cycles are broken at
    their earliest span."""
    ids: list[str] = []
    index: dict[str, int] = {}
    parents_raw: list[Any] = []
    starts: list[float] = []
    ends: list[float] = []
    blocking: list[bool] = []
    kinds: list[str | None] = []
    for sp in spans:
        sid = str(sp["span_id"])
        s, e = float(sp["start"]), float(sp["end"])
        if sid in index or not e >= s:
            continue
        index[sid] = len(ids)
        ids.append(sid)
        parents_raw.append(sp.get("parent_id"))
        starts.append(s)
        ends.append(e)
        kind = sp.get("kind")
        kinds.append(str(kind).upper() if kind is not None else None)
        blocking.append(not sp.get("follows_from", False))
    parent = [index.get(str(p), -1) if p is not None else -1 for p in parents_raw]
    for i, p in enumerate(parent):
        if p >= 0 and kinds[i] == "CONSUMER" and kinds[p] == "PRODUCER":
            blocking[i] = False
    sections = sections_of_tree(parent, starts, ends, blocking)
    return [(ids[i], s, e) for i, s, e in sections]


def sections_of_tree(
    parent: Sequence[int],
    start: Sequence[float],
    end: Sequence[float],
    blocking: Sequence[bool] | None = None,
) -> list[tuple[int, float, float]]:
    """Critical path over spans given by index: ``parent[i]`` is -1 for a root.

    Returns chronological ``(index, start, end)`` sections covering every root's extent."""
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for i in range(n):
        p = parent[i]
        if p < 0 or p == i or p >= n:
            roots.append(i)
        else:
            children[p].append(i)
    seen = [False] * n
    _mark(roots, children, seen)
    if not all(seen):
        # What no root reaches sits on a parent cycle: cut each cycle at its earliest span.
        for i in sorted(range(n), key=lambda k: (start[k], k)):
            if not seen[i]:
                children[parent[i]].remove(i)
                roots.append(i)
                _mark([i], children, seen)
    lo, hi = list(start), list(end)
    _clip(roots, children, lo, hi, blocking)
    out: list[tuple[int, float, float]] = []
    for r in sorted(roots, key=lambda k: (start[k], k)):
        _walk(r, children, lo, hi, out)
    out.sort(key=lambda t: (t[1], t[2]))
    return out


def _mark(roots: list[int], children: list[list[int]], seen: list[bool]) -> None:
    stack = list(roots)
    while stack:
        p = stack.pop()
        if not seen[p]:
            seen[p] = True
            stack.extend(children[p])


def _clip(
    roots: list[int],
    children: list[list[int]],
    lo: list[float],
    hi: list[float],
    blocking: Sequence[bool] | None,
) -> None:
    """Top-down: clip each child to its parent; drop (with subtree) what is outside or pruned."""
    stack = list(roots)
    while stack:
        p = stack.pop()
        kept = []
        for c in children[p]:
            if blocking is not None and not blocking[c]:
                continue
            s, e = lo[c], hi[c]
            if s >= hi[p] or e <= lo[p]:
                continue  # entirely outside the parent: dropped with its subtree
            lo[c], hi[c] = max(s, lo[p]), min(e, hi[p])
            kept.append(c)
        kept.sort(key=lambda k: -hi[k])  # by end, latest first: the walk's search order
        children[p] = kept
        stack.extend(kept)


def _walk(
    root: int,
    children: list[list[int]],
    lo: list[float],
    hi: list[float],
    out: list[tuple[int, float, float]],
) -> None:
    """Append the sections of ``root``'s tree to ``out``."""
    # frame: (span, position in its end-sorted children, time cursor walking backwards)
    stack: list[tuple[int, int, float]] = [(root, 0, hi[root])]
    while stack:
        span, pos, t = stack.pop()
        kids = children[span]
        while pos < len(kids):
            c = kids[pos]
            pos += 1
            if hi[c] > t + EPS or hi[c] <= lo[c]:
                continue  # overlaps the child already on the path, or owns no time
            if hi[c] > t:
                hi[c] = t  # a rounding overlap: the child ends where the next one starts
            if t > hi[c]:
                out.append((span, hi[c], t))
            stack.append((span, pos, lo[c]))
            stack.append((c, 0, hi[c]))
            break
        else:
            if t > lo[span]:
                out.append((span, lo[span], t))


# -- vectorised form, for many traces at once ---------------------------------------------------
def by_parent_then_start(kids: IntArray, parent: IntArray, lo: FloatArray) -> IntArray:
    """``kids[np.lexsort((lo[kids], parent[kids]))]``: children grouped by parent, each
    group by start.  Rows come ordered by (trace, start), so siblings are nearly always in
    start order already: one stable sort by parent then suffices (checked; else the full
    two-key sort)."""
    o: IntArray = kids[np.argsort(parent[kids], kind="stable")]
    p, t = parent[o], lo[o]
    if not ((p[1:] != p[:-1]) | (t[1:] >= t[:-1])).all():
        o = kids[np.lexsort((lo[kids], parent[kids]))]
    return o


def clip_tree(
    parent: IntArray, lv: list[IntArray], lo: FloatArray, hi: FloatArray, blocking: BoolArray
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Jaeger's sanitisation over many traces: children clipped to their (clipped) parent;
    children outside it, non-blocking children and their subtrees are not alive."""
    lo, hi = lo.copy(), hi.copy()
    alive = np.ones(len(parent), dtype=bool)
    for idx in lv[1:]:
        p = parent[idx]
        inside = (lo[idx] < hi[p]) & (hi[idx] > lo[p])
        alive[idx] = alive[p] & blocking[idx] & inside
        lo[idx] = np.maximum(lo[idx], lo[p])
        hi[idx] = np.minimum(hi[idx], hi[p])
    return lo, hi, alive


def overlapping_parents(
    parent: IntArray, lo: FloatArray, hi: FloatArray, alive: BoolArray
) -> IntArray:
    """Spans whose alive children overlap each other (they need the full walk)."""
    kids = np.flatnonzero(alive & (parent >= 0) & (hi > lo))
    o = by_parent_then_start(kids, parent, lo)
    same = parent[o[1:]] == parent[o[:-1]]
    bad = same & (lo[o[1:]] < hi[o[:-1]] - EPS)
    return np.unique(parent[o[1:]][bad])


def trim_rounding_overlaps(
    parent: IntArray, lo: FloatArray, hi: FloatArray, alive: BoolArray
) -> FloatArray:
    """``hi`` with each child that overlaps its next sibling by less than EPS ending where
    that sibling starts (clip again afterwards so its subtree follows)."""
    kids = np.flatnonzero(alive & (parent >= 0) & (hi > lo))
    o = by_parent_then_start(kids, parent, lo)
    same = parent[o[1:]] == parent[o[:-1]]
    tiny = same & (lo[o[1:]] < hi[o[:-1]]) & (lo[o[1:]] >= hi[o[:-1]] - EPS)
    hi = hi.copy()
    prev = o[:-1][tiny]
    hi[prev] = np.maximum(lo[o[1:]][tiny], lo[prev])
    return hi


def gap_sections(
    parent: IntArray, lo: FloatArray, hi: FloatArray, alive: BoolArray
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Critical path when no span's children overlap: each span owns its time minus its
    children's.  Returns (owner, start, end) arrays of non-empty sections."""
    own = alive & (hi > lo)
    kids = np.flatnonzero(own & (parent >= 0))
    o = by_parent_then_start(kids, parent, lo)
    po = parent[o]
    first = np.ones(len(o), dtype=bool)
    first[1:] = po[1:] != po[:-1]
    last = np.ones(len(o), dtype=bool)
    last[:-1] = po[:-1] != po[1:]
    has_kids = np.zeros(len(parent), dtype=bool)
    has_kids[po] = True
    leaves = np.flatnonzero(own & ~has_kids)
    nxt = np.empty(len(o), dtype=np.int64)
    nxt[:-1] = o[1:]
    mid = ~last
    owner = np.concatenate([leaves, po[first], po[mid], po[last]])
    start = np.concatenate([lo[leaves], lo[po[first]], hi[o[mid]], hi[o[last]]])
    end = np.concatenate([hi[leaves], lo[o[first]], lo[nxt[mid]], hi[po[last]]])
    keep = end > start
    return owner[keep], start[keep], end[keep]
