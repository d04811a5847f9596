"""Column arrays behind :mod:`derive`: the normalised span table (one DuckDB query), the
graph the critical path walks (spans plus virtual roots and synthesised engine intervals), and
the construction of the ``requests`` and ``stages`` rows."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from tailtriage.derive.rules import RuleSet, rule_case_sql
from tailtriage.model.vocabulary import STAGES
from tailtriage.sources.spans import EVENTS_KEY, KIND_NAMES

if TYPE_CHECKING:
    pass

_STAGE: Final[dict[str, int]] = {s: i for i, s in enumerate(STAGES)}
_UNATTR: Final = _STAGE["unattributed"]
_DECODE: Final = _STAGE["decode"]

#: attributes read as numbers: column -> keys tried in order (telemetry-conventions 7.1);
#: Dynamo's ``engine.generate`` carries ``ttft_ms``, ``input_tokens`` and ``output_tokens``
#: (ai-dynamo/dynamo lib/backend-common/src/adapter.rs)
_NUMERIC: Final = {
    "engine_ttft": ("gen_ai.latency.time_to_first_token", "ttft_ms"),
    "lat_queue": ("gen_ai.latency.time_in_queue",),
    "lat_prefill": ("gen_ai.latency.time_in_model_prefill",),
    "lat_decode": ("gen_ai.latency.time_in_model_decode",),
    "lat_e2e": ("gen_ai.latency.e2e",),
    "first_chunk": ("gen_ai.response.time_to_first_chunk",),
    "prompt_tokens": (
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
        "input_tokens",
    ),
    "output_tokens": (
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
        "output_tokens",
    ),
    "http_status": ("http.response.status_code", "http.status_code"),
    # Envoy's resend count (router ``egress`` retries): connect and resend time is network
    "retry_count": ("retry.count", "http.request.resend_count"),
}
#: attributes given in milliseconds: the factor that reads them as seconds
MS_ATTRIBUTES: Final = {"ttft_ms": 1e-3}
#: ``Rule.synth_code`` of the ``first_token`` synthesizer (see ``Graph.add_engine_intervals``)
FIRST_TOKEN_SYNTH: Final = 2
#: names of the intervals the ``first_token`` synthesizer cuts (the attribute they come from)
CUT_LABELS: Final = {"prefill": "ttft_ms (queue + prefill)", "decode": "ttft_ms (decode)"}
#: attributes read as text
_TEXT: Final = {
    "model": ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name"),
    "error_type": ("error.type",),
    "replica": ("k8s.pod.name", "service.instance.id", "host.name"),
    "node": ("k8s.node.name", "host.name"),
    "host_key": ("host.id", "host.ip", "host.name", "k8s.pod.name", "service.instance.id"),
    "follows_from": ("tailtriage.follows_from",),
    "response_flags": ("response_flags",),
}
_EDGE_EVENT: Final = "first_downstream_tx_byte_sent"
#: Envoy's verbose span events read as offsets from the span start: column -> event name
#: (the edge's first byte sent, and the ends of the upstream pool wait: telemetry-conventions 4.1)
EVENT_COLUMNS: Final = {
    "edge_first_byte": _EDGE_EVENT,
    "envoy_rx": "last_downstream_rx_byte_received",
    "envoy_tx": "first_upstream_tx_byte_sent",
}
#: Envoy's per-try upstream span (``router <cluster> egress``): it starts when the pool wait ends
UPSTREAM_SPAN_REGEX: Final = "^router .+ egress$"
#: a response flag of an upstream connect failure: time to the first upstream byte is network
CONNECT_FAILURE_FLAG: Final = "UF"
#: shorter pool waits are rounding (event offsets and span starts each rounded to a
#: nanosecond, then added as floats), not a queue
MIN_POOL_WAIT_S: Final = 1e-6
#: the span name given to the synthesised pool-wait interval
POOL_WAIT_LABEL: Final = "envoy.upstream_pool_wait"


def _path(*keys: str) -> str:
    return "$" + "".join('."' + k.replace("\\", "\\\\").replace('"', '\\"') + '"' for k in keys)


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@dataclass
class SpanTable:
    """Deduplicated spans sorted by (trace, start), as arrays."""

    original: pa.Table  # the spans as given
    rid: np.ndarray  # row in ``original`` of each sorted span
    n: int
    tix: np.ndarray
    trace_starts: np.ndarray
    trace_ends: np.ndarray
    parent: np.ndarray
    has_parent_id: np.ndarray
    start: np.ndarray
    end: np.ndarray
    host: np.ndarray
    rule: np.ndarray
    stage_hint: np.ndarray
    synth: np.ndarray
    blocking: np.ndarray
    edge_first_byte: np.ndarray
    #: Envoy's last byte received downstream / first byte sent upstream (offsets; NaN: none)
    envoy_rx: np.ndarray
    envoy_tx: np.ndarray
    #: Envoy's ``router <cluster> egress`` span (one upstream try)
    upstream: np.ndarray
    #: an upstream connect failure (``UF``) or a resend: no pool wait is read from the events
    connect_retry: np.ndarray
    num: dict[str, np.ndarray]
    #: text attributes in the input order (rows of ``original``): see ``text_at``
    text: dict[str, pa.Array | pa.ChunkedArray]
    #: columns of ``original`` joined into one chunk, as ``column`` needs them
    combined: dict[str, pa.Array] = field(default_factory=dict)

    @property
    def engine_ttft(self) -> np.ndarray:
        return self.num["engine_ttft"]

    @property
    def first_chunk(self) -> np.ndarray:
        return self.num["first_chunk"]

    def text_at(self, name: str, pos: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
        """Text attribute ``name`` at sorted positions ``pos`` (null where ``mask``)."""
        rows = self.rid[np.asarray(pos, dtype=np.int64)]
        out = pc.take(self.text[name], pa.array(rows, mask=mask))
        return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out

    def column(self, name: str, pos: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
        """Column ``name`` of ``original`` at sorted positions ``pos`` (null where ``mask``).
        Only the rows asked for are gathered: sorting whole string columns of a million spans
        up front cost more than all the graph work."""
        rows = self.rid[np.asarray(pos, dtype=np.int64)]
        col = self.combined.get(name)
        if col is None:  # joined once: ``take`` from a chunked column joins it on every call
            col = self.combined[name] = self.original[name].combine_chunks()
        return pc.take(col, pa.array(rows, mask=mask))


def _extract_sql(rules: RuleSet) -> tuple[str, str]:
    """(per-span scan, rule per distinct combination).  The scan reads each span's JSON once
    (one parse, every key); the rules then run once per distinct (name, kind, service,
    rule attributes) combination rather than once per span."""
    keys: dict[str, None] = {}
    for ks in (*_NUMERIC.values(), *_TEXT.values()):
        keys.update(dict.fromkeys(ks))
    keys.update(dict.fromkeys(rules.attribute_keys()))
    key_list = list(keys)
    col = {k: f"a{i}" for i, k in enumerate(key_list)}
    if len({k.lower() for k in (*key_list, EVENTS_KEY)}) == len(key_list) + 1:
        # one parse into a struct of the keys (json_transform: about twice as fast as a list
        # of paths); its field names are case-insensitive, hence the check
        spec: dict[str, Any] = dict.fromkeys(key_list, "VARCHAR")
        spec[EVENTS_KEY] = dict.fromkeys(EVENT_COLUMNS.values(), "VARCHAR")
        parse = f"json_transform(attributes, {_lit(orjson.dumps(spec).decode())}) AS x"
        extracted = ", ".join(f"struct_extract(x, {_lit(k)}) AS {col[k]}" for k in key_list)
        ev = f"struct_extract(x, {_lit(EVENTS_KEY)})"
        events = [f"struct_extract({ev}, {_lit(e)})" for e in EVENT_COLUMNS.values()]
    else:
        ev_paths = [_lit(_path(EVENTS_KEY, e)) for e in EVENT_COLUMNS.values()]
        paths = ", ".join([*map(_lit, map(_path, key_list)), *ev_paths])
        parse = f"json_extract_string(attributes, [{paths}]) AS x"
        extracted = ", ".join(f"x[{i + 1}] AS a{i}" for i in range(len(key_list)))
        events = [f"x[{len(key_list) + 1 + i}]" for i in range(len(EVENT_COLUMNS))]
    edge = ", ".join(
        f"TRY_CAST({e} AS DOUBLE) AS {c}" for e, c in zip(events, EVENT_COLUMNS, strict=True)
    )
    upstream = f"regexp_matches(name, {_lit(UPSTREAM_SPAN_REGEX)}) AS envoy_upstream"

    def num(k: str) -> str:
        scale = MS_ATTRIBUTES.get(k)
        return f"TRY_CAST({col[k]} AS DOUBLE)" + (f" * {scale!r}" if scale else "")

    nums = ", ".join(
        f"coalesce({', '.join(num(k) for k in ks)}) AS {name}" for name, ks in _NUMERIC.items()
    )
    texts = ", ".join(
        f"coalesce({', '.join(col[k] for k in ks)}) AS {name}" for name, ks in _TEXT.items()
    )
    # presence-only attributes enter the rule key as present/absent, not by value
    valued = {k for r in rules.rules for k, v in r.attributes + r.any_attributes if v is not None}
    rule_cols = [col[k] for k in rules.attribute_keys()]
    key_exprs = ["name", "kind", "service"] + [
        c if k in valued else f"{c} IS NOT NULL"
        for k, c in zip(rules.attribute_keys(), rule_cols, strict=True)
    ]
    combo_exprs = ["name", "kind", "service"] + [
        c if k in valued else f"CASE WHEN {c} IS NOT NULL THEN '' END AS {c}"
        for k, c in zip(rules.attribute_keys(), rule_cols, strict=True)
    ]

    def inner(table: str) -> str:
        return f"""(SELECT rid, name, kind, service, {extracted}, {edge}
                    FROM (SELECT rid, name, kind, service, {parse} FROM {table}))"""

    rk = f"hash({', '.join(key_exprs)}) AS rk"
    cols = ", ".join(EVENT_COLUMNS)
    scan = f"SELECT rid, {cols}, {upstream}, {nums}, {texts}, {rk} FROM {inner('spans_in')}"
    # over one span per rule key (``reps``): the same key, and the rule it matches
    combos = f"""
    SELECT rk, ({rule_case_sql(rules, col)}) AS rule
    FROM (SELECT {rk}, {", ".join(combo_exprs)} FROM {inner("reps")})
    """
    return scan, combos


def _extract(spans: pa.Table, rules: RuleSet) -> pa.Table:
    """Per span (input order): extracted attributes and the index of the matching rule.  The
    scan returns only what derivation reads (each column more is a million values to store);
    the rules run over one span per distinct rule key."""
    scan_sql, combo_sql = _extract_sql(rules)
    spans_in = spans.select(["name", "kind", "service", "attributes"]).append_column(
        "rid", pa.array(np.arange(spans.num_rows))
    )
    con = duckdb.connect(":memory:")
    try:
        con.register("spans_in", spans_in)
        scanned = con.sql(scan_sql).to_arrow_table()
        rid = scanned["rid"].to_numpy()
        if len(rid) > 1 and not (np.diff(rid) > 0).all():
            scanned = scanned.take(pa.array(np.argsort(rid)))
        _, first = np.unique(scanned["rk"].to_numpy(), return_index=True)
        con.register("reps", spans_in.filter(_mask(spans_in.num_rows, first)))
        combos = con.sql(combo_sql).to_arrow_table()
    finally:
        con.close()
    pos = pc.index_in(scanned["rk"], value_set=combos["rk"])
    rule = pc.take(combos["rule"], pos)
    return scanned.append_column("rule", rule)


def _mask(n: int, rows: np.ndarray) -> pa.Array:
    """``rows`` of ``n`` as a filter.  (Tables are filtered, not taken from: ``take`` joins a
    chunked column into one first, a copy of every span's attributes.)"""
    keep = np.zeros(n, dtype=bool)
    keep[rows] = True
    return pa.array(keep)


def _order(
    spans: pa.Table, rank: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows of the kept copy of each (trace, span) ordered by (trace, start, span), the
    parent's position in that order or -1, trace code per input row).  The kept copy is the
    one of lowest ``rank`` (see :func:`dedup_rank`), else the first in the input."""
    trace = pc.dictionary_encode(spans["trace_id"].combine_chunks())
    tcode = np.asarray(trace.indices.to_numpy(), dtype=np.int64)
    sdict = pc.dictionary_encode(spans["span_id"].combine_chunks())
    scode = np.asarray(sdict.indices.to_numpy(), dtype=np.int64)
    pcode_arr = pc.fill_null(pc.index_in(spans["parent_id"], value_set=sdict.dictionary), -1)
    pcode = np.asarray(pcode_arr.to_numpy(zero_copy_only=False), dtype=np.int64)
    n_span = max(len(sdict.dictionary), 1)
    key = tcode * n_span + scode
    if rank is None:
        ukey, first = np.unique(key, return_index=True)  # first occurrence of each (trace, span)
    else:
        perm = np.lexsort((np.arange(len(key)), rank, key))
        ks = key[perm]
        head = np.ones(len(ks), dtype=bool)
        head[1:] = ks[1:] != ks[:-1]
        ukey, first = ks[head], perm[head]
    start0 = np.asarray(spans["start"].to_numpy(), dtype=np.float64)
    order = first[np.lexsort((scode[first], start0[first], tcode[first]))]
    n = len(order)
    pos = np.full(len(key), -1, dtype=np.int64)
    pos[order] = np.arange(n)
    pkey = tcode[order] * n_span + pcode[order]
    j = np.minimum(np.searchsorted(ukey, pkey), max(len(ukey) - 1, 0))
    found = (pcode[order] >= 0) & (ukey[j] == pkey) if len(ukey) else np.zeros(n, dtype=bool)
    parent = np.where(found, pos[first[j]], -1)
    return order, parent, tcode


def dedup_rank(spans: pa.Table, ex: pa.Table, rules: RuleSet) -> np.ndarray:
    """Per input row, its rank among the copies of its (trace, span id): the copies ordered by
    what derivation reads of them, (start, parent, end, kind, stage, level, synthesised,
    follows-from, edge first byte, status, name, numeric attributes, text attributes,
    service, host), nulls last; ties (copies equal in all of it) by input order.  This is the
    order the ClickHouse derivation keeps (``clickhouse_sql._FIELDS``): an export read there
    with duplicate ids gives the same answers, whatever order the rows come back in."""
    # only the rows of ids that occur more than once are ranked (the others are alone)
    tcode = np.asarray(pc.dictionary_encode(spans["trace_id"].combine_chunks()).indices)
    scode = np.asarray(pc.dictionary_encode(spans["span_id"].combine_chunks()).indices)
    key = tcode.astype(np.int64) * (int(scode.max(initial=0)) + 1) + scode
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    dup = counts[inverse] > 1
    rows = pa.array(np.flatnonzero(dup))
    spans, ex = spans.filter(pa.array(dup)), ex.filter(pa.array(dup))
    rule = np.asarray(pc.fill_null(ex["rule"], -1).to_numpy(), dtype=np.int64)
    stage = np.array([r.stage for r in rules.rules] + ["unattributed"], dtype=object)[rule]
    level = np.array([r.level for r in rules.rules] + [0], dtype=np.int64)[rule]
    synth = np.array([r.synth_code for r in rules.rules] + [0])[rule]
    parent = spans["parent_id"]
    kind = spans["kind"]
    cols: dict[str, Any] = {
        "start": spans["start"],
        "parent_id": pc.if_else(pc.equal(parent, ""), pa.scalar(None, pa.string()), parent),
        "end": spans["end"],
        "kind": pc.if_else(
            pc.is_in(kind, pa.array(KIND_NAMES[1:])), kind, pa.scalar(None, pa.string())
        ),
        "stage": pa.array(stage, type=pa.string()),
        "level": pa.array(level),
        "synth": pa.array(synth),
        "follows": pc.is_valid(ex["follows_from"]),
        "edge": ex["edge_first_byte"],
        "rx": ex["envoy_rx"],
        "tx": ex["envoy_tx"],
        "status": pc.fill_null(spans["status"], "unset"),
        "name": spans["name"],
        **{k: ex[k] for k in _NUMERIC},
        **{k: ex[k] for k in _TEXT if k not in ("host_key", "follows_from")},
        "service": pc.fill_null(spans["service"], ""),
        "host_key": ex["host_key"],
    }
    tab = pa.table(cols)
    by = pc.sort_indices(tab, sort_keys=[(k, "ascending", "at_end") for k in cols]).to_numpy()
    rank = np.zeros(len(key), dtype=np.int64)
    rank[np.asarray(rows)[by]] = np.arange(len(by))
    return rank


def normalise(spans: pa.Table, rules: RuleSet) -> SpanTable:
    """Deduplicate, order by (trace, start) and link parents with integer codes (numpy), after
    one DuckDB scan for attributes and rules, which runs in a thread meanwhile (DuckDB, numpy
    and Arrow release the GIL: the two overlap on two cores)."""
    with ThreadPoolExecutor(1, thread_name_prefix="tailtriage-extract") as pool:
        scan = pool.submit(_extract, spans, rules)
        order, parent, tcode = _order(spans)
        ex = scan.result()
    if len(order) < spans.num_rows:  # duplicate span ids: keep the copy ClickHouse keeps too
        order, parent, tcode = _order(spans, dedup_rank(spans, ex, rules))
    start0 = np.asarray(spans["start"].to_numpy(), dtype=np.float64)
    n = len(order)
    t_sorted = tcode[order]
    change = np.ones(n, dtype=bool)
    change[1:] = t_sorted[1:] != t_sorted[:-1]
    trace_starts = np.flatnonzero(change)

    # per-span columns gathered into sorted order with numpy (only those the graph needs)
    def f64(name: str) -> np.ndarray:
        out: np.ndarray = np.asarray(ex[name].to_numpy(zero_copy_only=False), dtype=np.float64)
        taken: np.ndarray = np.take(out, order)
        return taken

    def flag(a: pa.ChunkedArray | pa.Array) -> np.ndarray:
        out: np.ndarray = np.asarray(pc.fill_null(a, False).to_numpy(zero_copy_only=False))
        taken: np.ndarray = np.take(out, order)
        return taken

    rule = np.asarray(pc.fill_null(ex["rule"], -1).to_numpy(), dtype=np.int64)[order]
    stage_of_rule = np.array([_STAGE[r.stage] for r in rules.rules] + [_UNATTR], dtype=np.int64)
    synth_of_rule = np.array([r.synth_code for r in rules.rules] + [0], dtype=np.int64)
    # host codes are only compared for equality: any consistent numbering will do
    host = pc.dictionary_encode(ex["host_key"].combine_chunks()).indices
    consumer = flag(pc.equal(spans["kind"], "CONSUMER"))
    producer = flag(pc.equal(spans["kind"], "PRODUCER"))
    parent_producer = np.where(parent >= 0, producer[np.maximum(parent, 0)], False)
    follows = flag(pc.is_valid(ex["follows_from"]))
    return SpanTable(
        original=spans,
        rid=order,
        n=n,
        tix=np.cumsum(change) - 1,
        trace_starts=trace_starts,
        trace_ends=np.append(trace_starts[1:], n),
        parent=parent,
        has_parent_id=flag(pc.is_valid(spans["parent_id"])),
        start=start0[order],
        end=np.asarray(spans["end"].to_numpy(), dtype=np.float64)[order],
        host=np.asarray(pc.fill_null(host, -1).to_numpy(), dtype=np.int64)[order],
        rule=rule,
        stage_hint=stage_of_rule[rule],
        synth=synth_of_rule[rule],
        blocking=~((consumer & parent_producer) | follows),
        edge_first_byte=f64("edge_first_byte"),
        envoy_rx=f64("envoy_rx"),
        envoy_tx=f64("envoy_tx"),
        upstream=flag(ex["envoy_upstream"]),
        connect_retry=flag(
            pc.or_kleene(
                pc.match_substring(ex["response_flags"], CONNECT_FAILURE_FLAG),
                pc.greater(ex["retry_count"], 0),
            )
        ),
        num={name: f64(name) for name in _NUMERIC},
        text={name: ex[name] for name in ("model", "error_type", "replica", "node")},
    )


def output_spans(t: SpanTable) -> pa.Table:
    """The spans as given (minus duplicates), with clock-skew-corrected times."""
    start = t.original["start"].to_numpy().copy()
    end = t.original["end"].to_numpy().copy()
    start[t.rid] = t.start
    end[t.rid] = t.end
    tab = t.original
    if t.n < tab.num_rows:
        keep = np.zeros(tab.num_rows, dtype=bool)
        keep[t.rid] = True
        tab, start, end = tab.filter(pa.array(keep)), start[keep], end[keep]
    tab = tab.set_column(tab.schema.get_field_index("start"), "start", pa.array(start))
    return tab.set_column(tab.schema.get_field_index("end"), "end", pa.array(end))


# -- the graph the critical path walks ----------------------------------------------------------
@dataclass
class Graph:
    orig: np.ndarray  # row in the SpanTable, -1 for virtual roots / synthesised intervals
    parent: np.ndarray
    start: np.ndarray
    end: np.ndarray
    blocking: np.ndarray
    stage: np.ndarray
    tix: np.ndarray
    label: list[str | None]  # span name for synthesised rows

    @classmethod
    def of(cls, t: SpanTable, parent: np.ndarray, keep: np.ndarray) -> Graph:
        rows = np.flatnonzero(keep)
        local = np.full(t.n, -1, dtype=np.int64)
        local[rows] = np.arange(len(rows))
        p = parent[rows]
        return cls(
            orig=rows,
            parent=np.where(p >= 0, local[np.maximum(p, 0)], -1),
            start=t.start[rows],
            end=t.end[rows],
            blocking=t.blocking[rows],
            stage=t.stage_hint[rows],
            tix=t.tix[rows],
            label=[None] * len(rows),
        )

    def _append(
        self,
        parent: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        stage: np.ndarray,
        tix: np.ndarray,
        labels: list[str | None],
    ) -> np.ndarray:
        first = len(self.orig)
        k = len(parent)
        self.orig = np.concatenate([self.orig, np.full(k, -1, dtype=np.int64)])
        self.parent = np.concatenate([self.parent, parent])
        self.start = np.concatenate([self.start, start])
        self.end = np.concatenate([self.end, end])
        self.blocking = np.concatenate([self.blocking, np.ones(k, dtype=bool)])
        self.stage = np.concatenate([self.stage, stage])
        self.tix = np.concatenate([self.tix, tix])
        self.label += labels
        return np.arange(first, first + k)

    def add_virtual_roots(self) -> None:
        """Traces with several roots get one root over them all, so gaps between the trees
        are kept (as unattributed) and overlapping trees are counted once."""
        roots = np.flatnonzero(self.parent < 0)
        rt = self.tix[roots]
        uniq, count = np.unique(rt, return_counts=True)
        multi = uniq[count > 1]
        if not len(multi):
            return
        order = np.argsort(rt, kind="stable")
        seg = np.searchsorted(rt[order], uniq)
        lo = np.minimum.reduceat(self.start[roots][order], seg)[count > 1]
        hi = np.maximum.reduceat(self.end[roots][order], seg)[count > 1]
        new = self._append(
            np.full(len(multi), -1, dtype=np.int64),
            lo,
            hi,
            np.full(len(multi), _UNATTR, dtype=np.int64),
            multi,
            [None] * len(multi),
        )
        vroot = np.full(int(self.tix.max()) + 1, -1, dtype=np.int64)
        vroot[multi] = new
        moved = roots[np.isin(rt, multi)]
        self.parent[moved] = vroot[self.tix[moved]]

    def add_engine_intervals(self, t: SpanTable) -> None:
        """Engine spans without queue/prefill/decode children: those intervals, placed from
        the span's ``gen_ai.latency.*`` attributes (vLLM; first token = start +
        time_to_first_token), or (``first_token``: Dynamo's aggregated ``engine.generate``)
        cut at start + its TTFT: before it prefill (with the engine's queue wait, which the
        span does not separate), after it decode."""
        cand = np.flatnonzero((self.orig >= 0) & (t.synth[np.maximum(self.orig, 0)] > 0))
        if not len(cand):
            return
        engine_child = np.isin(self.stage, [_STAGE["engine_queue"], _STAGE["prefill"], _DECODE])
        has = np.zeros(len(self.orig), dtype=bool)
        kids_parent = self.parent[engine_child & (self.parent >= 0)]
        has[kids_parent] = True
        cand = cand[~has[cand]]
        o = self.orig[cand]
        s, e = self.start[cand], self.end[cand]
        num = t.num
        q, pf, dec = (np.nan_to_num(num[k][o]) for k in ("lat_queue", "lat_prefill", "lat_decode"))
        ft = num["engine_ttft"][o]
        ft = np.where(np.isnan(ft), num["lat_e2e"][o] - dec, ft)
        ft = np.where(np.isnan(ft), (e - s) - dec, ft)
        cut = t.synth[o] == FIRST_TOKEN_SYNTH
        q, pf, dec = np.where(cut, 0.0, q), np.where(cut, ft, pf), np.where(cut, (e - s) - ft, dec)
        known = ~np.isnan(num["engine_ttft"][o])
        for k in ("lat_queue", "lat_prefill", "lat_decode"):
            known |= ~np.isnan(num[k][o])
        ok = known & ~np.isnan(ft) & ~(cut & np.isnan(num["engine_ttft"][o]))
        cand, s, e, q, pf, dec, ft, cut = (a[ok] for a in (cand, s, e, q, pf, dec, ft, cut))
        ft_abs = s + ft
        parts = [
            ("engine_queue", ft_abs - pf - q, ft_abs - pf, "gen_ai.latency.time_in_queue"),
            ("prefill", ft_abs - pf, ft_abs, "gen_ai.latency.time_in_model_prefill"),
            ("decode", ft_abs, ft_abs + dec, "gen_ai.latency.time_in_model_decode"),
        ]
        for stage, a, b, label in parts:
            m = b > a
            labels = np.where(cut[m], CUT_LABELS.get(stage, label), label)
            self._append(
                cand[m],
                a[m],
                b[m],
                np.full(int(m.sum()), _STAGE[stage], dtype=np.int64),
                self.tix[cand[m]],
                labels.tolist(),
            )

    def add_gateway_queue(self, t: SpanTable) -> None:
        """Envoy's wait for an upstream connection (telemetry-conventions 4.1): from the
        span's ``last_downstream_rx_byte_received`` to the start of its first ``router …
        egress`` child, else to its ``first_upstream_tx_byte_sent`` unless a connect failure
        (``UF``) or a resend put network time there.  Connect tries, retries and transfer
        (the egress children) stay ``ingress``; time before the last byte arrived (TLS, the
        request body) too."""
        real = self.orig >= 0
        o = np.maximum(self.orig, 0)
        cand = np.flatnonzero(real & ~np.isnan(t.envoy_rx[o]))
        if not len(cand):
            return
        first_try = np.full(len(self.orig), np.inf)
        tries = np.flatnonzero(real & t.upstream[o] & (self.parent >= 0))
        np.minimum.at(first_try, self.parent[tries], self.start[tries])
        oc = self.orig[cand]
        s = self.start[cand]
        a = s + t.envoy_rx[oc]
        by_event = np.where(t.connect_retry[oc], np.nan, s + t.envoy_tx[oc])
        b = np.where(np.isfinite(first_try[cand]), first_try[cand], by_event)
        m = b - a > MIN_POOL_WAIT_S  # NaN (no end) compares false
        k = int(m.sum())
        self._append(
            cand[m],
            a[m],
            b[m],
            np.full(k, _STAGE["gateway_queue"], dtype=np.int64),
            self.tix[cand[m]],
            [POOL_WAIT_LABEL] * k,
        )
