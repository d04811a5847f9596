"""The ``requests`` and ``stages`` rows built from the span graph's critical-path sections
(the last step of :mod:`derive`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.derive._spantable import Graph, SpanTable
from tailtriage.model import schema as S
from tailtriage.model.vocabulary import STAGES

if TYPE_CHECKING:
    from tailtriage.derive.derive import _Req

_STAGE: Final = {s: i for i, s in enumerate(STAGES)}
_UNATTR: Final = _STAGE["unattributed"]
_DECODE: Final = _STAGE["decode"]


# -- rows of the requests and stages tables ----------------------------------------------------
def stage_rows(
    g: Graph, t: SpanTable, req: _Req, owner: np.ndarray, s: np.ndarray, e: np.ndarray
) -> pa.Table:
    """Sections -> one row per (request, stage): split at the first token (after it: decode),
    clipped to the request's window, aggregated."""
    req_of_trace = np.full(int(g.tix.max()) + 1 if len(g.tix) else 0, -1, dtype=np.int64)
    req_of_trace[req.trace] = np.arange(len(req.trace))
    r = req_of_trace[g.tix[owner]]
    owner, s, e, r = owner[r >= 0], s[r >= 0], e[r >= 0], r[r >= 0]
    # the window: client timings may start before / end after the spans
    s, e = np.maximum(s, req.arrival[r]), np.minimum(e, req.finish[r])
    m = e > s
    owner, s, e, r = owner[m], s[m], e[m], r[m]
    stage = g.stage[owner]
    head_o, head_s, head_e, head_r = _uncovered(req, r, s, e)
    owner = np.concatenate([owner, head_o])
    s, e, r = np.concatenate([s, head_s]), np.concatenate([e, head_e]), np.concatenate([r, head_r])
    stage = np.concatenate([stage, np.full(len(head_o), _UNATTR, dtype=np.int64)])
    # split at the first token
    ft = req.first_token[r]
    cut = ~np.isnan(ft) & (s < ft) & (ft < e)
    owner = np.concatenate([owner, owner[cut]])
    stage = np.concatenate([stage, stage[cut]])
    r = np.concatenate([r, r[cut]])
    s2 = np.concatenate([s, ft[cut]])
    e2 = np.concatenate([np.where(cut, ft, e), e[cut]])
    s, e = s2, e2
    ft = req.first_token[r]
    after = ~np.isnan(ft) & (s >= ft)
    stage = np.where(after, _DECODE, stage)
    # engine decoding before the edge sent the first token is the return path: the parent's
    before_decode = ~after & (stage == _DECODE) & ~np.isnan(ft)
    par = np.where(owner >= 0, g.parent[np.maximum(owner, 0)], -1)
    par_stage = np.where(par >= 0, g.stage[np.maximum(par, 0)], _UNATTR)
    par_stage = np.where(par_stage == _DECODE, _UNATTR, par_stage)
    stage = np.where(before_decode, par_stage, stage)
    return _aggregate(g, t, req, owner, stage, r, s, e)


def _uncovered(req: _Req, r: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, ...]:
    """Unattributed head/tail where the request's window extends past its spans."""
    nreq = len(req.trace)
    lo = np.full(nreq, np.inf)
    hi = np.full(nreq, -np.inf)
    np.minimum.at(lo, r, s)
    np.maximum.at(hi, r, e)
    lo = np.where(np.isinf(lo), req.finish, lo)
    hi = np.where(np.isinf(hi), req.finish, hi)
    ids = np.arange(nreq)
    hm = lo > req.arrival
    tm = req.finish > np.maximum(hi, req.arrival)
    o = np.full(int(hm.sum() + tm.sum()), -1, dtype=np.int64)
    return (
        o,
        np.concatenate([req.arrival[hm], np.maximum(hi, req.arrival)[tm]]),
        np.concatenate([lo[hm], req.finish[tm]]),
        np.concatenate([ids[hm], ids[tm]]),
    )


def _aggregate(
    g: Graph,
    t: SpanTable,
    req: _Req,
    owner: np.ndarray,
    stage: np.ndarray,
    r: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
) -> pa.Table:
    nst = len(STAGES)
    key = r * nst + stage
    dur = e - s
    # per (request, stage, owner) first, to name the span that contributed most
    o_sort = _order_by(key, owner)
    k2, ow2 = key[o_sort], owner[o_sort]
    brk = np.ones(len(o_sort), dtype=bool)
    brk[1:] = (k2[1:] != k2[:-1]) | (ow2[1:] != ow2[:-1])
    seg = np.flatnonzero(brk)
    if not len(seg):
        return S.STAGES.empty_table()
    sums = np.add.reduceat(dur[o_sort], seg)
    mins = np.minimum.reduceat(s[o_sort], seg)
    kk, oo = k2[seg], ow2[seg]
    first = np.ones(len(kk), dtype=bool)
    first[1:] = kk[1:] != kk[:-1]
    seg2 = np.flatnonzero(first)
    total, best = _totals_and_best(kk, oo, sums, seg2)
    start = np.minimum.reduceat(mins, seg2)
    rq, st = kk[seg2] // nst, kk[seg2] % nst
    order = np.lexsort((start, rq))
    rq, st, total, start, best = rq[order], st[order], total[order], start[order], best[order]
    orig = np.where(best >= 0, g.orig[np.maximum(best, 0)], -1)
    span_ids = t.column("span_id", np.maximum(orig, 0), mask=orig < 0)
    names = t.column("name", np.maximum(orig, 0), mask=orig < 0)
    # column-wise lookups (no Python object per row)
    labels = pc.take(pa.array(g.label, type=pa.string()), pa.array(best, mask=best < 0))
    names = pc.coalesce(names, labels)
    return pa.Table.from_arrays(
        [
            pc.take(pa.array(req.request_id, type=pa.string()), pa.array(rq)),
            pc.take(pa.array(STAGES, type=pa.string()), pa.array(st)),
            pa.array(start),
            pa.array(total),
            span_ids,
            names,
        ],
        schema=S.STAGES,
    )


def _totals_and_best(
    kk: np.ndarray, oo: np.ndarray, sums: np.ndarray, seg: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per group of equal ``kk`` (sorted; groups start at ``seg``): the total of ``sums``
    added largest first, and the ``oo`` with the largest sum (the first such on ties).  No
    sort of the whole array: one or two parts add up the same in any order, so only groups
    of three or more are sorted."""
    n = len(kk)
    cnt = np.diff(np.append(seg, n))
    top = np.repeat(np.maximum.reduceat(sums, seg), cnt)
    pos = np.minimum.reduceat(np.where(sums == top, np.arange(n), n), seg)
    best = oo[np.where(pos < n, pos, seg)]  # NaN sums: the first
    total = np.add.reduceat(sums, seg)
    many = cnt > 2
    if many.any():
        sub = np.flatnonzero(np.repeat(many, cnt))
        o = sub[np.lexsort((-sums[sub], kk[sub]))]
        starts = np.ones(len(o), dtype=bool)
        starts[1:] = kk[o[1:]] != kk[o[:-1]]
        total[many] = np.add.reduceat(sums[o], np.flatnonzero(starts))
    return total, best


def _order_by(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))`` for non-negative ``major`` and ``minor >= -1``: one stable
    sort of a combined key (half the passes) when it fits in 62 bits."""
    if not len(major):
        return np.lexsort((minor, major))
    span = int(minor.max()) + 2
    if int(major.max()) >= 2**62 // span:
        return np.lexsort((minor, major))
    order: np.ndarray = np.argsort(major * span + (minor + 1), kind="stable")
    return order


def request_rows(t: SpanTable, req: _Req, existing: pa.Table) -> pa.Table:
    spec = req.span
    num = {k: v[spec] for k, v in t.num.items()}
    text = {k: t.text_at(k, spec) for k in t.text}
    ft = req.first_token
    # the user saw the outermost status; the engine span usually has none
    outer = t.num["http_status"][np.maximum(req.status_span, 0)]
    http = np.where(req.status_span >= 0, outer, num["http_status"])
    ms = req.model_span
    text["model"] = pc.coalesce(text["model"], t.text_at("model", np.maximum(ms, 0), ms < 0))
    span_status = t.column("status", spec).to_numpy(zero_copy_only=False)
    err = (span_status == "error") | (np.nan_to_num(http) >= 500)
    err_type = text["error_type"].to_pylist()
    errors = [
        (et or (f"http_{int(h)}" if h == h and h >= 500 else "span_error")) if bad else None
        for bad, et, h in zip(err.tolist(), err_type, http.tolist(), strict=True)
    ]

    def ints(a: np.ndarray, lo: float = 0, hi: float = 2.0**53) -> pa.Array:
        bad = np.isnan(a) | (a < lo) | (a >= hi)  # hostile or absurd values become null
        return pa.array(np.where(bad, 0, a).astype(np.int64), mask=bad)

    derived = pa.Table.from_arrays(
        [
            pa.array(req.request_id, type=pa.string()),
            t.column("trace_id", t.trace_starts[req.trace]),
            pa.array(req.arrival),
            pa.array(ft, mask=np.isnan(ft)),
            pa.array(req.finish),
            pa.array(ft - req.arrival, mask=np.isnan(ft)),
            pa.array(req.finish - req.arrival),
            ints(num["prompt_tokens"]),
            ints(num["output_tokens"]),
            pa.array(np.where(err, "error", "ok").tolist(), type=pa.string()),
            pa.array(errors, type=pa.string()),
            ints(http, 100, 1000).cast(pa.int32()),
            text["model"],
            text["replica"],
            text["node"],
            t.column("source", spec),
        ],
        schema=S.REQUESTS,
    )
    if not (req.existing >= 0).any():
        return derived
    # requests measured at the client keep their own values; spans fill what they lack
    idx = pa.array(req.existing, mask=req.existing < 0)
    old = existing.take(idx)
    cols = [pc.coalesce(old[f.name], derived[f.name]) for f in S.REQUESTS]
    return pa.Table.from_arrays(cols, schema=S.REQUESTS)
