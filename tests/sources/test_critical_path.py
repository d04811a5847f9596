"""critical_path: Jaeger UI semantics (analysis-anchors 5.1), and the vectorised form used by
derive agrees with the exact walk."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.derive.critical_path import (
    clip_tree,
    critical_path,
    gap_sections,
    overlapping_parents,
    sections_of_tree,
)
from tailtriage.derive.skew import depths, levels


def span(sid: str, parent: str | None, start: float, end: float, **kw: object) -> dict[str, object]:
    return {"span_id": sid, "parent_id": parent, "start": start, "end": end, **kw}


def test_jaeger_test1_sequential_children() -> None:
    # jaeger-ui testCases/test1: C[1,101] with D[20,40], E[50,60]
    got = critical_path([span("C", None, 1, 101), span("D", "C", 20, 40), span("E", "C", 50, 60)])
    assert got == [("C", 1, 20), ("D", 20, 40), ("C", 40, 50), ("E", 50, 60), ("C", 60, 101)]


def test_overlapping_sibling_is_skipped() -> None:
    # B overlaps C (the last-finishing child): B's time is not counted at all
    got = critical_path([span("A", None, 0, 10), span("B", "A", 1, 6), span("C", "A", 4, 8)])
    assert got == [("A", 0, 4), ("C", 4, 8), ("A", 8, 10)]


def test_back_to_back_children_are_both_on_the_path() -> None:
    got = critical_path([span("A", None, 0, 10), span("Q", "A", 1, 4), span("P", "A", 4, 9)])
    assert got == [("A", 0, 1), ("Q", 1, 4), ("P", 4, 9), ("A", 9, 10)]


def test_children_outside_parent_dropped_overflowing_truncated() -> None:
    spans = [
        span("A", None, 10, 20),
        span("late", "A", 20, 25),  # starts when A ends: dropped
        span("early", "A", 2, 10),  # ends when A starts: dropped
        span("over", "A", 15, 30),  # truncated to [15, 20]
        span("kid", "over", 25, 28),  # inside its parent, outside the truncated one: dropped
    ]
    assert critical_path(spans) == [("A", 10, 15), ("over", 15, 20)]


def test_consumer_of_producer_does_not_block() -> None:
    spans = [
        span("P", None, 0, 10, kind="PRODUCER"),
        span("C", "P", 2, 8, kind="CONSUMER"),
        span("I", "P", 3, 4, kind="INTERNAL"),
    ]
    assert critical_path(spans) == [("P", 0, 3), ("I", 3, 4), ("P", 4, 10)]


def test_follows_from_child_does_not_block() -> None:
    spans = [span("A", None, 0, 10), span("F", "A", 2, 5, follows_from=True)]
    assert critical_path(spans) == [("A", 0, 10)]


def test_parent_cycle_is_cut_at_earliest_span() -> None:
    spans = [span("A", "B", 0, 10), span("B", "A", 2, 5)]
    assert critical_path(spans) == [("A", 0, 2), ("B", 2, 5), ("A", 5, 10)]


def test_duplicates_and_negative_spans_ignored_orphans_are_roots() -> None:
    spans = [
        span("A", None, 0, 4),
        span("A", None, 0, 100),  # duplicate id: first wins
        span("N", "A", 3, 1),  # negative duration: ignored
        span("O", "missing", 6, 7),  # orphan: its own root
    ]
    assert critical_path(spans) == [("A", 0, 4), ("O", 6, 7)]


# -- property: sections tile each root and never overlap ------------------------------------------
@st.composite
def trees(draw: st.DrawFn, orphans: bool = True) -> tuple[list[int], list[float], list[float]]:
    n = draw(st.integers(1, 25))
    parent, start, end = [-1], [0.0], [float(draw(st.integers(1, 100)))]
    for i in range(1, n):
        parent.append(draw(st.integers(-1 if orphans else 0, i - 1)))
        s = float(draw(st.integers(-20, 120)))
        start.append(s)
        end.append(s + float(draw(st.integers(0, 60))))
    return parent, start, end


@settings(max_examples=300, deadline=None)
@given(trees(orphans=False))
def test_sections_tile_the_root_without_overlap(
    tree: tuple[list[int], list[float], list[float]],
) -> None:
    parent, start, end = tree
    secs = sections_of_tree(parent, start, end)
    for a, b in itertools.pairwise(secs):
        assert a[2] <= b[1] + 1e-12  # chronological, no overlap
    covered = sum(e - s for _, s, e in secs)
    assert abs(covered - (end[0] - start[0])) < 1e-9  # the root's time, exactly once
    assert all(start[0] <= s <= e <= end[0] for _, s, e in secs)


@settings(max_examples=300, deadline=None)
@given(trees())
def test_vectorised_form_matches_exact_walk_without_overlap(
    tree: tuple[list[int], list[float], list[float]],
) -> None:
    parent, start, end = (np.array(x) for x in tree)
    parent = parent.astype(np.int64)
    lv = levels(depths(parent))
    lo, hi, alive = clip_tree(parent, lv, start, end, np.ones(len(parent), dtype=bool))
    if len(overlapping_parents(parent, lo, hi, alive)):
        return  # those traces take the exact walk in derive
    owner, s, e = gap_sections(parent, lo, hi, alive)
    fast = sorted(
        zip(owner.tolist(), s.tolist(), e.tolist(), strict=True), key=lambda t: (t[1], t[2], t[0])
    )
    # sections of different spans with the same times (separate roots) come in either order
    exact = sorted(
        sections_of_tree(parent.tolist(), start.tolist(), end.tolist()),
        key=lambda t: (t[1], t[2], t[0]),
    )
    assert fast == exact
