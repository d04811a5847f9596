"""ClickHouse otel_traces: the stage rules and critical path compiled to SQL give exactly what
the Python derive gives on the same spans (hand-made traces, both span-kind spellings, random
nested traces), URLs never leak a password, and an unreachable server is one line."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from trace_builders import (
    ENVOY_WANT,
    Sp,
    envoy_breakdown,
    envoy_pool_traces,
    otlp_doc,
    sid,
    tid,
    vllm_trace,
    write_jsonl,
)

from support import refusing_port
from tailtriage.derive.derive import derive
from tailtriage.errors import BackendError, ConfigError
from tailtriage.model import Capture
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_file
from tailtriage.store.clickhouse import ClickHouseStore, bind, connect, ingest
from tailtriage.store.clickhouse_export import exact_nanos, export_spans
from tailtriage.store.clickhouse_url import parse_url, password

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def raw_spans(tmp_path: Path, spans: list[Sp], name: str = "t.jsonl") -> Capture:
    return read_file(write_jsonl(tmp_path / name, [otlp_doc(spans)]), ReadOptions())


def through_clickhouse(
    tmp_path: Path, raw: Capture, *, old: bool = False, batch: int | None = None
) -> Capture:
    """Export ``raw``'s spans into a chDB otel_traces table and derive there."""
    target = parse_url(f"chdb://{tmp_path / 'ch'}?table=otel_traces")
    engine = connect(target)
    export_spans(engine, target, raw.spans, old_spelling=old)
    cls = ClickHouseStore
    if batch is not None:  # several GROUP BY batches of whole traces
        cls = type("BatchedStore", (ClickHouseStore,), {"spans_per_batch": batch})
    with cls(target, engine=engine) as store:
        return ingest(store)


def rows(table: Any, key: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in key): r for r in table.to_pylist()}


def assert_same(want: Capture, got: Capture) -> None:
    """Requests and stages equal field by field (floats bit for bit), provenance aside."""
    w = rows(want.requests, ("request_id",))
    g = rows(got.requests, ("request_id",))
    assert set(g) == set(w)
    for k, wr in w.items():
        for field, value in wr.items():
            if field == "source":
                continue
            other = g[k][field]
            if isinstance(value, float) and math.isnan(value):
                assert isinstance(other, float) and math.isnan(other), (k, field)
            else:
                assert other == value, (k, field, value, other)
    ws = rows(want.stages, ("request_id", "stage"))
    gs = rows(got.stages, ("request_id", "stage"))
    assert set(gs) == set(ws)
    for k, wr in ws.items():
        assert gs[k] == wr, k


def hand_made() -> list[Sp]:
    spans: list[Sp] = []
    spans += vllm_trace(0, 0.0)
    spans += vllm_trace(1, 0.5, queue=0.0, decode=2.5, edge_delay=None)
    spans += vllm_trace(2, 1.0, prefill=0.9, router_gap=0.0)
    t = tid(3)  # newer vLLM: queue / prefill / decode child spans
    spans += [
        Sp(
            t,
            sid(3, 1),
            None,
            "POST /v1/completions",
            0.0,
            2.0,
            "SERVER",
            "vllm-http",
            {"http.route": "/v1/completions", "http.response.status_code": 503},
        ),
        Sp(
            t,
            sid(3, 2),
            sid(3, 1),
            "llm_request",
            0.1,
            1.9,
            "SERVER",
            "vllm",
            {"gen_ai.request.model": "m", "gen_ai.usage.prompt_tokens": 7},
        ),
        Sp(t, sid(3, 3), sid(3, 2), "vllm.request.queue", 0.2, 0.5),
        Sp(t, sid(3, 4), sid(3, 2), "vllm.request.prefill", 0.5, 0.7),
        Sp(t, sid(3, 5), sid(3, 2), "vllm.request.decode", 0.7, 1.8),
    ]
    t = tid(4)  # Knative, an unknown span, a non-blocking consumer, an error status
    spans += [
        Sp(t, sid(4, 1), None, "ingress", 0.0, 3.0, "SERVER", "envoy"),
        Sp(t, sid(4, 2), sid(4, 1), "throttler_try", 0.1, 1.1, service="activator"),
        Sp(t, sid(4, 3), sid(4, 1), "activator_proxy", 1.1, 2.9, service="activator"),
        Sp(t, sid(4, 4), sid(4, 3), "queue_proxy", 1.2, 2.8, service="queue-proxy"),
        Sp(t, sid(4, 5), sid(4, 4), "queue_wait", 1.2, 1.5, service="queue-proxy"),
        Sp(t, sid(4, 6), sid(4, 4), "mystery", 1.5, 1.6, service="app", kind="PRODUCER"),
        Sp(t, sid(4, 8), sid(4, 6), "consume", 1.55, 2.6, service="app", kind="CONSUMER"),
        Sp(
            t,
            sid(4, 7),
            sid(4, 4),
            "llm_request",
            1.6,
            2.7,
            "SERVER",
            "vllm",
            {
                "gen_ai.latency.time_to_first_token": 0.5,
                "gen_ai.latency.time_in_queue": 0.1,
                "gen_ai.latency.time_in_model_prefill": 0.4,
                "gen_ai.latency.time_in_model_decode": 0.6,
                "error.type": "EngineDead",
            },
            error=True,
        ),
    ]
    t = tid(5)  # two roots (orphans): a virtual root keeps the gap
    spans += [
        Sp(t, sid(5, 1), "00000000000000aa", "gateway", 0.0, 0.5, "SERVER", "istio-ingressgateway"),
        Sp(
            t,
            sid(5, 2),
            "00000000000000bb",
            "llm_request",
            0.7,
            2.0,
            "SERVER",
            "vllm",
            {"gen_ai.latency.e2e": 1.3, "gen_ai.latency.time_in_model_decode": 1.0},
        ),
    ]
    t = tid(6)  # a GenAI client span only; and a trace with no inference span at all
    spans += [
        Sp(
            t,
            sid(6, 1),
            None,
            "chat llama",
            0.0,
            1.0,
            "CLIENT",
            "app",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.response.time_to_first_chunk": 0.25,
                "gen_ai.response.model": "llama-3",
            },
        ),
        Sp(tid(7), sid(7, 1), None, "GET /healthz", 0.0, 0.01, "SERVER", "web"),
    ]
    return spans


@pytest.mark.parametrize(
    ("old", "batch"), [(False, None), (True, 7)], ids=["Server", "SPAN_KIND_SERVER-batched"]
)
def test_hand_made_traces_equal_the_python_derive(
    tmp_path: Path, old: bool, batch: int | None
) -> None:
    raw = raw_spans(tmp_path, hand_made())
    want = derive(raw)
    got = through_clickhouse(tmp_path, raw, old=old, batch=batch)
    assert got.requests.num_rows == 7  # the health check is no request
    assert_same(want, got)
    by_id = rows(got.requests, ("request_id",))
    assert by_id[(tid(3),)]["status"] == "error" and by_id[(tid(3),)]["error"] == "http_503"
    assert by_id[(tid(4),)]["error"] == "EngineDead"


def test_envoy_pool_wait_is_a_gateway_queue_in_clickhouse_too(tmp_path: Path) -> None:
    spans = [s for trace in envoy_pool_traces(0).values() for s in trace]
    raw = raw_spans(tmp_path, spans)
    got = through_clickhouse(tmp_path, raw)
    assert_same(derive(raw), got)
    breakdown = envoy_breakdown(got)
    for case, want in ENVOY_WANT.items():
        assert breakdown[case] == pytest.approx(want, abs=1e-6), case


def test_dynamo_aggregated_ttft_cut_equals_the_python_derive(tmp_path: Path) -> None:
    """Dynamo's aggregated ``engine.generate`` cut at its ``ttft_ms`` (given in ms, as text),
    one without it (left unattributed), one whose vLLM child spans take precedence."""
    spans: list[Sp] = []
    for i, ttft in enumerate(("212.50", None, "180.00")):
        t = 10.0 * i
        root = Sp(tid(i), sid(i, 1), None, "http-request", t, t + 1.0, "SERVER",
                  "dynamo-frontend", {"request.outcome": "success"})  # fmt: skip
        attrs: dict[str, object] = {"model": "m", "input_tokens": 900, "disagg_role": "agg",
                                    "output_tokens": 64}  # fmt: skip
        if ttft is not None:
            attrs["ttft_ms"] = ttft
        gen = Sp(tid(i), sid(i, 2), root.id, "engine.generate", t + 0.02, t + 0.99, "INTERNAL",
                 "dynamo-worker", attrs)  # fmt: skip
        spans += [root, gen]
        if i == 2:
            spans.append(Sp(tid(i), sid(i, 3), gen.id, "vllm_prefill", t + 0.03, t + 0.2))
    raw = raw_spans(tmp_path, spans)
    want = derive(raw)
    assert_same(want, through_clickhouse(tmp_path, raw))
    by = rows(want.stages, ("request_id", "stage"))
    assert by[(tid(0), "prefill")]["duration"] == pytest.approx(0.2125, abs=1e-6)
    assert (tid(1), "prefill") not in by and (tid(1), "unattributed") in by
    assert by[(tid(2), "prefill")]["duration"] == pytest.approx(0.17, abs=1e-6)


def test_the_real_istio_vllm_sample_equals_the_python_derive(
    tmp_path: Path, shared_data: Path
) -> None:
    files = sorted((shared_data / "otlp").glob("*.json*"))
    assert files
    compared = 0
    for i, f in enumerate(files):
        try:
            raw = read_file(f, ReadOptions())
        except Exception:  # not every sample is a trace file
            continue
        if raw.spans.num_rows == 0:
            continue
        want = derive(raw)
        got = through_clickhouse(tmp_path / str(i), raw)
        assert got.requests.num_rows == want.requests.num_rows, f.name
        assert_same(want, got)
        compared += 1
    assert compared >= 1


def chdb_examples(n: int) -> Any:
    """Hypothesis settings for a test whose every example runs chDB: few examples, no deadline,
    no shrinking (each shrink step would run the engine again)."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )


# -- random nested traces whose children never overlap ------------------------------------------
_NAMES = st.sampled_from(
    [
        "ingress",
        "queue_wait",
        "throttler_try",
        "llm_request",
        "vllm.request.queue",
        "vllm.request.prefill",
        "vllm.request.decode",
        "mystery",
        "POST /v1/chat/completions",
    ]
)


def _random_tree(
    draw: st.DrawFn,
    i: int,
    lo: float,
    hi: float,
    children: Callable[[Sp, int], list[tuple[float, float]]],
) -> list[Sp]:
    """Trace ``i`` as a random tree over [lo, hi]: an ingress root, then spans with random stage
    names; ``children(span, depth)`` draws the intervals of a span's children."""
    out: list[Sp] = []

    def grow(parent: str | None, lo: float, hi: float, depth: int) -> None:
        name = draw(_NAMES) if parent else "ingress"
        kind = "SERVER" if name.startswith(("POST", "llm", "ingress")) else "INTERNAL"
        span = Sp(tid(i), sid(i, len(out) + 1), parent, name, lo, hi, kind, "svc", {})
        out.append(span)
        for a, b in children(span, depth):
            grow(span.id, a, b, depth + 1)

    grow(None, lo, hi, 0)
    return out


@st.composite
def nested_trace(draw: st.DrawFn, i: int) -> list[Sp]:
    """A tree of spans: each child inside its parent, siblings back to back or apart."""

    def children(span: Sp, depth: int) -> list[tuple[float, float]]:
        lo, hi = span.start, span.end
        cuts = sorted(draw(st.lists(st.floats(0.0, 1.0), max_size=4))) if depth < 3 else []
        edges = [lo + (hi - lo) * c for c in cuts]
        kids = [(a, b) for a, b in zip(edges[0::2], edges[1::2], strict=False) if b > a]
        if span.name == "llm_request" and not kids and draw(st.booleans()):
            # vLLM V1 latencies that fit inside the span (no engine child spans)
            f = draw(st.lists(st.floats(0.0, 0.33), min_size=3, max_size=3))
            span.attrs = {
                "gen_ai.latency.time_in_queue": f[0] * (hi - lo),
                "gen_ai.latency.time_in_model_prefill": f[1] * (hi - lo),
                "gen_ai.latency.time_in_model_decode": f[2] * (hi - lo),
            }
        return kids

    return _random_tree(draw, i, 0.0 + i, 1.0 + i + draw(st.floats(0, 2)), children)


@pytest.mark.slow
@chdb_examples(6)
@given(data=st.data())
def test_random_nested_traces_equal_the_python_derive(tmp_path_factory: Any, data: Any) -> None:
    tmp = tmp_path_factory.mktemp("ch")
    spans = [s for i in range(8) for s in data.draw(nested_trace(i))]
    spans += vllm_trace(9, 0.0)  # at least one request
    raw = raw_spans(tmp, spans)
    assert_same(derive(raw), through_clickhouse(tmp, raw))


# -- random traces whose children overlap (parallel calls, retries) ------------------------------
@st.composite
def overlapping_trace(draw: st.DrawFn, i: int) -> list[Sp]:
    """A tree of spans whose siblings overlap each other at random (parallel tool calls, hedged
    requests), some back to back, all inside their parent (clock skew is the repairs' test):
    the critical path skips a sibling that overlaps the one on the path, so overlapped time is
    counted once."""

    def children(span: Sp, depth: int) -> list[tuple[float, float]]:
        if depth >= 3:
            return []
        lo, hi = span.start, span.end
        kids = []
        pts = draw(st.lists(st.floats(0.0, 1.0), min_size=0, max_size=6))
        for a, b in zip(pts[0::2], pts[1::2], strict=False):
            a, b = sorted((a, b))
            if b - a < 1e-3:
                continue
            kids.append((lo + (hi - lo) * a, lo + (hi - lo) * b))
            if draw(st.booleans()):  # a sibling starting exactly where this one ends
                c = min(b + draw(st.floats(0.01, 0.3)), 1.0)
                if c - b > 1e-3:
                    kids.append((lo + (hi - lo) * b, lo + (hi - lo) * c))
        return kids

    return _random_tree(draw, i, 0.0 + 10 * i, 1.0 + 10 * i + draw(st.floats(0, 2)), children)


@pytest.mark.slow
@chdb_examples(8)
@given(data=st.data())
def test_random_overlapping_children_equal_the_python_derive(
    tmp_path_factory: Any, data: Any
) -> None:
    tmp = tmp_path_factory.mktemp("ch")
    spans = [s for i in range(8) for s in data.draw(overlapping_trace(i))]
    spans += vllm_trace(90, 0.0)  # at least one request
    raw = raw_spans(tmp, spans)
    assert_same(derive(raw), through_clickhouse(tmp, raw))


# -- URLs, passwords, errors -------------------------------------------------------------------
def test_urls() -> None:
    t = parse_url("clickhouse://reader@ch.example:9000/otel?table=traces_v2")
    assert (t.host, t.port, t.user, t.database, t.table) == (
        "ch.example",
        9000,
        "reader",
        "otel",
        "traces_v2",
    )
    assert parse_url("clickhouses://ch.example/otel").port == 8443
    # the CLI's Path argument collapses "//": the same URL must still parse
    assert parse_url(str(Path("chdb:///var/lib/ch?table=otel_traces"))).path == "/var/lib/ch"
    assert parse_url("chdb:///var/lib/ch?table=x&since=10&until=20").since == "10"
    for bad in (
        "clickhouse://u:hunter2@h/db",  # a password in the URL is refused, not used
        "clickhouse://h/db?table=x;DROP",
        "clickhouse://h/db?colour=red",
        "chdb:///",
    ):
        with pytest.raises(ConfigError) as exc:
            parse_url(bad)
        assert "hunter2" not in str(exc.value)


def test_password_only_from_the_environment() -> None:
    assert password({"CLICKHOUSE_PASSWORD": "a"}) == "a"
    assert password({"TAILTRIAGE_CLICKHOUSE_PASSWORD": "b", "CLICKHOUSE_PASSWORD": "a"}) == "b"
    assert password({}) == ""


def test_closed_port_is_one_line_naming_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAILTRIAGE_CLICKHOUSE_PASSWORD", "s3cret-pw")
    with refusing_port() as port, pytest.raises(BackendError) as exc:
        connect(parse_url(f"clickhouse://reader@127.0.0.1:{port}/otel"))
    msg = str(exc.value)
    assert f"127.0.0.1:{port}" in msg
    assert "\n" not in msg and "s3cret-pw" not in msg


def test_missing_table_is_a_backend_error(tmp_path: Path) -> None:
    target = parse_url(f"chdb://{tmp_path}?table=nothing_here")
    with pytest.raises(BackendError) as exc:
        ClickHouseStore(target)
    assert "nothing_here" in str(exc.value) and "\n" not in str(exc.value)


def test_bind_fills_placeholders_outside_strings() -> None:
    sql = bind("SELECT '?' AS q, x FROM t WHERE a = ? AND b = ?", ["it's", 2.5])
    assert sql == "SELECT '?' AS q, x FROM t WHERE a = 'it''s' AND b = 2.5"


@given(st.integers(10**18, 2 * 10**18))
def test_exact_nanos_round_trip_to_the_same_float(nanos: int) -> None:
    """Seconds read from a file (ns / 1e9) go back to nanoseconds that read the same."""
    import numpy as np

    x = nanos / 1e9
    n = exact_nanos(np.array([x]))
    assert float(n[0]) / 1e9 == x
