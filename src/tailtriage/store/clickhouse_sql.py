"""The logical tables ``requests`` and ``stages`` derived from ``otel_traces`` inside ClickHouse.

The same semantics as :mod:`tailtriage.derive.derive` (and the same rules file), written as
three SQL steps so that no span ever leaves the server:

1. **spans** — every span in the window normalised: seconds, kind and status in one spelling
   (``Server`` and ``SPAN_KIND_SERVER`` alike), the attributes the rules and the request fields
   need (span attributes over resource attributes, as the file sources merge them), Envoy's
   ``first_downstream_tx_byte_sent`` event, and the index of the first matching stage rule
   (the rules compiled to one ``multiIf``; ``match`` is RE2, as DuckDB's ``regexp_matches``).
2. **traces** — one row per trace (``GROUP BY TraceId``): the spans as arrays sorted by
   (start, span id, ...), repaired as file ingest repairs them (:func:`repair_sql`: one copy
   of each duplicate span id, the tree by ``indexOf``, clock skew corrected the way Jaeger's
   adjuster does, each repair counted), then, for the traces that hold an inference span,
   with array functions the request's fields (arrival, first token, the most specific
   inference span's tokens/status/model) and its critical-path sections: virtual root over
   several roots, vLLM ``gen_ai.latency.*`` intervals, children clipped to their parent,
   Jaeger's walk (each span on the path owns its time minus its children's on the path),
   split at the first token.
3. **stages** — the sections summed per (request, stage), naming the span that gave most.

Exactness: the rows equal the Python derive's, overlapping siblings included (Jaeger's walk:
one ``arrayFold`` per trace over each parent's children by end time).  Clock skew is followed
:data:`MAX_DEPTH` levels deep (file ingest: 4096), a span's ancestors 32 levels up, children
are clipped to their parent's own bounds, and parent cycles are not cut here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from tailtriage.derive._spantable import (
    _NUMERIC,
    _TEXT,
    CONNECT_FAILURE_FLAG,
    CUT_LABELS,
    EVENT_COLUMNS,
    FIRST_TOKEN_SYNTH,
    MIN_POOL_WAIT_S,
    MS_ATTRIBUTES,
    POOL_WAIT_LABEL,
    UPSTREAM_SPAN_REGEX,
)
from tailtriage.derive.critical_path import EPS
from tailtriage.derive.rules import Rule, RuleSet
from tailtriage.derive.skew import MAX_SKEW_S, TOLERANCE_S
from tailtriage.store.base import literal as literal

EDGE_EVENT: Final = EVENT_COLUMNS["edge_first_byte"]
#: ancestor steps followed to rank "outermost" spans (deeper traces tie at this depth)
MAX_DEPTH: Final = 12
_ENGINE_STAGES: Final = ("engine_queue", "prefill", "decode")
#: fields of one span inside the per-trace tuple array, in tuple order
_FIELDS: Final = (
    "start",
    "span_id",
    "parent_id",
    "end",
    "kind",
    "stage",
    "level",
    "synth",
    "follows",
    "edge",
    "rx",
    "tx",
    "status",
    "name",
    *_NUMERIC,
    *(k for k in _TEXT if k not in ("host_key", "follows_from")),
    "service",
    "host_key",
)


def _s(value: str) -> str:
    return literal(value)


# -- step 1: normalised spans ------------------------------------------------------------------
def _attr(key: str) -> str:
    k = _s(key)
    return (
        f"if(mapContains(SpanAttributes, {k}), SpanAttributes[{k}], "
        f"if(mapContains(ResourceAttributes, {k}), ResourceAttributes[{k}], NULL))"
    )


def _attr_cond(key: str, regex: str | None, col: dict[str, str]) -> str:
    if regex is None:
        return f"({col[key]} IS NOT NULL)"
    return f"coalesce(match({col[key]}, {_s(regex)}), 0)"


def rule_condition(rule: Rule, col: dict[str, str]) -> str:
    """ClickHouse boolean of one rule (the twin of ``rules.rule_condition`` for DuckDB)."""
    conds = []
    if rule.names:
        conds.append(f"name IN ({', '.join(_s(n) for n in rule.names)})")
    if rule.name_regex:
        conds.append(f"match(name, {_s(rule.name_regex)})")
    if rule.kinds:
        conds.append(f"coalesce(kind IN ({', '.join(_s(k) for k in rule.kinds)}), 0)")
    if rule.service_regex:
        conds.append(f"coalesce(match(service, {_s(rule.service_regex)}), 0)")
    conds += [_attr_cond(k, v, col) for k, v in rule.attributes]
    if rule.any_attributes:
        conds.append("(" + " OR ".join(_attr_cond(k, v, col) for k, v in rule.any_attributes) + ")")
    return " AND ".join(conds) if conds else "1"


def _rule_index(rules: RuleSet, col: dict[str, str]) -> str:
    if not rules.rules:
        return "-1"
    parts = [f"{rule_condition(r, col)}, {i}" for i, r in enumerate(rules.rules)]
    return f"multiIf({', '.join(parts)}, -1)"


def _by_rule(rules: RuleSet, values: Sequence[str], default: str) -> str:
    """Per rule index, a constant (the rule's stage, level, ...)."""
    return (
        f"arrayElement([{', '.join(values)}, {default}], if(rule < 0, {len(values) + 1}, rule + 1))"
    )


def spans_sql(table: str, where: str, rules: RuleSet) -> str:
    """One row per span of ``table`` matching ``where``, normalised (step 1)."""
    keys: dict[str, None] = {}
    for ks in (*_NUMERIC.values(), *_TEXT.values()):
        keys.update(dict.fromkeys(ks))
    keys.update(dict.fromkeys(rules.attribute_keys()))
    col = {k: f"a{i}" for i, k in enumerate(keys)}
    extracted = ",\n        ".join(f"{_attr(k)} AS {col[k]}" for k in keys)

    def num(k: str) -> str:
        scale = MS_ATTRIBUTES.get(k)
        return f"toFloat64OrNull({col[k]})" + (f" * {scale!r}" if scale else "")

    nums = ",\n    ".join(
        f"coalesce({', '.join(num(k) for k in ks)}) AS {name}" for name, ks in _NUMERIC.items()
    )
    texts = ",\n    ".join(
        f"coalesce({', '.join(col[k] for k in ks)}) AS {name}" for name, ks in _TEXT.items()
    )
    stage_names = [_s(r.stage) for r in rules.rules]
    levels = [str(r.level) for r in rules.rules]
    synth = [str(r.synth_code) for r in rules.rules]
    events = ",\n            ".join(
        f"""indexOf(`Events.Name`, {_s(ev)}) AS {c}_i,
            if({c}_i > 0,
               toNullable(toFloat64(toUnixTimestamp64Nano(`Events.Timestamp`[{c}_i]) - start_ns)
                          / 1e9),
               NULL) AS {c}"""
        for c, ev in zip(("edge", "rx", "tx"), EVENT_COLUMNS.values(), strict=True)
    )
    return f"""
SELECT trace_id, span_id, parent_id, name, kind, service, status, start, end, edge, rx, tx,
    {_by_rule(rules, stage_names, _s("unattributed"))} AS stage,
    {_by_rule(rules, levels, "0")} AS level,
    {_by_rule(rules, synth, "0")} AS synth,
    follows_from IS NOT NULL AS follows,
    {nums},
    {texts}
FROM (
    SELECT *, {_rule_index(rules, col)} AS rule
    FROM (
        SELECT TraceId AS trace_id, SpanId AS span_id, nullIf(ParentSpanId, '') AS parent_id,
            toString(SpanName) AS name, toString(ServiceName) AS service,
            replaceRegexpOne(upper(toString(SpanKind)), '^SPAN_KIND_', '') AS kind0,
            if(kind0 IN ('SERVER', 'CLIENT', 'INTERNAL', 'PRODUCER', 'CONSUMER'),
               toNullable(kind0), NULL) AS kind,
            multiIf(upper(toString(StatusCode)) IN ('ERROR', 'STATUS_CODE_ERROR'), 'error',
                    upper(toString(StatusCode)) IN ('OK', 'STATUS_CODE_OK'), 'ok', 'unset')
                AS status,
            toUnixTimestamp64Nano(Timestamp) AS start_ns,
            toFloat64(start_ns) / 1e9 AS start,
            toFloat64(start_ns + toInt64(Duration)) / 1e9 AS end,
            {events},
        {extracted}
        FROM {table}
        WHERE {where}
    )
)"""


# -- step 2: one row per request trace ----------------------------------------------------------
def _col(name: str) -> str:
    return f"arrayMap(x -> x.{_FIELDS.index(name) + 1}, S)"


def _layers(base: str, layers: Sequence[str]) -> str:
    """Nest ``SELECT *, <layer> FROM (...)``: ClickHouse inlines aliases, so each group of
    derived arrays is computed once in its own level instead of being copied into the next."""
    sql = base
    for exprs in layers:
        sql = f"SELECT *, {exprs}\nFROM ({sql})"
    return sql


def _skew_step(prev: str, i: str) -> str:
    """The clock-skew shift of span ``i`` from its parent's shift in ``prev`` (the twin of
    ``skew.skew_deltas``: the same float operations in the same order)."""
    tol, cap = repr(TOLERANCE_S), repr(MAX_SKEW_S)
    p = f"pidx0[{i}]"
    cs, ce = f"s0[{i}]", f"e0[{i}]"
    ps, pe = f"(s0[{p}] + {prev}[{p}])", f"(e0[{p}] + {prev}[{p}])"
    cdur, pdur = f"({ce} - {cs})", f"({pe} - {ps})"
    longer = f"if({cs} < {ps} - {tol}, {ps} - {cs}, 0.)"
    fits = f"({cs} >= {ps} - {tol} AND {ce} <= {pe} + {tol})"
    centred = f"if({fits}, 0., (({ps} + (({pdur} - {cdur}) / 2.)) - {cs}))"
    own = f"if({cdur} > {pdur}, {longer}, {centred})"
    d = f"if(coalesce(hk[{i}] = hk[{p}], 0), {prev}[{p}], {own})"
    return f"if({p} = 0, 0., if(abs({d}) > {cap}, 0., {d}))"


def repair_sql(spans: str, having: str) -> str:
    """Per trace (every trace, requests or not): its spans without duplicate ids, the parent
    index, and the clock-skew shift of each span; the counts of what was repaired.

    Of the copies of one (trace, span id) the one kept is the first in the per-trace order,
    i.e. the smallest tuple of :data:`_FIELDS` (start, parent, end, kind, ...): the file derive
    keeps the same one (``_spantable.dedup_rank``)."""
    tup = ", ".join(f"`{f}`" for f in _FIELDS)
    at = {f: i + 1 for i, f in enumerate(_FIELDS)}
    # Jaeger walks the tree level by level; here MAX_DEPTH sweeps over the spans in trace
    # order (Gauss-Seidel: each sweep settles at least one more level, so every span up to
    # that depth gets its final shift from its parent's final shift), one arrayFold per trace,
    # with no step at all for the traces where no child lies outside its parent (an ``if``
    # around the fold cost a third of the derivation even when short-circuited)
    at_i = "((j % nr) + 1)"
    sweep = (
        f"arrayFold((acc, j) -> arrayConcat(arraySlice(acc, 1, {at_i} - 1), "
        f"[{_skew_step('acc', at_i)}], arraySlice(acc, {at_i} + 1)), "
        f"range({MAX_DEPTH} * nr * skewed), d0)"
    )
    layers = [
        f"""length(S) AS nr, range(1, nr + 1) AS r, arrayMap(x -> x.{at["span_id"]}, S) AS sids,
    arrayMap(x -> x.{at["parent_id"]}, S) AS pids, arrayMap(x -> x.{at["start"]}, S) AS s0,
    arrayMap(x -> x.{at["end"]}, S) AS e0, arrayMap(x -> x.{at["host_key"]}, S) AS hk""",
        "arrayMap(p -> if(p IS NULL, 0, indexOf(sids, p)), pids) AS found",
        """arrayMap(f, i -> if(f = i, 0, f), found, r) AS pidx0,
    arrayCount(p, f -> p IS NOT NULL AND f = 0, pids, found) AS n_orphan""",
        # no child outside its parent: nothing moves (and the fold takes no step)
        f"""arrayExists(i -> pidx0[i] > 0 AND NOT (s0[i] >= s0[pidx0[i]] - {TOLERANCE_S!r}
                                        AND e0[i] <= e0[pidx0[i]] + {TOLERANCE_S!r}), r)
        AS skewed,
    arrayMap(i -> 0., r) AS d0""",
        f"{sweep} AS delta",
        "arrayCount(x -> x != 0, delta) AS n_moved",
        f"""if(n_moved = 0, [], arrayFilter(x -> x.3 != 0, arrayMap(
        x, d -> (x.{at["span_id"]}, x.{at["service"]}, d), S, delta))) AS moved""",
    ]
    base = f"""SELECT trace_id, S, length(S0) - length(S) AS n_dup, is_req0
FROM (
    SELECT trace_id, arraySort(groupArray(({tup}))) AS S0,
        arrayFilter(x, u -> u = 1, S0, arrayEnumerateUniq(arrayMap(x -> x.{at["span_id"]}, S0)))
            AS S,
        {having} AS is_req0
    FROM ({spans})
    GROUP BY trace_id
)"""
    return _layers(base, layers)


def traces_sql(spans: str, window: tuple[float, float] | None) -> str:
    """One row per trace: ``is_req`` when it is a request (a trace with an inference span,
    arriving in ``window``), then with the request fields and sections; every row with the
    counts of :func:`repair_sql` (duplicates dropped, orphans, spans shifted for clock skew)."""
    reused = {
        "span_id": "sids",
        "parent_id": "pids",
        "host_key": "hk",
        "start": "arrayMap(x, d -> x + d, s0, delta)",  # ``t.start + delta`` in derive
        "end": "arrayMap(x, d -> x + d, e0, delta)",
    }
    cols = ",\n    ".join(f"{reused.get(f, _col(f))} AS {f}s" for f in _FIELDS)
    unattr = _s("unattributed")
    pool_label = _s(POOL_WAIT_LABEL)
    engine = ", ".join(_s(s) for s in _ENGINE_STAGES)
    having = "max(level) > 0"
    in_window = "1"
    if window is not None:
        # the root must be in the window too, or a trace cut by `since` would arrive late
        having += " AND countIf(parent_id IS NULL) > 0"
        in_window = (
            f"arrival >= {literal(float(window[0]))} AND arrival < {literal(float(window[1]))}"
        )
    # other traces only bring their counts, and only when there is something to count
    base = f"""SELECT trace_id, is_req0, n_dup, n_orphan, n_moved, moved, S, delta,
    pidx0 AS pidx, nr AS n, r AS idx,
    {cols}
FROM ({repair_sql(spans, having)})
WHERE is_req0 OR n_dup > 0 OR n_orphan > 0 OR n_moved > 0"""
    anc = ["pidx AS anc1"] + [
        f"arrayMap(x -> pidx[x], anc{k - 1}) AS anc{k}" for k in range(2, MAX_DEPTH + 1)
    ]
    depth = " + ".join(f"toUInt32(anc{k}[i] > 0)" for k in range(1, MAX_DEPTH + 1))
    layers = [
        ",\n    ".join(anc),
        f"""arrayMap(i -> {depth}, idx) AS depth,
    arrayMap(i -> NOT (coalesce(kinds[i] = 'CONSUMER' AND kinds[pidx[i]] = 'PRODUCER', 0)
                       OR followss[i]), idx) AS blocking,
    arrayFilter(i -> pidx[i] = 0, idx) AS roots,
    arrayMap(x -> match(x, {_s(UPSTREAM_SPAN_REGEX)}), names) AS ups""",
        """length(roots) AS nroots,
    arrayMin(arrayMap(i -> starts[i], roots)) AS arrival,
    arrayMax(arrayMap(i -> ends[i], roots)) AS finish,
    arraySort(i -> (-levels[i], depth[i], starts[i], i), idx)[1] AS spec,
    arrayFilter(x -> x IS NOT NULL, arrayMap(i -> starts[i] + edges[i], idx)) AS edge_ts,
    arrayFilter(i -> stages[i] IN ('prefill', 'kv_transfer'), idx) AS prefills,
    arraySort(i -> (depth[i], starts[i], i), arrayFilter(i -> http_statuss[i] IS NOT NULL, idx))
        AS with_status,
    arraySort(i -> (depth[i], starts[i], i), arrayFilter(i -> models[i] IS NOT NULL, idx))
        AS with_model,
    arrayFilter(p -> p > 0,
                arrayMap(i -> if(stages[i] IN ({engine}), pidx[i], 0), idx)) AS engine_parents,
    -- the first_token synthesizer (Dynamo's aggregated engine.generate): no queue, prefill
    -- to start + TTFT, decode after it
    arrayMap(i -> synths[i] = {cut}, idx) AS cuts,
    arrayMap(i -> if(cuts[i], 0, ifNull(lat_queues[i], 0)), idx) AS qv,
    arrayMap(i -> if(cuts[i], ifNull(engine_ttfts[i], nan), ifNull(lat_prefills[i], 0)), idx)
        AS pfv,
    arrayMap(i -> if(cuts[i], (ends[i] - starts[i]) - ifNull(engine_ttfts[i], nan),
                     ifNull(lat_decodes[i], 0)), idx) AS decv""".replace(
            "{engine}", engine
        ).replace("{cut}", str(FIRST_TOKEN_SYNTH)),
        # first token: the edge's first byte, else the engine's, else prefill end, else GenAI
        """if(empty(edge_ts), NULL, arrayMax(edge_ts)) AS edge_t,
    if(empty(prefills), NULL, toNullable(arrayMax(arrayMap(i -> ends[i], prefills)))) AS pf_t,
    if(empty(with_status), http_statuss[spec], http_statuss[with_status[1]]) AS http,
    coalesce(models[spec], if(empty(with_model), NULL, models[with_model[1]])) AS model,
    if(nroots > 1, arrayMap(p -> if(p = 0, n + 1, p), pidx), pidx) AS par_real,
    -- vLLM V1 spans without engine children: intervals from gen_ai.latency.* (first token =
    -- start + time_to_first_token; else e2e - decode; else the span's end - decode)
    arrayFilter(i -> synths[i] > 0 AND NOT has(engine_parents, i)
                     AND (engine_ttfts[i] IS NOT NULL OR lat_queues[i] IS NOT NULL
                          OR lat_prefills[i] IS NOT NULL OR lat_decodes[i] IS NOT NULL), idx)
        AS synth_spans,
    arrayMap(i -> starts[i] + coalesce(engine_ttfts[i], lat_e2es[i] - decv[i],
                                       (ends[i] - starts[i]) - decv[i]), idx) AS fav,
    arrayFilter(i -> rxs[i] IS NOT NULL, idx) AS gw_cand,
    arrayMap(i -> arrayMap(j -> starts[j], arrayFilter(j -> pidx[j] = i AND ups[j], idx)),
             gw_cand) AS gw_tries""",
        """coalesce(edge_t, starts[spec] + engine_ttfts[spec], pf_t,
             starts[spec] + first_chunks[spec]) AS ft0,
    statuss[spec] = 'error' OR coalesce(http, 0) >= 500 AS failed,
    arrayFilter(x -> x.3 > x.2, arrayFlatten(arrayMap(i -> [
            (i, fav[i] - pfv[i] - qv[i], fav[i] - pfv[i], 'engine_queue',
             'gen_ai.latency.time_in_queue'),
            (i, fav[i] - pfv[i], fav[i], 'prefill',
             if(cuts[i], {cut_prefill}, 'gen_ai.latency.time_in_model_prefill')),
            (i, fav[i], fav[i] + decv[i], 'decode',
             if(cuts[i], {cut_decode}, 'gen_ai.latency.time_in_model_decode'))],
        synth_spans))) AS synth_raw,
    -- Envoy's upstream pool wait: last byte received -> first ``router ... egress`` try, else
    -- -> first upstream byte sent, unless a connect failure or a resend put network there
    arrayFilter(x -> x.3 - x.2 > {min_wait}, arrayMap(i, tries -> (i,
            starts[i] + assumeNotNull(rxs[i]),
            if(empty(tries),
               if(coalesce(position(response_flagss[i], {uf}) > 0, 0)
                  OR coalesce(retry_counts[i] > 0, 0), nan, ifNull(starts[i] + txs[i], nan)),
               arrayMin(tries))), gw_cand, gw_tries)) AS gw_raw""".replace(
            "{uf}", _s(CONNECT_FAILURE_FLAG)
        )
        .replace("{min_wait}", repr(MIN_POOL_WAIT_S))
        .replace("{cut_prefill}", _s(CUT_LABELS["prefill"]))
        .replace("{cut_decode}", _s(CUT_LABELS["decode"])),
        # the graph the critical path walks: spans, a virtual root, vLLM latency intervals
        f"""if(ft0 IS NULL, NULL, least(greatest(ft0, arrival), greatest(finish, arrival))) AS ft,
    n + toUInt32(nroots > 1) + length(synth_raw) + length(gw_raw) AS n_nodes,
    arrayConcat(par_real, if(nroots > 1, [0], []), arrayMap(x -> x.1, synth_raw),
                arrayMap(x -> x.1, gw_raw)) AS g_par,
    arrayConcat(starts, if(nroots > 1, [arrival], []), arrayMap(x -> x.2, synth_raw),
                arrayMap(x -> x.2, gw_raw)) AS g_lo,
    arrayConcat(ends, if(nroots > 1, [finish], []), arrayMap(x -> x.3, synth_raw),
                arrayMap(x -> x.3, gw_raw)) AS g_hi,
    arrayConcat(stages, if(nroots > 1, [{unattr}], []), arrayMap(x -> x.4, synth_raw),
                arrayMap(x -> 'gateway_queue', gw_raw)) AS g_stage,
    arrayConcat(blocking, if(nroots > 1, [1], []), arrayMap(x -> 1, synth_raw),
                arrayMap(x -> 1, gw_raw)) AS g_block,
    arrayConcat(arrayMap(i -> toNullable(span_ids[i]), idx), if(nroots > 1, [NULL], []),
                arrayMap(x -> NULL, synth_raw), arrayMap(x -> NULL, gw_raw)) AS g_span,
    arrayConcat(arrayMap(i -> toNullable(names[i]), idx), if(nroots > 1, [NULL], []),
                arrayMap(x -> toNullable(x.5), synth_raw),
                arrayMap(x -> toNullable({pool_label}), gw_raw)) AS g_name,
    range(1, n_nodes + 1) AS gn""",
        # Jaeger's sanitising: a child is clipped to its parent; outside it, or not blocking,
        # it (and what it holds) is off the path
        """arrayMap(k -> g_par[k] = 0 OR (g_block[k] AND g_lo[k] < g_hi[g_par[k]]
                                   AND g_hi[k] > g_lo[g_par[k]]), gn) AS alive,
    arrayMap(k -> if(g_par[k] = 0, g_lo[k], greatest(g_lo[k], g_lo[g_par[k]])), gn) AS clo,
    arrayMap(k -> if(g_par[k] = 0, g_hi[k], least(g_hi[k], g_hi[g_par[k]])), gn) AS chi""",
        # Jaeger's walk, per parent: from the parent's end backwards, the child that ends
        # last (at or before the cursor, EPS for rounding) is on the path and moves the cursor
        # to its start; a sibling overlapping it is skipped (with its subtree)
        """arraySort(k -> (g_par[k], -chi[k], k),
              arrayFilter(k -> alive[k] AND chi[k] > clo[k] AND g_par[k] > 0, gn)) AS by_end""",
        f"""arrayFold((acc, k) -> if(g_par[k] != acc.1 OR chi[k] <= acc.2 + {EPS!r},
            (toUInt64(g_par[k]), clo[k], arrayPushBack(acc.3, (toUInt64(k),
                least(chi[k], if(g_par[k] != acc.1, chi[g_par[k]], acc.2))))),
            acc),
        by_end, (toUInt64(0), 0., CAST([], 'Array(Tuple(UInt64, Float64))'))).3 AS walk""",
        """arrayMap(w -> w.1, walk) AS walk_ids""",
        # the end of a child on the path (trimmed where it overlapped the next one by < EPS)
        """arrayMap(k -> if(g_par[k] = 0, chi[k] > clo[k], has(walk_ids, k)), gn) AS ok0,
    arrayMap(k -> arrayFirst(w -> w.1 = k, arrayConcat(walk, [(toUInt64(k), chi[k])])).2, gn)
        AS chi2""",
        # on the path: every ancestor on it too (pointer jumping: 2^5 levels)
        """arrayMap(k -> ok0[k] AND (g_par[k] = 0 OR ok0[g_par[k]]), gn) AS ok1,
    arrayMap(k -> if(g_par[k] = 0, 0, g_par[g_par[k]]), gn) AS j1""",
        *[
            f"""arrayMap(k -> ok{d}[k] AND (j{d}[k] = 0 OR ok{d}[j{d}[k]]), gn) AS ok{d + 1},
    arrayMap(k -> if(j{d}[k] = 0, 0, j{d}[j{d}[k]]), gn) AS j{d + 1}"""
            for d in range(1, 5)
        ],
        """ok5 AS own,
    arraySort(k -> (g_par[k], clo[k], k),
              arrayFilter(k -> ok5[k] AND g_par[k] > 0, gn)) AS kids""",
        """length(kids) AS nk, arrayMap(k -> g_par[k], kids) AS kp""",
        # sections (owner, start, end): leaves whole; parents before, between and after kids
        """arrayConcat(
        arrayMap(k -> (k, clo[k], chi2[k]), arrayFilter(k -> own[k] AND NOT has(kp, k), gn)),
        arrayMap(j -> (kp[j], if(j = 1 OR kp[j - 1] != kp[j], clo[kp[j]], chi2[kids[j - 1]]),
                       clo[kids[j]]), range(1, nk + 1)),
        arrayMap(j -> (kp[j], chi2[kids[j]], chi2[kp[j]]),
                 arrayFilter(j -> j = nk OR kp[j + 1] != kp[j], range(1, nk + 1)))
    ) AS sec0""",
        """arrayFilter(x -> x.3 > x.2,
                arrayMap(x -> (x.1, greatest(x.2, arrival), least(x.3, finish)), sec0)) AS sec1""",
        # split at the first token; after it: decode; engine decode before it: the parent's
        """arrayFlatten(arrayMap(x -> if(ft IS NOT NULL AND x.2 < ft AND ft < x.3,
                                  [(x.1, x.2, assumeNotNull(ft)), (x.1, assumeNotNull(ft), x.3)],
                                  [x]), sec1)) AS sec2""",
        f"""arrayMap(x -> (x.1, x.2, x.3,
        multiIf(ft IS NOT NULL AND x.2 >= ft, 'decode',
                ft IS NOT NULL AND g_stage[x.1] = 'decode',
                    if(g_par[x.1] > 0 AND g_stage[g_par[x.1]] != 'decode',
                       g_stage[g_par[x.1]], {unattr}),
                g_stage[x.1]),
        g_span[x.1], g_name[x.1]), sec2) AS sections""",
        # per stage, inside the trace (no global GROUP BY): time summed per span, then per
        # stage; named after the span that gave most (ties: the first span)
        """arrayDistinct(arrayMap(x -> x.4, sections)) AS st_names,
    arrayMap(st -> arrayFilter(x -> x.4 = st, sections), st_names) AS st_secs""",
        """arrayMap(ss -> arraySort(p -> (-p.2, p.1), arrayMap(
            o -> (o, arraySum(arrayMap(x -> x.3 - x.2, arrayFilter(x -> x.1 = o, ss)))),
            arrayDistinct(arrayMap(x -> x.1, ss)))), st_secs) AS st_owners""",
        """arrayMap(i -> (st_names[i], arrayMin(arrayMap(x -> x.2, st_secs[i])),
                      arraySum(arrayMap(p -> p.2, st_owners[i])),
                      g_span[st_owners[i][1].1], g_name[st_owners[i][1].1]),
             range(1, length(st_names) + 1)) AS stage_rows""",
    ]
    # a request whose roots last no time is dropped, as derive.py does
    return f"SELECT *, is_req0 AND finish > arrival AND {in_window} AS is_req FROM ({_layers(base, layers)})"


def requests_sql(traces: str, source: str) -> str:
    """The ``requests`` logical table from the traces step."""
    ints = "if({0}[spec] IS NULL, NULL, toInt64({0}[spec]))"
    return f"""
SELECT trace_id AS request_id, toNullable(trace_id) AS trace_id, arrival,
    ft AS first_token, toNullable(finish) AS finish, ft - arrival AS ttft,
    toNullable(finish - arrival) AS e2e,
    {ints.format("prompt_tokenss")} AS prompt_tokens,
    {ints.format("output_tokenss")} AS output_tokens,
    if(failed, 'error', 'ok') AS status,
    if(failed, coalesce(nullIf(error_types[spec], ''),
                        if(coalesce(http, 0) >= 500, concat('http_', toString(toInt64(http))),
                           'span_error')), NULL) AS error,
    if(http IS NULL, NULL, toInt32(http)) AS http_status,
    model, replicas[spec] AS replica, nodes[spec] AS node,
    toNullable({_s(source)}) AS source
FROM {traces}
WHERE is_req"""


def stages_sql(traces: str) -> str:
    """The ``stages`` logical table: the per-trace stage rows, one row each."""
    return f"""
SELECT trace_id AS request_id, x.1 AS stage, x.2 AS start, x.3 AS duration, x.4 AS span_id,
    x.5 AS span_name
FROM {traces} ARRAY JOIN stage_rows AS x
WHERE is_req"""
