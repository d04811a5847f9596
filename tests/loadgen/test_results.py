"""Records -> summary, Capture and OTLP client spans; secrets never reach outputs."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tailtriage.analyses.results import SloSpec
from tailtriage.loadgen import LoadConfig, RequestRecord, finalize, run_load, summarize, to_capture
from tailtriage.loadgen.results import otlp_client_spans, redact_url, request_meets
from tailtriage.model import Capture

from .servers import fast_server


def _rec(i: int, send: float, ttft: float, gaps: list[float], status: str = "ok") -> RequestRecord:
    times = [send + ttft]
    for g in gaps:
        times.append(times[-1] + g)
    return RequestRecord(
        request_id=f"r{i}", trace_id=f"{i + 1:032x}", span_id=f"{i + 1:016x}", index=i,
        worker=0, model="m", scheduled=None, send=send, first_byte=send + ttft / 2,
        first_token=times[0] if status == "ok" else None, finish=times[-1] + 0.001,
        status=status, error=None if status == "ok" else "http_status",
        error_detail=None, http_status=200 if status == "ok" else 503,
        prompt_tokens=10, output_tokens=len(times) if status == "ok" else None,
        chunks=tuple((t, 1) for t in times) if status == "ok" else (),
    )  # fmt: skip


def test_itl_is_per_gap_and_tpot_per_request() -> None:
    a = _rec(0, 100.0, 0.1, [0.01] * 9)  # 10 tokens, even gaps
    b = _rec(1, 100.0, 0.1, [0.001, 0.5])  # one long stall
    s = summarize([a, b])
    assert s.metrics["itl"].count == 11
    assert s.metrics["tpot"].count == 2
    assert math.isclose(a.tpot or 0, 0.01)
    assert math.isclose(b.tpot or 0, 0.2505)
    # the stall is visible in per-gap ITL's max percentile, not averaged away
    assert s.metrics["itl"].at(99.0) > 0.4


def test_goodput_counts_requests_meeting_every_slo() -> None:
    recs = [_rec(i, 100.0 + i, 0.05 * (i + 1), [0.01] * 4) for i in range(10)]
    recs.append(_rec(10, 110.0, 0.05, [0.01], status="error"))
    slos = (SloSpec("ttft", 95.0, 0.26),)
    s = summarize(recs, slos)
    assert s.good_requests == 5  # ttft 0.05..0.25 < 0.26; errors never count
    assert not s.slos[0].met  # p95 ttft over the 10 ok requests is above 0.26
    assert request_meets(recs[0], slos) and not request_meets(recs[10], slos)


@given(st.lists(st.floats(min_value=0.001, max_value=5.0), min_size=1, max_size=40))
def test_summary_percentiles_are_monotone(ttfts: list[float]) -> None:
    recs = [_rec(i, 1000.0, t, [0.01]) for i, t in enumerate(ttfts)]
    m = summarize(recs).metrics["ttft"]
    vals = [v for _, v in m.percentiles]
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(vals))
    assert m.count == len(ttfts)
    assert np.isclose(m.at(50.0), np.percentile(ttfts, 50))


def test_capture_round_trip(tmp_path: Path) -> None:
    recs = [_rec(i, 100.0 + i, 0.1, [0.02] * 3) for i in range(3)]
    cap = to_capture(recs, url="http://u:p@127.0.0.1:9/v1/chat/completions?key=abc")
    back = Capture.load(cap.save(tmp_path / "c.duckdb"))
    req = back.requests.to_pylist()
    assert [r["request_id"] for r in req] == ["r0", "r1", "r2"]
    for r, src in zip(req, recs, strict=True):
        assert math.isclose(r["ttft"], r["first_token"] - r["arrival"])
        assert r["trace_id"] == src.trace_id and r["status"] == "ok"
    assert back.token_times.num_rows == 12
    spans = back.spans.to_pylist()
    assert {s["name"] for s in spans} == {"tailtriage.client"}
    assert {s["kind"] for s in spans} == {"CLIENT"}
    text = orjson.dumps(back.metadata.to_dict()).decode() + str(spans)
    assert "abc" not in text and "u:p" not in text


def test_redact_url() -> None:
    assert redact_url("http://user:secret@h:8000/v1?api_key=x") == "http://h:8000/v1"


def test_otlp_client_spans_shape() -> None:
    recs = [_rec(i, 100.0, 0.1, [0.01]) for i in range(3)]
    (line,) = otlp_client_spans(recs, "http://127.0.0.1:8000/v1/chat/completions")
    doc = orjson.loads(line)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["traceId"] for s in spans] == [r.trace_id for r in recs]
    assert all(s["kind"] == 3 and s["name"] == "tailtriage.client" for s in spans)
    attrs = {a["key"]: a["value"] for a in spans[0]["attributes"]}
    assert attrs["gen_ai.request.model"] == {"stringValue": "m"}
    assert attrs["server.port"] == {"intValue": "8000"}


def test_api_key_is_sent_but_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-SECRET-0123456789"
    out = tmp_path / "run"
    with fast_server() as port:
        cfg = LoadConfig(url=f"http://127.0.0.1:{port}", model="m", rate=20.0, requests=3,
                         output_len="3", api_key=secret)  # fmt: skip
        assert secret not in repr(cfg)
        assert f"Bearer {secret}".encode() in _raw_request(cfg)
        res = run_load(cfg, out, otlp_out=tmp_path / "spans.jsonl")
    assert res.summary.ok == 3
    for f in [*out.iterdir(), tmp_path / "spans.jsonl"]:
        assert secret.encode() not in f.read_bytes(), f


def _raw_request(cfg: LoadConfig) -> bytes:
    from tailtriage.loadgen.http import build_request
    from tailtriage.loadgen.request import RequestSpec, request_body, request_headers

    t = cfg.target()
    spec = RequestSpec(0, "hi", 1, 2)
    return build_request("POST", t.host, t.port, t.path, request_headers(t, "a", "b", "c"),
                         request_body(t, spec))  # fmt: skip


def test_finalize_rebuilds_a_crashed_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with fast_server() as port:
        cfg = LoadConfig(url=f"http://127.0.0.1:{port}", model="m", rate=30.0, requests=4,
                         output_len="3", slos=(SloSpec("ttft", 95.0, 1.0),))  # fmt: skip
        run_load(cfg, out)
    (out / "capture.duckdb").unlink()
    (out / "summary.json").unlink()
    with open(out / "requests.w0.jsonl", "ab") as fh:
        fh.write(b'{"request_id": "torn')  # a crash in the middle of a line
    res = finalize(out)
    assert res.summary.ok == 4
    assert res.summary.slos[0].spec == SloSpec("ttft", 95.0, 1.0)
    assert Capture.load(out / "capture.duckdb").requests.num_rows == 4
    assert Capture.load(out / "capture.duckdb").metadata.quality["loadgen.torn_lines"] == 1
