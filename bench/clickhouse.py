"""Scale-out benchmark (issue 8): triage straight from ClickHouse ``otel_traces`` vs ingesting
the same spans from OTLP/JSON into DuckDB first.

1. ``--spans`` spans (default 10 M: 4 per request, an Istio gateway SERVER span with Envoy's
   first-byte event, its router CLIENT span, vLLM's ``POST /v1/chat/completions`` and
   ``llm_request`` with ``gen_ai.latency.*``) are generated *inside chDB with SQL*
   (``numbers()`` + ``ARRAY JOIN``, deterministic hash-based randomness, the last quarter of the
   hour with 6x engine queueing) into a table made with the Collector exporter's DDL.
2. ClickHouse path: ``tailtriage.pipeline.triage.triage`` over ``open_input(url)`` (analysis + diagnosis as SQL;
   what-if off, it is the simulator's cost either way) in a fresh process.
3. OTLP path: the first ``--otlp-spans`` of the *same* spans (same generator, same seeds) are
   written as OTLP/JSON lines, then ``load_capture`` + ``triage`` run in a fresh process; the
   same subset is also triaged from ClickHouse, so both paths are timed on equal input, and the
   OTLP time is scaled linearly to ``--spans`` (it is linear or worse; reported as such).
4. Memory: each path runs in its own process; reported are the peak RSS of that process and
   the peak of Python + Arrow allocations (what tailtriage itself holds).  chDB runs the
   ClickHouse engine *inside* the process, so its RSS includes the engine's working memory; with
   a ``clickhouse://`` server that part lives on the server.  The Python-side peak is the
   figure that must stay flat as the span count grows (``--flat`` repeats the ClickHouse run at
   a tenth of the spans to show it).

    python bench/clickhouse.py [--spans 10000000] [--otlp-spans 1000000] [--dir DIR] [--flat]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

SPANS_PER_REQUEST = 4
T0_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
HOUR_NS = 3600 * 10**9
SLO = "p95 ttft < 500ms"

# u(k): uniform in (0, 1) from the request number and a salt; n(k): standard normal (Box-Muller)
_U = "((cityHash64(number, {k}) % 1000000007) + 0.5) / 1000000007"
_N = f"(sqrt(-2 * log({_U.format(k='{a}')})) * cos(2 * pi() * {_U.format(k='{b}')}))"


def _norm(a: int, b: int) -> str:
    return _N.format(a=a, b=b)


def generate_sql(table: str, requests: int) -> str:
    """INSERT of ``requests`` x 4 spans computed entirely by ClickHouse."""
    gap = HOUR_NS // max(requests, 1)
    incident = requests * 3 // 4

    def sid(k: int) -> str:
        return f"substring(lower(hex(cityHash64(number, {k}))), 1, 16)"

    return f"""
INSERT INTO {table} (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind,
    ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration,
    StatusCode, StatusMessage, `Events.Timestamp`, `Events.Name`, `Events.Attributes`,
    `Links.TraceId`, `Links.SpanId`, `Links.TraceState`, `Links.Attributes`)
SELECT fromUnixTimestamp64Nano(s_ns), trace, span, parent, '', name, kind, svc, res, '', '',
       attrs, toUInt64(e_ns - s_ns), 'Unset', '', ev_ts, ev_names,
       arrayMap(x -> map(), ev_names), [], [], [], []
FROM (
  SELECT *,
    {sid(0)} AS span0, {sid(1)} AS span1, {sid(2)} AS span2, {sid(3)} AS span3,
    [span0, span1, span2, span3][k + 1] AS span,
    ['', span0, span1, span2][k + 1] AS parent,
    [a, a + ing, http0, llm0][k + 1] AS s_ns,
    [fin + 3000000, fin + 2000000, fin + 1000000, fin][k + 1] AS e_ns,
    ['vllm.llm.svc.cluster.local:8000/*',
     'router outbound|8000||vllm.llm.svc.cluster.local egress',
     'POST /v1/chat/completions', 'llm_request'][k + 1] AS name,
    ['Server', 'Client', 'Server', 'Server'][k + 1] AS kind,
    if(k < 2, 'istio-ingressgateway', 'vllm') AS svc,
    if(k < 2, map('k8s.pod.name', 'istio-ingressgateway-0', 'k8s.node.name', 'gw-node'),
       map('k8s.pod.name', concat('vllm-', toString(number % 8)),
           'k8s.node.name', concat('gpu-', toString(number % 4)))) AS res,
    multiIf(k < 2, map('component', 'proxy', 'http.status_code', '200'),
            k = 2, map('http.route', '/v1/chat/completions', 'http.response.status_code', '200'),
            map('gen_ai.request.model', 'meta-llama/Llama-3.1-8B-Instruct',
                'gen_ai.usage.prompt_tokens', toString(prompt),
                'gen_ai.usage.completion_tokens', toString(out),
                'gen_ai.latency.time_in_queue', toString(q / 1e9),
                'gen_ai.latency.time_in_model_prefill', toString(pf / 1e9),
                'gen_ai.latency.time_in_model_decode', toString(dec / 1e9),
                'gen_ai.latency.time_to_first_token', toString((ft - llm0) / 1e9),
                'gen_ai.latency.e2e', toString((fin - llm0) / 1e9))) AS attrs,
    if(k = 0, [fromUnixTimestamp64Nano(ft + 2000000)], []) AS ev_ts,
    if(k = 0, ['first_downstream_tx_byte_sent'], []) AS ev_names
  FROM (
    SELECT number, k,
      lower(concat(hex(cityHash64(number, 100)), hex(cityHash64(number, 101)))) AS trace,
      toInt64({T0_NS}) + toInt64(number) * {gap} + toInt64({_U.format(k=1)} * {gap}) AS a,
      toInt64(exp(log(0.045) + 0.25 * {_norm(2, 3)}) * 1e9) AS ing,
      toInt64(exp(log(0.004) + 0.2 * {_norm(4, 5)}) * 1e9) AS api,
      toInt64(exp(log(0.03) + 1.0 * {_norm(6, 7)}) * 1e9 * if(number > {incident}, 6, 1)) AS q,
      toUInt32(exp(log(600) + 0.8 * {_norm(8, 9)})) AS prompt,
      toInt64(prompt * 0.00018 * 1e9) AS pf,
      toUInt32(exp(log(60) + 0.5 * {_norm(10, 11)})) + 1 AS out,
      toInt64(out * 0.042 * 1e9) AS dec,
      a + ing + 1000000 AS http0,
      http0 + api AS llm0,
      llm0 + q + pf AS ft,
      ft + dec AS fin
    FROM numbers({requests}) ARRAY JOIN range(4) AS k
  )
)
SETTINGS max_block_size = 65536
"""


def _make_table(folder: Path, requests: int) -> str:
    from chdb import session

    from tailtriage.store.clickhouse_export import DDL

    s = session.Session(str(folder))
    s.query("CREATE DATABASE IF NOT EXISTS otel")
    s.query(DDL.format(table="otel.otel_traces"))
    s.query(generate_sql("otel.otel_traces", requests))
    n = int(str(s.query("SELECT count() FROM otel.otel_traces", "CSV")).strip())
    s.close()
    return f"chdb://{folder}?table=otel_traces&database=otel#{n}"


def _write_otlp(folder: Path, out: Path) -> int:
    """The table's spans as OTLP/JSON lines (one ExportTraceServiceRequest per span)."""
    from chdb import session

    s = session.Session(str(folder))
    tab = s.query(
        "SELECT toUnixTimestamp64Nano(Timestamp) AS s, Duration AS d, TraceId, SpanId, "
        "ParentSpanId, SpanName, SpanKind, ServiceName, ResourceAttributes AS r, "
        "SpanAttributes AS a, arrayMap(t -> toUnixTimestamp64Nano(t), `Events.Timestamp`) AS et, "
        "`Events.Name` AS en FROM otel.otel_traces ORDER BY TraceId, Timestamp",
        "ArrowTable",
    )
    s.close()
    kinds = {"Server": 2, "Client": 3, "Internal": 1}
    n = 0
    rows = tab.to_pylist()
    with out.open("wb") as fh:
        # the Collector's batches: ~512 spans per line, grouped by resource
        for off in range(0, len(rows), 512):
            groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
            for row in rows[off : off + 512]:
                key = (row["ServiceName"], tuple(row["r"]))
                groups.setdefault(key, []).append(_otlp_span(row, kinds))
                n += 1
            doc = {
                "resourceSpans": [
                    {
                        "resource": {
                            "attributes": [_kv("service.name", svc)] + [_kv(k, v) for k, v in res]
                        },
                        "scopeSpans": [{"scope": {}, "spans": spans}],
                    }
                    for (svc, res), spans in groups.items()
                ]
            }
            fh.write(orjson.dumps(doc) + b"\n")
    return n


def _kv(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _otlp_span(row: dict[str, Any], kinds: dict[str, int]) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": row["TraceId"],
        "spanId": row["SpanId"],
        "name": row["SpanName"],
        "kind": kinds.get(row["SpanKind"], 0),
        "startTimeUnixNano": str(row["s"]),
        "endTimeUnixNano": str(row["s"] + row["d"]),
        "attributes": [_kv(k, v) for k, v in row["a"]],
    }
    if row["ParentSpanId"]:
        span["parentSpanId"] = row["ParentSpanId"]
    if row["en"]:
        span["events"] = [
            {"name": nm, "timeUnixNano": str(t)} for nm, t in zip(row["en"], row["et"], strict=True)
        ]
    return span


def _measure(fn: Any, *args: Any) -> dict[str, Any]:
    """Run ``fn`` here (a fresh child process), timing it and tracking memory."""
    import pyarrow as pa

    tracemalloc.start()
    t0 = time.perf_counter()
    result = fn(*args)
    wall = time.perf_counter() - t0
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "wall_s": wall,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "python_peak_mb": py_peak / 2**20,
        "arrow_peak_mb": pa.default_memory_pool().max_memory() / 2**20,
        **result,
    }


def _triage_clickhouse(url: str) -> dict[str, Any]:
    from tailtriage.pipeline.triage import triage
    from tailtriage.store.input import open_input

    marks = {"start": time.perf_counter()}

    def step(name: str, detail: str) -> None:
        marks.setdefault(name, time.perf_counter())

    with open_input(url) as store:
        report = triage(store, SLO, whatif=False, progress=step)
    end = time.perf_counter()
    d = report.to_dict()
    return {
        "p95_ttft_ms": d["slos"][0]["observed_ms"],
        "requests": d["data_quality"]["requests"],
        "findings": [f["category"] for f in d["findings"]],
        # derive = stage rules + critical path in ClickHouse; diagnose = the rules' signals
        "steps": {
            "derive_s": round(marks["analyze"] - marks["start"], 1),
            "analyze_s": round(marks.get("diagnose", end) - marks["analyze"], 1),
            "diagnose_s": round(end - marks.get("diagnose", end), 1),
        },
    }


def _triage_otlp(path: str) -> dict[str, Any]:
    from tailtriage.pipeline.triage import triage
    from tailtriage.store.input import load_capture

    t0 = time.perf_counter()
    cap = load_capture(path)
    ingest = time.perf_counter() - t0
    d = triage(cap, SLO, whatif=False).to_dict()
    return {
        "ingest_s": ingest,
        "p95_ttft_ms": d["slos"][0]["observed_ms"],
        "requests": d["data_quality"]["requests"],
        "findings": [f["category"] for f in d["findings"]],
    }


def _in_child(fn: Any, *args: Any) -> Any:
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def _run(fn: Any, *args: Any) -> dict[str, Any]:
    out: dict[str, Any] = _in_child(_measure, fn, *args)
    return out


def _show(label: str, r: dict[str, Any]) -> None:
    extra = f", ingest {r['ingest_s']:.1f} s" if "ingest_s" in r else ""
    print(
        f"  {label:<34} {r['wall_s']:8.1f} s{extra}; peak RSS {r['rss_peak_mb']:7.0f} MB, "
        f"Python {r['python_peak_mb']:6.1f} MB, Arrow {r['arrow_peak_mb']:6.1f} MB; "
        f"{r['requests']} requests, p95 TTFT {r['p95_ttft_ms']} ms, findings {r['findings']}"
        + (f"; {r['steps']}" if "steps" in r else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=10_000_000)
    ap.add_argument("--otlp-spans", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--flat", action="store_true", help="also run ClickHouse at spans/10")
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="tt-bench-ch-"))
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    sizes = {"full": args.spans, "otlp": args.otlp_spans}
    if args.flat:
        sizes["tenth"] = args.spans // 10
    urls: dict[str, str] = {}
    for key, spans in sizes.items():
        t0 = time.perf_counter()
        url, n = _in_child(_make_table, root / key, spans // SPANS_PER_REQUEST).split("#")
        urls[key] = url
        print(f"generated {int(n):,} spans in chDB with SQL in {time.perf_counter() - t0:.1f} s")
    otlp = root / "traces.otlp.jsonl"
    n = _in_child(_write_otlp, root / "otlp", otlp)
    print(
        f"wrote the first {n:,} of those spans as OTLP/JSON ({otlp.stat().st_size / 2**20:.0f} MB)"
    )
    print(f"triage, SLO {SLO!r}, what-if off (each path in its own process):")
    full = _run(_triage_clickhouse, urls["full"])
    _show(f"ClickHouse, {args.spans:,} spans", full)
    if "tenth" in urls:
        _show(f"ClickHouse, {sizes['tenth']:,} spans", _run(_triage_clickhouse, urls["tenth"]))
    small = _run(_triage_clickhouse, urls["otlp"])
    _show(f"ClickHouse, {n:,} spans", small)
    dk = _run(_triage_otlp, str(otlp))
    _show(f"OTLP/JSON -> DuckDB, {n:,} spans", dk)
    scale = args.spans / max(n, 1)
    print(
        f"same {n:,} spans: ClickHouse {small['wall_s']:.1f} s vs OTLP->DuckDB {dk['wall_s']:.1f} s "
        f"({dk['wall_s'] / small['wall_s']:.1f}x)"
    )
    print(
        f"at {args.spans:,} spans: ClickHouse {full['wall_s']:.1f} s measured vs OTLP->DuckDB "
        f"~{dk['wall_s'] * scale:.0f} s scaled linearly x{scale:g} from {n:,} "
        f"({dk['wall_s'] * scale / full['wall_s']:.1f}x)"
    )
    print(
        f"Python-side peak: {full['python_peak_mb'] + full['arrow_peak_mb']:.1f} MB at "
        f"{args.spans:,} spans vs {small['python_peak_mb'] + small['arrow_peak_mb']:.1f} MB at "
        f"{n:,} (ClickHouse path); OTLP path {dk['python_peak_mb'] + dk['arrow_peak_mb']:.0f} MB"
    )


if __name__ == "__main__":
    main()
