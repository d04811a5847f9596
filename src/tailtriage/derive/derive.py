"""Requests and stages from spans (design 3.1; issue 2).

A request is a trace that contains an inference span (an engine span, a GenAI span, a SERVER
span on an OpenAI route, or the load generator's client span: see ``stage_rules.yaml``).
Its arrival is the start of the outermost span; TTFT, tokens, status and model come from the
most specific inference span (Envoy's ``first_downstream_tx_byte_sent`` event, when present,
gives the first token at the edge); its stages come from the whole trace along the critical
path, so overlapping time is counted once, and time no rule names is ``unattributed``.
Time after the first token is ``decode``; so per request the stages before it sum to TTFT and
all stages sum to e2e.

The work is columnar: one DuckDB query normalises every span (dedup, order, parent index,
rule match, attribute extraction), numpy does the tree walks level by level, and only traces
whose children overlap take the exact per-trace walk of :mod:`critical_path`."""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.derive import _rows as R
from tailtriage.derive import _spantable as T
from tailtriage.derive.critical_path import (
    clip_tree,
    gap_sections,
    overlapping_parents,
    sections_of_tree,
    trim_rounding_overlaps,
)
from tailtriage.derive.rules import RuleSet, load_rules
from tailtriage.derive.skew import break_cycles, depths, levels, skew_deltas
from tailtriage.model import Capture, ClockAdjustment, Metadata
from tailtriage.model.vocabulary import STAGES

_STAGE = {s: i for i, s in enumerate(STAGES)}
_UNATTRIBUTED = _STAGE["unattributed"]
_DECODE = _STAGE["decode"]
_ENGINE_STAGES = np.array([_STAGE["engine_queue"], _STAGE["prefill"], _STAGE["decode"]])
#: individual clock adjustments kept in metadata (all are counted)
MAX_ADJUSTMENTS_LISTED = 1000


@dataclass
class _Quality:
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, key: str, n: int, warning: str | None = None) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + int(n)
            if warning:
                self.warnings.append(warning.format(n=n))


def derive(capture: Capture, rules: RuleSet | None = None) -> Capture:
    """The capture with requests and stages derived from its spans (joined, by trace id, to
    requests it already has), and its spans de-duplicated and corrected for clock skew."""
    if capture.spans.num_rows == 0:
        return capture
    rules = rules or load_rules()
    q = _Quality()
    t = T.normalise(capture.spans, rules)
    q.add(
        "spans.duplicate_id", capture.spans.num_rows - t.n, "{n} spans with a duplicate id dropped"
    )
    parent, adjustments = _repair_tree(t, q)
    req = _requests(t, parent, rules, capture.requests)
    req = _without_empty(req, q)
    # the requests' rows meanwhile: the stage threads leave a core idle in their serial parts
    with ThreadPoolExecutor(1, thread_name_prefix="tailtriage-requests") as pool:
        derived = pool.submit(R.request_rows, t, req, capture.requests)
        stages = _stages(t, parent, req)
        requests, stages = _merge(capture, req, derived.result(), stages)
    out_spans = T.output_spans(t)
    meta = capture.metadata.merged(
        Metadata(clock_adjustments=adjustments, quality=q.counts, warnings=tuple(q.warnings))
    )
    return capture.replace(requests=requests, stages=stages, spans=out_spans, metadata=meta)


def _repair_tree(t: T.SpanTable, q: _Quality) -> tuple[np.ndarray, tuple[ClockAdjustment, ...]]:
    """Fix parents (self, cycles), correct clock skew in place; count what was repaired."""
    parent = t.parent.copy()
    idx = np.arange(t.n)
    q.add("spans.orphan", int(((parent < 0) & t.has_parent_id).sum()))
    parent[parent == idx] = -1
    parent, cuts = break_cycles(parent, t.start)
    q.add("spans.parent_cycle", cuts, "{n} parent cycles cut (span made a root)")
    lv = levels(depths(parent))
    delta = skew_deltas(parent, lv, t.start, t.end, t.host)
    moved = np.flatnonzero(delta != 0.0)
    q.add("spans.clock_skew_adjusted", len(moved), "{n} spans shifted to correct clock skew")
    listed = moved[:MAX_ADJUSTMENTS_LISTED]
    adjustments = tuple(
        ClockAdjustment(tid, sid, svc, float(d))
        for tid, sid, svc, d in zip(
            t.column("trace_id", listed).to_pylist(),
            t.column("span_id", listed).to_pylist(),
            t.column("service", listed).to_pylist(),
            delta[moved[:MAX_ADJUSTMENTS_LISTED]].tolist(),
            strict=True,
        )
    )
    t.start = t.start + delta
    t.end = t.end + delta
    return parent, adjustments


# -- requests ------------------------------------------------------------------------------------
@dataclass
class _Req:
    """Per request (one per trace with an inference span), column arrays."""

    trace: np.ndarray  # trace index
    span: np.ndarray  # most specific inference span
    arrival: np.ndarray
    finish: np.ndarray
    first_token: np.ndarray  # NaN when unknown
    request_id: list[str]
    existing: np.ndarray  # row in the capture's requests, or -1
    #: outermost span carrying an HTTP status / a model name (-1: none): what the user saw
    status_span: np.ndarray
    model_span: np.ndarray


def _requests(t: T.SpanTable, parent: np.ndarray, rules: RuleSet, existing: pa.Table) -> _Req:
    level = np.array([r.level for r in rules.rules] + [0])[t.rule]  # rule -1 -> last (0)
    seg = t.trace_starts
    top = np.maximum.reduceat(level, seg)
    ex_rows = _existing_by_trace(existing, t)
    is_req = (top > 0) | (ex_rows >= 0)
    traces = np.flatnonzero(is_req)
    # most specific inference span: highest level, then outermost, then earliest
    depth = depths(parent)
    first_of_trace = _first_by(t, np.ones(t.n, dtype=bool), (-level, depth, t.start))[traces]
    roots = parent < 0
    big = np.where(roots, t.end, -np.inf)
    small = np.where(roots, t.start, np.inf)
    arrival = np.minimum.reduceat(small, seg)[traces]
    finish = np.maximum.reduceat(big, seg)[traces]
    ft = _first_token(t, parent, seg, traces, first_of_trace)
    ex = ex_rows[traces]
    rid = t.column("trace_id", t.trace_starts[traces]).to_pylist()
    if existing.num_rows and (ex >= 0).any():
        arrival, finish, ft, rid = _take_client_timings(existing, ex, arrival, finish, ft, rid)
    ft = np.where(np.isnan(ft), ft, np.clip(ft, arrival, np.maximum(finish, arrival)))
    status_span = _outermost_with(~np.isnan(t.num["http_status"]), t, depth, traces)
    model_span = _outermost_with(
        pc.is_valid(t.text["model"]).to_numpy(zero_copy_only=False)[t.rid], t, depth, traces
    )
    return _Req(traces, first_of_trace, arrival, finish, ft, rid, ex, status_span, model_span)


def _without_empty(req: _Req, q: _Quality) -> _Req:
    """Requests whose outermost spans last no time at all (a root without its duration) are
    dropped and counted: no stage could hold their time, and a 0 s latency is not one."""
    keep = (req.finish > req.arrival) | (req.existing >= 0)
    dropped = int((~keep).sum())
    if not dropped:
        return req
    q.add("requests.zero_length", dropped, "{n} traces whose root spans last 0 s dropped")
    idx = np.flatnonzero(keep)
    return _Req(
        req.trace[idx], req.span[idx], req.arrival[idx], req.finish[idx], req.first_token[idx],
        [req.request_id[i] for i in idx.tolist()], req.existing[idx], req.status_span[idx],
        req.model_span[idx],
    )  # fmt: skip


def _outermost_with(
    has: np.ndarray, t: T.SpanTable, depth: np.ndarray, traces: np.ndarray
) -> np.ndarray:
    """Per request trace, the shallowest (then earliest) span where ``has``; -1 when none."""
    best: np.ndarray = _first_by(t, has, (depth, t.start))[traces]
    return best


def _first_by(t: T.SpanTable, mask: np.ndarray, keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per trace, the span where ``mask`` that sorts first by ``keys`` (then by row), -1 when
    none: what ``np.lexsort((*reversed(keys), t.tix))`` puts first in each trace, found with
    per-trace minima (rows are grouped by trace) rather than a sort of every span."""
    seg, n = t.trace_starts, t.n
    out = np.full(len(seg), -1, dtype=np.int64)
    if not n:
        return out
    if any(np.isnan(k).any() for k in keys if k.dtype.kind == "f"):  # NaN sorts last
        cand = np.flatnonzero(mask)
        cand = cand[np.lexsort((*(k[cand] for k in reversed(keys)), t.tix[cand]))]
        first = np.ones(len(cand), dtype=bool)
        first[1:] = t.tix[cand[1:]] != t.tix[cand[:-1]]
        out[t.tix[cand[first]]] = cand[first]
        return out
    m = mask.copy()
    for k in keys:
        v = np.where(m, k.astype(np.float64), np.inf)
        m &= v == np.minimum.reduceat(v, seg)[t.tix]
    pos = np.minimum.reduceat(np.where(m, np.arange(n), n), seg)
    return np.where(pos < n, pos, -1)


def _existing_by_trace(existing: pa.Table, t: T.SpanTable) -> np.ndarray:
    """Per trace index, the row of a request the capture already has with that trace id."""
    out = np.full(len(t.trace_starts), -1, dtype=np.int64)
    if existing.num_rows == 0:
        return out
    tids = pc.utf8_lower(existing["trace_id"].combine_chunks())
    trace_ids = t.column("trace_id", t.trace_starts)
    pos = pc.fill_null(pc.index_in(trace_ids, value_set=tids), -1)
    vals = pos.to_numpy(zero_copy_only=False)
    return np.asarray(vals, dtype=np.int64)


def _take_client_timings(
    existing: pa.Table,
    ex: np.ndarray,
    arrival: np.ndarray,
    finish: np.ndarray,
    ft: np.ndarray,
    rid: list[str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Requests measured at the client keep the client's timings (joined on trace id)."""
    has = ex >= 0
    rows = ex[has]

    def col(name: str) -> np.ndarray:
        vals = existing[name].to_numpy(zero_copy_only=False)
        out: np.ndarray = np.asarray(vals, dtype=np.float64)[rows]
        return out

    arrival, finish, ft = arrival.copy(), finish.copy(), ft.copy()
    arrival[has] = col("arrival")
    fin = col("finish")
    finish[has] = np.where(np.isnan(fin), finish[has], fin)
    ft[has] = col("first_token")
    ids = existing["request_id"].to_pylist()
    rid = list(rid)
    for k, row in zip(np.flatnonzero(has).tolist(), rows.tolist(), strict=True):
        rid[k] = ids[row]
    return arrival, finish, ft, rid


def _first_token(
    t: T.SpanTable, parent: np.ndarray, seg: np.ndarray, traces: np.ndarray, spec: np.ndarray
) -> np.ndarray:
    """First token per request: the edge's first byte sent downstream, else the engine's first
    token (prefill or KV-transfer end, or the engine's TTFT attribute), else the GenAI time to first chunk."""
    edge = t.start + t.edge_first_byte  # NaN where the span has no such event
    edge_t = np.fmax.reduceat(edge, seg)[traces]
    engine = t.start + t.engine_ttft
    eng_t = engine[spec]
    # disaggregated serving: the decode worker sends the first token once the KV cache arrived
    handoff = (t.stage_hint == _STAGE["prefill"]) | (t.stage_hint == _STAGE["kv_transfer"])
    prefill_end = np.where(handoff, t.end, np.nan)
    pf_t = np.fmax.reduceat(prefill_end, seg)[traces]
    chunk_t = (t.start + t.first_chunk)[spec]
    out: np.ndarray = edge_t.copy()
    for alt in (eng_t, pf_t, chunk_t):
        out = np.where(np.isnan(out), alt, out)
    return out


# -- stages --------------------------------------------------------------------------------------
def _stages(t: T.SpanTable, parent: np.ndarray, req: _Req) -> pa.Table:
    """One row per request and stage along the critical path.  Traces are independent, so
    the requests are taken in blocks of about ``STAGE_BLOCK_REQUESTS``, and with two cores
    by two threads (numpy and Arrow release the GIL) each taking half of the blocks in turn;
    the blocks' rows, in request order, are the rows of one pass.  Blocks rather than whole
    halves: each block's temporaries (several arrays per critical-path section) are freed
    before the next reuses the memory, and first writes to fresh memory are costly on a VM
    (bench/ingest.py: a third less time for this step at a million spans)."""
    n = len(req.trace)
    threads = 2 if n >= PARALLEL_MIN_REQUESTS and _cores() >= 2 else 1
    blocks = max(1, -(-n // STAGE_BLOCK_REQUESTS))
    blocks = -(-blocks // threads) * threads  # a whole number per thread
    bounds = np.linspace(0, n, blocks + 1).astype(np.int64).tolist()
    parts = [_part(req, slice(a, b)) for a, b in itertools.pairwise(bounds)]
    if threads == 1:
        tables = [_stages_of(t, parent, r) for r in parts]
    else:
        per = blocks // threads

        def run(mine: list[_Req]) -> list[pa.Table]:
            return [_stages_of(t, parent, r) for r in mine]

        with ThreadPoolExecutor(threads, thread_name_prefix="tailtriage-stages") as pool:
            done = pool.map(run, [parts[i * per : (i + 1) * per] for i in range(threads)])
            tables = [tab for mine in done for tab in mine]
    return pa.concat_tables(tables).combine_chunks() if len(tables) > 1 else tables[0]


#: fewer requests than this take one thread (the split costs more than it saves)
PARALLEL_MIN_REQUESTS = 20_000
#: requests per block of the stage computation (see ``_stages``)
STAGE_BLOCK_REQUESTS = 40_000


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _part(req: _Req, part: slice) -> _Req:
    """The requests in ``part`` (a range of request indices)."""
    return _Req(
        req.trace[part],
        req.span[part],
        req.arrival[part],
        req.finish[part],
        req.first_token[part],
        req.request_id[part],
        req.existing[part],
        req.status_span[part],
        req.model_span[part],
    )


def _stages_of(t: T.SpanTable, parent: np.ndarray, req: _Req) -> pa.Table:
    is_req = np.zeros(len(t.trace_starts), dtype=bool)
    is_req[req.trace] = True
    g = T.Graph.of(t, parent, is_req[t.tix])
    g.add_virtual_roots()
    g.add_engine_intervals(t)
    g.add_gateway_queue(t)
    lv = levels(depths(g.parent))
    lo, hi, alive = clip_tree(g.parent, lv, g.start, g.end, g.blocking)
    hi = trim_rounding_overlaps(g.parent, lo, hi, alive)
    lo, hi, alive = clip_tree(g.parent, lv, lo, hi, g.blocking)
    bad_parents = overlapping_parents(g.parent, lo, hi, alive)
    complex_traces = np.unique(g.tix[bad_parents])
    simple = ~np.isin(g.tix, complex_traces)
    owner, s, e = gap_sections(g.parent, lo, hi, alive & simple)
    owner, s, e = _with_exact_walk(g, complex_traces, owner, s, e)
    return R.stage_rows(g, t, req, owner, s, e)


def _with_exact_walk(
    g: T.Graph, traces: np.ndarray, owner: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Add the critical path of traces whose children overlap, walked one trace at a time."""
    if not len(traces):
        return owner, s, e
    parts_o, parts_s, parts_e = [owner], [s], [e]
    order = np.argsort(g.tix, kind="stable")
    bounds = np.searchsorted(g.tix[order], np.stack([traces, traces + 1]))
    for a, b in zip(bounds[0].tolist(), bounds[1].tolist(), strict=True):
        rows = order[a:b]
        local = {int(r): k for k, r in enumerate(rows.tolist())}
        par = [local.get(int(p), -1) for p in g.parent[rows].tolist()]
        secs = sections_of_tree(
            par, g.start[rows].tolist(), g.end[rows].tolist(), g.blocking[rows].tolist()
        )
        if secs:
            k, ss, ee = zip(*secs, strict=True)
            parts_o.append(rows[np.array(k, dtype=np.int64)])
            parts_s.append(np.array(ss))
            parts_e.append(np.array(ee))
    return np.concatenate(parts_o), np.concatenate(parts_s), np.concatenate(parts_e)


# -- merging with what the capture already had ---------------------------------------------------
def _merge(
    capture: Capture, req: _Req, derived: pa.Table, stages: pa.Table
) -> tuple[pa.Table, pa.Table]:
    old = capture.requests
    if old.num_rows == 0:
        return derived, stages
    joined_ids = pa.array(req.request_id, type=pa.string())
    keep_old = pc.invert(pc.is_in(old["request_id"], value_set=joined_ids))
    old_stages = capture.stages.filter(
        pc.invert(pc.is_in(capture.stages["request_id"], value_set=joined_ids))
    )
    requests = pa.concat_tables([old.filter(keep_old), derived])
    return requests, pa.concat_tables([old_stages, stages])
