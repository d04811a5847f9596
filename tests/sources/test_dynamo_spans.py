"""NVIDIA Dynamo's OTLP spans map onto stages (rules ``dynamo.*`` in ``stage_rules.yaml``).

The traces are shaped as Dynamo exports them with ``OTEL_EXPORT_ENABLED=1``: the frontend's
``http-request`` root (``request.outcome``), one ``router.route_request`` CLIENT span per worker
call, the worker's ``handle_payload`` SERVER span as its remote child and the worker's
``engine.generate`` (``disagg_role``, ``input_tokens``, ``ttft_ms``...) inside it; in
disaggregated mode the frontend calls the prefill worker, then the decode worker whose
``engine.generate`` names the prefill span in ``migration_span_id``
(ai-dynamo/dynamo lib/backend-common/src/adapter.rs and its OTLP tests under tests/frontend)."""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_builders import Sp, otlp_doc, sid, tid, write_jsonl

from tailtriage.store.input import load_capture


def _stages(cap) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    out: dict[str, dict[str, float]] = {}
    for r in cap.stages.to_pylist():
        by = out.setdefault(r["request_id"], {})
        by[r["stage"]] = by.get(r["stage"], 0.0) + r["duration"]
    return out


def _worker_call(
    i: int, k: int, parent: str, start: float, end: float, role: str, link: str | None
) -> list[Sp]:
    """router.route_request -> handle_payload -> engine.generate, 10 ms of transport and
    5 ms of worker ingress on each side."""
    route = Sp(tid(i), sid(i, k), parent, "router.route_request", start, end, "CLIENT",
               "dynamo-frontend",
               {"request_id": f"req-{i}", "worker_id": 7587888 + k, "router_mode": "RoundRobin",
                "request.attempt": "0", "migration.is_retry": "false",
                "request.outcome": "success"})  # fmt: skip
    payload = Sp(tid(i), sid(i, k + 1), route.id, "handle_payload", start + 0.01, end - 0.01,
                 "SERVER", f"dynamo-worker-{role}",
                 {"component": role, "endpoint": "generate", "namespace": "dynamo",
                  "instance_id": 7587888 + k, "x_request_id": f"req-{i}"})  # fmt: skip
    attrs: dict[str, object] = {"model": "Qwen/Qwen3-0.6B", "input_tokens": 2048,
                                "disagg_role": role, "ttft_ms": "12.50",
                                "output_tokens": 1 if role == "prefill" else 256,
                                "finish_reason": "Length"}  # fmt: skip
    if link:
        attrs |= {"migration_trace_id": tid(i), "migration_span_id": link}
    gen = Sp(tid(i), sid(i, k + 2), payload.id, "engine.generate", start + 0.015, end - 0.015,
             "INTERNAL", f"dynamo-worker-{role}", attrs)  # fmt: skip
    return [route, payload, gen]


def _disagg_trace(i: int) -> list[Sp]:
    t = 10.0 * i
    root = Sp(tid(i), sid(i, 1), None, "http-request", t, t + 2.0, "SERVER", "dynamo-frontend",
              {"method": "POST", "uri": "/v1/chat/completions", "x_request_id": f"req-{i}",
               "request.outcome": "success"})  # fmt: skip
    prefill = _worker_call(i, 2, root.id, t + 0.02, t + 0.55, "prefill", None)
    decode = _worker_call(i, 5, root.id, t + 0.55, t + 2.0, "decode", prefill[2].id)
    return [root, *prefill, *decode]


def test_dynamo_disaggregated_trace_gives_routing_prefill_decode(tmp_path: Path) -> None:
    spans = [s for i in range(3) for s in _disagg_trace(i)]
    cap = load_capture(write_jsonl(tmp_path / "dynamo.jsonl", [otlp_doc(spans)]))
    per = _stages(cap)
    assert len(per) == 3  # one request per frontend root
    for st in per.values():
        # before the first token (the prefill worker's generate ends): frontend preprocessing
        # (20 ms), the route to the prefill worker (10 ms) and its ingress (5 ms); after it,
        # everything is decode (the stages' TTFT accounting: vocabulary.PRE_FIRST_TOKEN_STAGES)
        assert st["api_server"] == pytest.approx(0.025, abs=1e-6)
        assert st["routing"] == pytest.approx(0.01, abs=1e-6)
        assert st["prefill"] == pytest.approx(0.5, abs=1e-6)
        assert st["decode"] == pytest.approx(1.465, abs=1e-6)
        assert "unattributed" not in st


def _agg_spans(ttft_ms: str | None) -> list[Sp]:
    spans = []
    for i in range(2):
        t = 10.0 * i
        root = Sp(tid(i), sid(i, 1), None, "http-request", t, t + 1.0, "SERVER",
                  "my-frontend", {"request.outcome": "success"})  # fmt: skip
        call = _worker_call(i, 2, root.id, t + 0.02, t + 1.0, "agg", None)
        attrs = {k: v for k, v in call[2].attrs.items() if k != "ttft_ms"}
        call[2].attrs = attrs if ttft_ms is None else {**attrs, "ttft_ms": ttft_ms}
        spans += [root, *call]
    return spans


def test_dynamo_aggregated_generate_is_cut_at_its_ttft(tmp_path: Path) -> None:
    """``disagg_role=agg``: one span for queue, prefill and decode; its ``ttft_ms`` (recorded
    on the first non-empty chunk) cuts it into prefill (queue included) and decode, and gives
    the request's first token and tokens."""
    cap = load_capture(write_jsonl(tmp_path / "agg.jsonl", [otlp_doc(_agg_spans("212.50"))]))
    per = _stages(cap)
    assert len(per) == 2  # the root is recognised by its attribute, whatever the service name
    for st in per.values():
        # before the first token: frontend 20 ms, route 10 ms, worker ingress 5 ms, then the
        # TTFT; after it everything is decode (vocabulary.PRE_FIRST_TOKEN_STAGES)
        assert st["api_server"] == pytest.approx(0.025, abs=1e-6)
        assert st["routing"] == pytest.approx(0.01, abs=1e-6)
        assert st["prefill"] == pytest.approx(0.2125, abs=1e-6)
        assert st["decode"] == pytest.approx(1.0 - 0.035 - 0.2125, abs=1e-6)
        assert "unattributed" not in st
    req = cap.requests.to_pylist()
    for r in req:
        # arrival + frontend 20 ms + route 10 ms + ingress 5 ms + TTFT
        assert r["first_token"] - r["arrival"] == pytest.approx(0.035 + 0.2125, abs=1e-6)
        assert r["prompt_tokens"] == 2048 and r["output_tokens"] == 256


def test_dynamo_aggregated_generate_without_ttft_stays_unattributed(tmp_path: Path) -> None:
    """Without ``ttft_ms`` (OTLP export off in the worker, or no token came) nothing says
    where the first token fell: the worker's time is not guessed."""
    cap = load_capture(write_jsonl(tmp_path / "agg.jsonl", [otlp_doc(_agg_spans(None))]))
    for st in _stages(cap).values():
        assert st["unattributed"] == pytest.approx(0.95, abs=1e-6)
        assert "prefill" not in st and "decode" not in st
