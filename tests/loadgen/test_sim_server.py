"""serve-sim: OpenAI-compatible endpoints, vLLM /metrics, OTLP spans in vLLM conventions."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import orjson

from tailtriage.loadgen import LoadConfig, run_load
from tailtriage.loadgen.server.otlp import parse_traceparent
from tailtriage.loadgen.server.sim import SimSettings
from tailtriage.sources.exposition import histograms_without_inf, parse_exposition

from .servers import serve_sim_process, sim_server


def _get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return bytes(r.read())


def _spans(path: Path) -> list[dict]:
    out = []
    for line in path.read_bytes().splitlines():
        for rs in orjson.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                out += ss["spans"]
    return out


def test_stream_and_unary_against_the_simulated_engine(tmp_path: Path) -> None:
    otlp = tmp_path / "server.otlp.jsonl"
    settings = SimSettings(served_model="llama", otlp_out=otlp, max_num_seqs=4)
    with sim_server(settings) as port:
        assert orjson.loads(_get(port, "/v1/models"))["data"][0]["id"] == "llama"
        assert _get(port, "/health") == b""
        stream = run_load(LoadConfig(url=f"http://127.0.0.1:{port}", model="llama",
                                     concurrency=12, requests=24, input_len="200",
                                     output_len="20"))  # fmt: skip
        unary = run_load(LoadConfig(url=f"http://127.0.0.1:{port}/v1", model="llama",
                                    endpoint="completions", stream=False, rate=20.0,
                                    requests=3, output_len="5"))  # fmt: skip
        metrics = _get(port, "/metrics").decode()
    assert stream.summary.ok == 24 and unary.summary.ok == 3
    assert all(r.output_tokens == 20 and r.prompt_tokens == 200 for r in stream.records)
    assert all(len(r.chunks) >= 1 for r in stream.records)
    assert sum(n for r in stream.records for _, n in r.chunks) == 24 * 20
    assert all(r.output_tokens == 5 for r in unary.records)

    # /metrics: vLLM names, labels and buckets, parseable by tailtriage's own reader
    for name in (
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_count", "vllm:request_queue_time_seconds_sum",
    ):  # fmt: skip
        assert re.search(rf'^{re.escape(name)}\{{engine="0",model_name="llama"', metrics, re.M), (
            name
        )
    assert (
        'vllm:time_to_first_token_seconds_bucket{engine="0",model_name="llama",le="0.04"}'
        in metrics
    )
    gen = re.search(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", metrics, re.M)
    assert gen is not None and float(gen.group(1)) == 24 * 20 + 3 * 5
    ttft_count = re.search(
        r"^vllm:time_to_first_token_seconds_count\{[^}]*\} (\S+)$", metrics, re.M
    )
    assert ttft_count is not None and float(ttft_count.group(1)) == 27
    parsed = parse_exposition(metrics)
    assert parsed.bad_lines == [] and histograms_without_inf(parsed) == []
    assert "vllm:num_requests_waiting" in {s.name for s in parsed.samples}

    # max_num_seqs=4 with 12 users: requests queue in the engine, and the spans say so
    spans = _spans(otlp)
    llm = [s for s in spans if s["name"] == "llm_request"]
    assert len(llm) == 27
    queue = [
        a["value"]["doubleValue"]
        for s in llm for a in s["attributes"] if a["key"] == "gen_ai.latency.time_in_queue"
    ]  # fmt: skip
    assert max(queue) > 0.01


def test_server_spans_join_the_client_trace(tmp_path: Path) -> None:
    otlp = tmp_path / "server.otlp.jsonl"
    with sim_server(SimSettings(otlp_out=otlp)) as port:
        res = run_load(LoadConfig(url=f"http://127.0.0.1:{port}", model="sim", rate=30.0,
                                  requests=5, output_len="4"))  # fmt: skip
    spans = _spans(otlp)
    by_id = {s["spanId"]: s for s in spans}
    for r in res.records:
        mine = [s for s in spans if s["traceId"] == r.trace_id]
        names = sorted(s["name"] for s in mine)
        assert names == sorted(["POST /v1/chat/completions", "llm_request", "vllm.request.queue",
                                "vllm.request.prefill", "vllm.request.decode"])  # fmt: skip
        http = next(s for s in mine if s["name"].startswith("POST"))
        assert http["parentSpanId"] == r.span_id  # parented on the client's traceparent
        llm = next(s for s in mine if s["name"] == "llm_request")
        assert by_id[llm["parentSpanId"]] is http
        # server time lies inside the client's
        assert int(http["startTimeUnixNano"]) >= int(r.send * 1e9) - 1_000_000
        assert int(llm["endTimeUnixNano"]) <= int((r.finish or 0) * 1e9) + 1_000_000


def test_parse_traceparent() -> None:
    good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert parse_traceparent(good) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert parse_traceparent(good.upper()) is not None
    for bad in (None, "", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "garbage", good[:-3]):
        assert parse_traceparent(bad) is None


def test_fast_engine_writes_server_spans_that_join_the_client_trace(tmp_path: Path) -> None:
    """``serve-sim --engine fast --otlp-out FILE`` writes the spans, as the sim engine does."""
    otlp = tmp_path / "fast.otlp.jsonl"
    with serve_sim_process("--engine", "fast", "--ttft-ms", "40", "--itl-ms", "10",
                           "--otlp-out", str(otlp)) as port:  # fmt: skip
        stream = run_load(LoadConfig(url=f"http://127.0.0.1:{port}", model="sim", rate=30.0,
                                     requests=4, output_len="5"))  # fmt: skip
        unary = run_load(LoadConfig(url=f"http://127.0.0.1:{port}/v1", model="sim",
                                    endpoint="completions", stream=False, rate=30.0,
                                    requests=2, output_len="3", seed=1))  # fmt: skip
    assert stream.summary.ok == 4 and unary.summary.ok == 2
    spans = _spans(otlp)
    paths = [("/v1/chat/completions", r) for r in stream.records]
    for path, r in [*paths, *(("/v1/completions", r) for r in unary.records)]:
        mine = {s["name"]: s for s in spans if s["traceId"] == r.trace_id}
        assert sorted(mine) == sorted([f"POST {path}", "llm_request", "vllm.request.queue",
                                       "vllm.request.prefill", "vllm.request.decode"])  # fmt: skip
        assert mine[f"POST {path}"]["parentSpanId"] == r.span_id
        prefill = mine["vllm.request.prefill"]
        first_ns = int(prefill["endTimeUnixNano"])
        # the first token leaves the server at least the engine's TTFT after it came in
        assert first_ns - int(prefill["startTimeUnixNano"]) >= 39_000_000
        assert int(mine["llm_request"]["endTimeUnixNano"]) <= int((r.finish or 0) * 1e9) + 1e6
