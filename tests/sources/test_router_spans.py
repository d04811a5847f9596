"""Routers, endpoint pickers and disaggregated prefill/decode: their spans map onto the
``routing`` and ``kv_transfer`` stages (rules in ``derive/stage_rules.yaml``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_builders import Sp, otlp_doc, sid, tid, vllm_trace, write_jsonl

from tailtriage.store.input import load_capture


def _stages(cap) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    out: dict[str, dict[str, float]] = {}
    for r in cap.stages.to_pylist():
        by = out.setdefault(r["request_id"], {})
        by[r["stage"]] = by.get(r["stage"], 0.0) + r["duration"]
    return out


def test_llm_d_endpoint_picker_spans_are_routing(tmp_path: Path) -> None:
    """gateway -> EPP scoring (with its KV-cache index lookup) -> vLLM, as llm-d traces it."""
    spans = []
    for i in range(3):
        base = vllm_trace(i, 10.0 * i, router_gap=0.03)
        gw_client = base[1]
        scoring = Sp(tid(i), sid(i, 7), gw_client.id, "llm_d.epp.scoring",
                     gw_client.start + 0.001, gw_client.start + 0.021, "INTERNAL", "epp")  # fmt: skip
        lookup = Sp(tid(i), sid(i, 8), scoring.id, "llm_d.kv_cache.index",
                    scoring.start + 0.002, scoring.start + 0.012, "INTERNAL", "epp",
                    {"cache_hit": True, "blocks_found": 12})  # fmt: skip
        spans += [*base, scoring, lookup]
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)]))
    per = _stages(cap)
    assert len(per) == 3
    for st in per.values():
        assert st["routing"] == pytest.approx(0.02, abs=1e-6)  # scoring incl. its lookup
        assert st["engine_queue"] == pytest.approx(0.2, abs=1e-6)


def test_sglang_pd_slices_give_queue_prefill_kv_transfer_decode(tmp_path: Path) -> None:
    """SGLang --enable-trace in prefill/decode mode: router -> slices named by RequestStage."""
    spans = []
    for i in range(2):
        t = 5.0 * i
        root = Sp(tid(i), sid(i, 1), None, "POST /v1/chat/completions", t, t + 2.0, "SERVER",
                  "sglang-router", {"http.route": "/v1/chat/completions"})  # fmt: skip
        slices = [("dispatch", 0.0, 0.01), ("tokenize", 0.01, 0.03),
                  ("prefill_waiting", 0.03, 0.23), ("prefill_forward", 0.23, 0.53),
                  ("prefill_transfer_kv_cache", 0.53, 0.58), ("decode_loop", 0.58, 2.0)]  # fmt: skip
        spans.append(root)
        for k, (name, a, b) in enumerate(slices, start=2):
            spans.append(Sp(tid(i), sid(i, k), root.id, name, t + a, t + b, "INTERNAL", "sglang"))
    cap = load_capture(write_jsonl(tmp_path / "s.jsonl", [otlp_doc(spans)]))
    per = _stages(cap)
    assert len(per) == 2
    for st in per.values():
        assert st["routing"] == pytest.approx(0.01, abs=1e-6)
        assert st["api_server"] == pytest.approx(0.02, abs=1e-6)
        assert st["engine_queue"] == pytest.approx(0.2, abs=1e-6)
        assert st["prefill"] == pytest.approx(0.3, abs=1e-6)
        assert st["kv_transfer"] == pytest.approx(0.05, abs=1e-6)
        assert st["decode"] == pytest.approx(1.42, abs=1e-6)
