"""derive: requests and stages from spans (design 3.1) on hand-built traces whose answer is
known from how they were built, plus the invariant TTFT = pre-first-token stages."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_builders import (
    ENVOY_WANT,
    T0,
    Sp,
    envoy_breakdown,
    envoy_pool_traces,
    otlp_doc,
    sid,
    tid,
    vllm_trace,
    write_jsonl,
)

from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S
from tailtriage.store.input import load_capture


def stages_of(cap: Capture, request_id: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in cap.stages.to_pylist():
        if r["request_id"] == request_id:
            out[r["stage"]] = out.get(r["stage"], 0.0) + r["duration"]
    return out


def check_sums(cap: Capture) -> None:
    """Per request: pre-first-token stages sum to TTFT, all stages to e2e."""
    r, s = cap.requests, cap.stages  # noqa: F841 (used by name in SQL)
    bad = duckdb.sql(
        """SELECT r.request_id, r.ttft, r.e2e, x.pre, x.tot FROM r JOIN (
             SELECT request_id, sum(duration) FILTER (WHERE stage <> 'decode') AS pre,
                    sum(duration) AS tot FROM s GROUP BY 1) x USING (request_id)
           WHERE abs(coalesce(r.ttft, x.pre) - x.pre) > 1e-6 OR abs(r.e2e - x.tot) > 1e-6"""
    ).fetchall()
    assert bad == []
    assert set(cap.stages["request_id"].to_pylist()) == set(cap.requests["request_id"].to_pylist())


def test_vllm_v1_trace_behind_istio(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [otlp_doc(vllm_trace(0, 0.0))])
    cap = load_capture(path)
    (req,) = cap.requests.to_pylist()
    assert req["request_id"] == req["trace_id"] == tid(0)
    assert req["arrival"] == pytest.approx(T0)
    # the edge's first byte: engine first token (0.07 + 0.5) + 2 ms on the way back
    assert req["ttft"] == pytest.approx(0.572, abs=1e-6)
    assert req["e2e"] == pytest.approx(0.57 + 1.0 + 0.003, abs=1e-6)
    assert (req["prompt_tokens"], req["output_tokens"], req["model"]) == (100, 50, "llama")
    assert (req["replica"], req["node"], req["status"], req["http_status"]) == (
        "vllm-0",
        "gpu-1",
        "ok",
        200,
    )
    got = stages_of(cap, tid(0))
    want = {
        "ingress": 0.05 + 0.01,  # gateway self time + router egress before the pod
        "api_server": 0.01 + 0.002,  # FastAPI before llm_request + the first token's way back
        "engine_queue": 0.2,
        "prefill": 0.3,
        "decode": 1.0 + 0.003 - 0.002,
    }
    assert got == pytest.approx(want, abs=1e-6)
    check_sums(cap)


def test_envoy_pool_wait_is_a_gateway_queue_and_connect_retries_are_ingress(
    tmp_path: Path,
) -> None:
    traces = envoy_pool_traces(0)
    docs = [otlp_doc(spans) for spans in traces.values()]
    cap = load_capture(write_jsonl(tmp_path / "envoy.jsonl", docs))
    got = envoy_breakdown(cap)
    for case, want in ENVOY_WANT.items():
        assert got[case] == pytest.approx(want, abs=1e-6), case
    names = {r["span_name"] for r in cap.stages.to_pylist() if r["stage"] == "gateway_queue"}
    assert names == {"envoy.upstream_pool_wait"}
    check_sums(cap)


def test_engine_first_token_when_no_edge_event(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [otlp_doc(vllm_trace(0, 0.0, edge_delay=None))])
    cap = load_capture(path)
    assert cap.requests["ttft"][0].as_py() == pytest.approx(0.57, abs=1e-6)
    assert stages_of(cap, tid(0))["api_server"] == pytest.approx(0.01, abs=1e-6)
    check_sums(cap)


def test_newer_vllm_child_spans(tmp_path: Path) -> None:
    t = tid(1)
    spans = [
        Sp(
            t,
            sid(1, 1),
            None,
            "POST /v1/completions",
            0.0,
            2.0,
            "SERVER",
            attrs={"url.path": "/v1/completions"},
        ),
        Sp(t, sid(1, 2), sid(1, 1), "llm_request", 0.1, 1.9, "SERVER"),
        Sp(t, sid(1, 3), sid(1, 2), "vllm.request.queue", 0.2, 0.5),
        Sp(t, sid(1, 4), sid(1, 2), "vllm.request.prefill", 0.5, 0.7),
        Sp(t, sid(1, 5), sid(1, 2), "vllm.request.decode", 0.7, 1.8),
    ]
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)]))
    assert cap.requests["ttft"][0].as_py() == pytest.approx(0.7, abs=1e-6)
    got = stages_of(cap, t)
    assert got == pytest.approx(
        {"api_server": 0.1 + 0.1, "engine_queue": 0.3, "prefill": 0.2, "decode": 1.1 + 0.1 + 0.1},
        abs=1e-6,
    )
    check_sums(cap)


def test_knative_and_unknown_spans(tmp_path: Path) -> None:
    t = tid(2)
    spans = [
        Sp(t, sid(2, 1), None, "ingress", 0.0, 3.0, "SERVER", "envoy"),
        Sp(t, sid(2, 2), sid(2, 1), "throttler_try", 0.1, 1.1, service="activator"),
        Sp(t, sid(2, 3), sid(2, 1), "activator_proxy", 1.1, 2.9, service="activator"),
        Sp(t, sid(2, 4), sid(2, 3), "queue_proxy", 1.2, 2.8, service="queue-proxy"),
        Sp(t, sid(2, 5), sid(2, 4), "queue_wait", 1.2, 1.5, service="queue-proxy"),
        Sp(t, sid(2, 6), sid(2, 4), "mystery", 1.5, 1.6, service="app"),
        Sp(
            t,
            sid(2, 7),
            sid(2, 4),
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
            },
        ),
    ]
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)]))
    got = stages_of(cap, t)
    assert got["pending"] == pytest.approx(1.0, abs=1e-6)
    assert got["gateway_queue"] == pytest.approx(0.3, abs=1e-6)
    assert got["unattributed"] == pytest.approx(0.1, abs=1e-6)  # the unknown span
    assert got["engine_queue"] == pytest.approx(0.1, abs=1e-6)
    assert got["prefill"] == pytest.approx(0.4, abs=1e-6)
    check_sums(cap)


def test_several_roots_keep_the_gap_as_unattributed(tmp_path: Path) -> None:
    t = tid(3)
    spans = [
        Sp(t, sid(3, 1), "00000000000000aa", "gateway", 0.0, 0.5, "SERVER", "istio-ingressgateway"),
        Sp(
            t,
            sid(3, 2),
            "00000000000000bb",
            "llm_request",
            0.7,
            2.0,
            "SERVER",
            "vllm",
            {
                "gen_ai.latency.time_to_first_token": 0.3,
                "gen_ai.latency.time_in_queue": 0.1,
                "gen_ai.latency.time_in_model_prefill": 0.2,
                "gen_ai.latency.time_in_model_decode": 1.0,
            },
        ),
    ]
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)]))
    got = stages_of(cap, t)
    assert got["unattributed"] == pytest.approx(0.2, abs=1e-6)
    assert cap.requests["arrival"][0].as_py() == pytest.approx(T0)
    assert cap.metadata.quality["spans.orphan"] == 2
    check_sums(cap)


def test_client_measured_requests_keep_their_timings(tmp_path: Path) -> None:
    """The load generator writes requests measured at the client plus its client spans."""
    trace = vllm_trace(4, 0.02, edge_delay=None)
    client = Sp(
        tid(4), sid(4, 9), None, "tailtriage.client", 0.0, 1.6, "CLIENT", "tailtriage-loadgen"
    )
    trace[0].parent = client.id
    (tmp_path / "traces.jsonl").write_bytes(b"")
    write_jsonl(tmp_path / "traces.jsonl", [otlp_doc([client, *trace])])
    measured = make_table(
        S.REQUESTS,
        {
            "request_id": ["lg-1"],
            "trace_id": [tid(4).upper()],
            "arrival": [T0],
            "first_token": [T0 + 0.6],
            "finish": [T0 + 1.6],
            "ttft": [0.6],
            "e2e": [1.6],
            "prompt_tokens": [100],
            "output_tokens": [50],
            "status": ["ok"],
            "source": ["loadgen"],
        },
    )
    Capture(requests=measured).save(tmp_path / "client.duckdb")
    cap = load_capture(tmp_path)
    (req,) = cap.requests.to_pylist()
    assert (req["request_id"], req["ttft"], req["e2e"], req["source"]) == (
        "lg-1",
        0.6,
        1.6,
        "loadgen",
    )
    assert req["replica"] == "vllm-0"  # filled from the spans
    got = stages_of(cap, "lg-1")
    assert got["client"] == pytest.approx(0.02, abs=1e-6)
    check_sums(cap)


@st.composite
def random_traces(draw: st.DrawFn) -> list[Sp]:
    spans: list[Sp] = []
    names = ["ingress", "queue_wait", "throttler_try", "mystery", "POST /v1/chat/completions", "x"]
    for i in range(draw(st.integers(1, 4))):
        t = tid(10 + i)
        base = float(i)
        end = base + draw(st.floats(0.5, 3.0))
        spans.append(Sp(t, sid(10 + i, 0), None, "root", base, end, "SERVER", "envoy"))
        ids = [sid(10 + i, 0)]
        for k in range(1, draw(st.integers(1, 8))):
            s = base + draw(st.floats(-0.3, 3.0))
            e = s + draw(st.floats(0.0, 2.0))
            spans.append(
                Sp(
                    t,
                    sid(10 + i, k),
                    draw(st.sampled_from(ids)),
                    draw(st.sampled_from(names)),
                    s,
                    e,
                    draw(st.sampled_from(["SERVER", "CLIENT", "INTERNAL"])),
                    draw(st.sampled_from(["a", "b"])),
                )
            )
            ids.append(sid(10 + i, k))
        s = base + draw(st.floats(0.0, 1.0))
        q, p, d = (draw(st.floats(0.0, 0.5)) for _ in range(3))
        spans.append(
            Sp(
                t,
                sid(10 + i, 99),
                draw(st.sampled_from(ids)),
                "llm_request",
                s,
                s + q + p + d + 0.01,
                "SERVER",
                "vllm",
                {
                    "gen_ai.latency.time_in_queue": q,
                    "gen_ai.latency.time_in_model_prefill": p,
                    "gen_ai.latency.time_in_model_decode": d,
                    "gen_ai.latency.time_to_first_token": q + p + 0.005,
                },
                [("first_downstream_tx_byte_sent", s + q + p + draw(st.floats(-0.2, 0.5)))]
                if draw(st.booleans())
                else [],
            )
        )
    return spans


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(random_traces())
def test_stages_sum_to_ttft_and_e2e(tmp_path: Path, spans: list[Sp]) -> None:
    path = write_jsonl(tmp_path / "h.jsonl", [otlp_doc(spans)])
    cap = load_capture(path)
    assert cap.requests.num_rows == len({s.trace for s in spans})
    check_sums(cap)
    st_ = cap.stages
    assert np.all(np.asarray(st_["duration"]) > 0)


def test_derive_is_idempotent_on_a_saved_capture(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [otlp_doc(vllm_trace(0, 0.0) + vllm_trace(1, 1.0))])
    first = load_capture(path)
    first.save(tmp_path / "c.duckdb")
    again = load_capture(tmp_path / "c.duckdb")
    key = ["request_id", "stage"]
    assert again.requests.sort_by("request_id").equals(first.requests.sort_by("request_id"))
    assert again.stages.sort_by([(k, "ascending") for k in key]).equals(
        first.stages.sort_by([(k, "ascending") for k in key])
    )
    assert pa.compute.sum(again.stages["duration"]).as_py() > 0


def test_request_that_never_reached_the_engine_is_an_error_not_dropped(tmp_path: Path) -> None:
    """A gateway span on an OpenAI route (URL in http.url, as Envoy writes it) whose upstream
    timed out is a request the user saw fail; it must count, with its time kept."""
    spans = [
        Sp(
            tid(7),
            sid(7, 1),
            None,
            "ingress",
            0.0,
            1.5,
            kind="SERVER",
            service="istio-ingressgateway",
            attrs={
                "component": "proxy",
                "http.url": "https://api.example/v1/chat/completions",
                "http.status_code": "504",
            },
            error=True,
        ),
        Sp(tid(7), sid(7, 2), sid(7, 1), "throttler_try", 0.01, 1.49, service="activator"),
    ]
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)]))
    (req,) = cap.requests.to_pylist()
    assert req["trace_id"] == tid(7) and req["status"] != "ok"
    assert req["e2e"] == pytest.approx(1.5, abs=1e-6)
    assert stages_of(cap, tid(7))["pending"] == pytest.approx(1.48, abs=1e-6)


def test_trace_whose_root_lasts_no_time_is_dropped_and_counted(tmp_path: Path) -> None:
    """A root span without its duration (found by the parser fuzzing): its request would have
    0 s latency and no stage to hold its children's time; it is dropped, counted, warned."""
    broken = vllm_trace(0, 0.0)
    root = next(sp for sp in broken if sp.parent is None)
    broken = [Sp(**{**vars(sp), "end": sp.start}) if sp is root else sp for sp in broken]
    path = write_jsonl(tmp_path / "t.jsonl", [otlp_doc(broken + vllm_trace(1, 1.0))])
    cap = load_capture(path)
    assert cap.requests["request_id"].to_pylist() == [tid(1)]
    check_sums(cap)
    assert cap.metadata.quality["requests.zero_length"] == 1
    assert any("root spans last 0 s" in w for w in cap.metadata.warnings)
