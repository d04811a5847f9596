"""Duplicate span ids and clock skew repaired inside ClickHouse exactly as file ingest repairs
them (``derive``): the same copy kept, the same Jaeger-adjuster shifts, the same counts; the
requests and stages equal field by field (floats bit for bit)."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_clickhouse import assert_same, chdb_examples, raw_spans, rows, through_clickhouse
from trace_builders import Sp, sid, tid, vllm_trace

from tailtriage.derive.derive import derive
from tailtriage.model import Capture

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

_REPAIRS = ("spans.duplicate_id", "spans.orphan", "spans.clock_skew_adjusted")


def repairs(cap: Capture) -> dict[str, int]:
    return {k: cap.metadata.quality.get(k, 0) for k in _REPAIRS}


def adjustments(cap: Capture) -> dict[tuple[str, str], float]:
    return {(a.trace_id, a.span_id): a.delta for a in cap.metadata.clock_adjustments}


def shifted(spans: list[Sp], by: float, host: str) -> list[Sp]:
    """The spans with those on ``host`` (resource ``host.name``) moved by ``by`` seconds, as
    a host whose clock is off would have stamped them."""
    out = []
    for s in spans:
        if s.resource.get("host.name") == host:
            s = dataclasses.replace(
                s,
                start=s.start + by,
                end=s.end + by,
                events=[(n, t + by) for n, t in s.events],
            )
        out.append(s)
    return out


# -- duplicate span ids --------------------------------------------------------------------------
def duplicated() -> tuple[list[Sp], int]:
    """Requests with copies of some spans (retries and copies that differ), and the number of
    copies added."""
    a, b, c = vllm_trace(0, 0.0), vllm_trace(1, 0.5), vllm_trace(2, 1.0)
    health = Sp(tid(3), sid(3, 1), None, "GET /healthz", 0.0, 0.01, "SERVER", "web")
    longer = dataclasses.replace(b[0], end=b[0].end + 0.4)  # differs: the shorter one is kept
    failed = dataclasses.replace(c[-1], error=True)  # differs: the error copy is kept
    retry = copy.deepcopy(a[2])  # an exporter retry: the same span again
    # each changed copy comes first in the file, so "first in the input" would keep it
    spans = [longer, failed, *a, *b, *c, health, retry, copy.deepcopy(health)]
    return spans, 4


@pytest.mark.parametrize("old", [False, True], ids=["Server", "SPAN_KIND_SERVER"])
def test_duplicates_keep_the_same_copy_and_count_as_file_ingest(tmp_path: Path, old: bool) -> None:
    spans, copies = duplicated()
    raw = raw_spans(tmp_path, spans)
    assert raw.spans.num_rows == len(spans)
    want = derive(raw)
    got = through_clickhouse(tmp_path, raw, old=old, batch=7 if old else None)
    assert_same(want, got)
    assert repairs(want)["spans.duplicate_id"] == copies
    assert repairs(got) == repairs(want)
    by_id = rows(got.requests, ("request_id",))
    assert by_id[(tid(2),)]["status"] == "error"  # the copy with the error status was kept
    # the shorter copy of trace 1's root span was kept: e2e as without the copy
    alone = derive(raw_spans(tmp_path, vllm_trace(1, 0.5), "alone.jsonl"))
    assert (
        rows(want.requests, ("request_id",))[(tid(1),)]["e2e"] == alone.requests["e2e"][0].as_py()
    )


def test_the_copy_kept_does_not_depend_on_the_input_order(tmp_path: Path) -> None:
    spans, _ = duplicated()
    forward = derive(raw_spans(tmp_path, spans, "f.jsonl"))
    backward = derive(raw_spans(tmp_path, spans[::-1], "b.jsonl"))
    assert_same(forward, backward)
    assert sorted(forward.spans["span_id"].to_pylist()) == sorted(
        backward.spans["span_id"].to_pylist()
    )
    # the very same copies, every column (the file each came from aside)
    f, b = (c.spans.drop_columns(["source"]).sort_by("span_id") for c in (forward, backward))
    assert f.equals(b)


# -- clock skew ----------------------------------------------------------------------------------
def skewed() -> list[Sp]:
    gw = {"host.name": "node-gw"}
    spans: list[Sp] = []
    # the vLLM pod's clock is 5 s ahead: its spans (and the edge event) lie outside the gateway's
    spans += shifted(vllm_trace(0, 0.0), 5.0, "gpu-1")
    # ... and 0.3 s behind
    spans += shifted(vllm_trace(1, 10.0), -0.3, "gpu-1")
    # a child lasting longer than its parent on another host, starting before it: aligned to
    # the parent's start
    t = tid(2)
    spans += [
        Sp(t, sid(2, 1), None, "POST /v1/completions", 20.0, 21.0, "SERVER", "gw", resource=gw),
        Sp(
            t,
            sid(2, 2),
            sid(2, 1),
            "llm_request",
            19.0,
            20.5,
            "SERVER",
            "vllm",
            {"gen_ai.request.model": "m"},
            resource={"host.name": "gpu-9"},
        ),
    ]
    # a child outside its parent on the same host is not moved (clipped by the critical path)
    t = tid(3)
    spans += [
        Sp(t, sid(3, 1), None, "POST /v1/completions", 30.0, 31.0, "SERVER", "gw", resource=gw),
        Sp(
            t,
            sid(3, 2),
            sid(3, 1),
            "llm_request",
            30.5,
            31.4,
            "SERVER",
            "vllm",
            {"gen_ai.request.model": "m"},
            resource=gw,
        ),
    ]
    # more than 10 minutes off: not a clock, not moved
    spans += shifted(vllm_trace(4, 40.0), 900.0, "gpu-1")
    # a chain of five hosts, each clock further off: every level moves, children with parents
    t = tid(5)
    lo, hi = 50.0, 60.0
    parent: str | None = None
    for k in range(1, 7):
        off = 0.7 * k * (-1) ** k
        spans.append(
            Sp(
                t,
                sid(5, k),
                parent,
                "llm_request" if k == 3 else f"hop{k}",
                lo + off,
                hi + off,
                "SERVER",
                f"svc{k}",
                {"gen_ai.request.model": "m"} if k == 3 else {},
                resource={"host.name": f"h{k}"},
            )
        )
        # a same-host child of each hop, inside it in that host's clock
        spans.append(
            Sp(
                t,
                sid(5, 10 + k),
                sid(5, k),
                f"work{k}",
                lo + off + 0.1,
                lo + off + 0.2,
                service=f"svc{k}",
                resource={"host.name": f"h{k}"},
            )
        )
        parent = sid(5, k)
        lo, hi = lo + 0.5, hi - 0.5
    return spans


@pytest.mark.parametrize("batch", [None, 9], ids=["one-query", "batched"])
def test_clock_skew_is_corrected_as_file_ingest_corrects_it(
    tmp_path: Path, batch: int | None
) -> None:
    raw = raw_spans(tmp_path, skewed())
    want = derive(raw)
    got = through_clickhouse(tmp_path, raw, batch=batch)
    assert_same(want, got)
    assert repairs(got) == repairs(want)
    moved = adjustments(want)
    assert adjustments(got) == moved  # the same spans, by the same seconds (bit for bit)
    # which spans move: the shifted pods' spans and every hop of the chain with its child
    assert {tr for tr, _ in moved} == {tid(0), tid(1), tid(2), tid(5)}
    assert len([k for k in moved if k[0] == tid(5)]) == 10  # hops 2..6 and their children
    assert (tid(3), sid(3, 2)) not in moved  # same host: not moved
    assert repairs(want)["spans.clock_skew_adjusted"] == len(moved)
    # after the shift the pod's spans sit inside the gateway's again, the same host moved alike
    sp = rows(want.spans, ("span_id",))
    root, http = sp[(sid(0, 1),)], sp[(sid(0, 3),)]
    assert root["start"] <= http["start"] and http["end"] <= root["end"]
    pod = [k for k in moved if k[0] == tid(0)]
    assert len({moved[k] for k in pod}) == 1 and moved[pod[0]] < -4.9
    # the longer child starts with its parent
    assert sp[(sid(2, 2),)]["start"] == sp[(sid(2, 1),)]["start"]


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("zipkin/skew.json", (0, 0, 2)),  # a server span stamped by another host's clock
        ("jaeger/ui_01.json", (1, 0, 0)),  # span ...0002 twice, the copies differ
        ("otlp/trace.json", (0, 1, 0)),  # its parent is not in the file
        ("zipkin/yelp.json", (0, 0, 0)),
        ("zipkin/simple-db-p6.json", (0, 0, 0)),
    ],
)
def test_the_real_trace_files(
    tmp_path: Path, shared_data: Path, name: str, counts: tuple[int, int, int]
) -> None:
    """Every real trace file of shared/data: the same repairs counted on both paths."""
    from tailtriage.sources.base import ReadOptions
    from tailtriage.sources.bundle import read_file

    raw = read_file(shared_data / name, ReadOptions())
    want = derive(raw)
    assert tuple(repairs(want).values()) == counts
    got = through_clickhouse(tmp_path, raw)
    assert repairs(got) == repairs(want)
    # one end time of skew.json (microseconds read as float seconds) is no whole nanosecond
    # over 1e9: exported, it reads back one ulp (0.24 µs) off, and so does the shift
    moved, got_moved = adjustments(want), adjustments(got)
    assert got_moved.keys() == moved.keys()
    assert all(got_moved[k] == pytest.approx(v, abs=1e-6) for k, v in moved.items())
    assert_same(want, got)


# -- random chains of hosts with random clocks, and random copies --------------------------------
@st.composite
def chain_trace(draw: st.DrawFn, i: int) -> list[Sp]:
    """A request through up to 7 hops on random hosts (clock offsets up to ±3 s), the last with
    a same-host child and a child that has no host key; random spans copied, some copies
    changed.  No span has overlapping children, before or after the clocks are corrected
    (overlapping children are test_clickhouse.py's random traces)."""
    t = tid(i)
    offsets = draw(st.lists(st.sampled_from([0.0, 0.5, -0.5, 1.5, -3.0]), min_size=4, max_size=4))
    n = draw(st.integers(1, 7))
    lo, hi = 100.0 * i, 100.0 * i + 10.0
    spans: list[Sp] = []
    parent: str | None = None
    start = lo
    for k in range(1, n + 1):
        host = draw(st.integers(0, 3))
        off = offsets[host]
        res = {"host.name": f"h{host}"}
        name = "llm_request" if k == n else draw(st.sampled_from(["hop", "ingress", "mystery"]))
        attrs = {"gen_ai.request.model": "m"} if k == n else {}
        start = lo + off
        spans.append(
            Sp(t, sid(i, k), parent, name, start, hi + off, "SERVER", "s", attrs, resource=res)
        )
        parent = sid(i, k)
        lo += draw(st.sampled_from([0.05, 0.1, 0.15]))
        hi -= draw(st.sampled_from([0.05, 0.1, 0.15]))
    # the last hop's children: one on its host (moves with it), one with no host key (another
    # host to every span) stamped far off (centred in its parent, clear of the first)
    a = draw(st.floats(0.001, 0.01))
    spans.append(Sp(t, sid(i, 20), parent, "work", start + a, start + a + 0.01, resource=res))
    off = draw(st.sampled_from([20.0, -20.0]))
    spans.append(Sp(t, sid(i, 40), parent, "tokenize", start + 0.1 + off, start + 0.4 + off))
    for s in draw(st.lists(st.sampled_from(spans), max_size=3)):
        change = draw(st.sampled_from(["same", "end", "error", "name"]))
        dup = copy.deepcopy(s)
        if change == "end":
            dup.end += 0.001
        elif change == "error":
            dup.error = True
        elif change == "name":
            dup.name = "ingress"
        spans.insert(draw(st.integers(0, len(spans))), dup)
    return spans


@pytest.mark.slow
@chdb_examples(8)
@given(data=st.data())
def test_random_skewed_chains_with_copies_equal_the_python_derive(
    tmp_path_factory: Any, data: Any
) -> None:
    tmp = tmp_path_factory.mktemp("ch")
    spans = [s for i in range(6) for s in data.draw(chain_trace(i))]
    raw = raw_spans(tmp, spans)
    want = derive(raw)
    got = through_clickhouse(tmp, raw)
    assert_same(want, got)
    assert repairs(got) == repairs(want)
    assert adjustments(got) == adjustments(want)
