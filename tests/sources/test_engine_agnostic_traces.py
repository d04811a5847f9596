"""The same incident traced by vLLM, SGLang and NVIDIA Dynamo (aggregated serving) reads the
same: the same top category and a p95 TTFT stage breakdown within 5 % on every stage (issue 16).

Each engine's spans are shaped as it emits them: vLLM V1's ``llm_request`` with its
``gen_ai.latency.*`` attributes (vllm/tracing.py), SGLang ``--enable-trace`` slices named by
``RequestStage`` under its router, and Dynamo's frontend ``http-request`` ->
``router.route_request`` -> ``handle_payload`` -> ``engine.generate`` with ``disagg_role=agg``
and ``ttft_ms`` (ai-dynamo/dynamo lib/backend-common/src/adapter.rs).  Dynamo's span has no
queue/prefill split: its time before the first token is read as prefill, so the incident here
is one the engine's queue does not carry (longer prompts, prefill time in proportion)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from trace_builders import Sp, otlp_doc, sid, tid, write_jsonl

from tailtriage.pipeline.triage import triage
from tailtriage.store.input import load_capture

N = 1500
DURATION_S = 900.0
INCIDENT = (450.0, 630.0)  # seconds after T0 where prompts are long
#: prefill seconds per prompt token (an H100-like 8B model)
PREFILL_S_PER_TOKEN = 1.2e-4


def _incident(seed: int = 3) -> dict[str, np.ndarray]:
    """Per request: arrival and its frontend, queue, prefill and decode seconds, tokens."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0.0, DURATION_S, N))
    hot = (arrival >= INCIDENT[0]) & (arrival < INCIDENT[1])
    prompt = np.where(hot, rng.integers(6000, 12000, N), rng.integers(500, 2000, N))
    return {
        "arrival": arrival,
        "api": rng.uniform(0.004, 0.012, N),
        "queue": rng.uniform(0.001, 0.004, N),
        "prefill": prompt * PREFILL_S_PER_TOKEN * rng.uniform(0.9, 1.1, N),
        "decode": rng.uniform(1.5, 3.0, N),
        "prompt": prompt.astype(float),
        "output": rng.integers(100, 300, N).astype(float),
    }


def _vllm(i: int, r: dict[str, float]) -> list[Sp]:
    t, ttft = r["arrival"], r["api"] + r["queue"] + r["prefill"]
    attrs = {
        "gen_ai.request.id": f"req-{i}",
        "gen_ai.response.model": "llama-8b",
        "gen_ai.usage.input_tokens": int(r["prompt"]),
        "gen_ai.usage.output_tokens": int(r["output"]),
        "gen_ai.latency.time_in_queue": r["queue"],
        "gen_ai.latency.time_in_model_prefill": r["prefill"],
        "gen_ai.latency.time_in_model_decode": r["decode"],
        "gen_ai.latency.time_to_first_token": ttft,
        "gen_ai.latency.e2e": ttft + r["decode"],
    }
    return [Sp(tid(i), sid(i, 1), None, "llm_request", t, t + ttft + r["decode"], "SERVER",
               "vllm", attrs)]  # fmt: skip


def _sglang(i: int, r: dict[str, float]) -> list[Sp]:
    t = r["arrival"]
    fin = t + r["api"] + r["queue"] + r["prefill"] + r["decode"]
    root = Sp(tid(i), sid(i, 1), None, "POST /v1/chat/completions", t, fin, "SERVER",
              "sglang-router", {"http.route": "/v1/chat/completions",
                                "gen_ai.usage.input_tokens": int(r["prompt"]),
                                "gen_ai.usage.output_tokens": int(r["output"])})  # fmt: skip
    spans, at = [root], t
    for k, (name, key) in enumerate(
        (("tokenize", "api"), ("prefill_waiting", "queue"), ("prefill_forward", "prefill"),
         ("decode_loop", "decode")), 2
    ):  # fmt: skip
        spans.append(Sp(tid(i), sid(i, k), root.id, name, at, at + r[key], "INTERNAL", "sglang"))
        at += r[key]
    return spans


def _dynamo_agg(i: int, r: dict[str, float]) -> list[Sp]:
    t = r["arrival"]
    w0 = t + r["api"]  # the frontend's preprocessing (tokenisation) before it routes
    fin = w0 + r["queue"] + r["prefill"] + r["decode"]
    root = Sp(tid(i), sid(i, 1), None, "http-request", t, fin, "SERVER", "dynamo-frontend",
              {"method": "POST", "uri": "/v1/chat/completions", "x_request_id": f"req-{i}",
               "request.outcome": "success"})  # fmt: skip
    route = Sp(tid(i), sid(i, 2), root.id, "router.route_request", w0, fin, "CLIENT",
               "dynamo-frontend", {"request_id": f"req-{i}", "router_mode": "RoundRobin"})  # fmt: skip
    payload = Sp(tid(i), sid(i, 3), route.id, "handle_payload", w0, fin, "SERVER",
                 "dynamo-worker", {"component": "backend", "endpoint": "generate",
                                   "namespace": "dynamo"})  # fmt: skip
    ttft_ms = 1000.0 * (r["queue"] + r["prefill"])
    gen = Sp(tid(i), sid(i, 4), payload.id, "engine.generate", w0, fin, "INTERNAL",
             "dynamo-worker", {"model": "llama-8b", "input_tokens": int(r["prompt"]),
                               "disagg_role": "agg", "ttft_ms": f"{ttft_ms:.2f}",
                               "output_tokens": int(r["output"]), "finish_reason": "Stop"})  # fmt: skip
    return [root, route, payload, gen]


ENGINES: dict[str, Callable[[int, dict[str, float]], list[Sp]]] = {
    "vllm": _vllm,
    "sglang": _sglang,
    "dynamo_agg": _dynamo_agg,
}


@pytest.mark.parametrize("slo", ["p95 ttft < 600ms"])
def test_the_same_traced_incident_reads_the_same_from_vllm_sglang_and_dynamo_agg(
    tmp_path: Path, slo: str
) -> None:
    inc = _incident()
    rows = [{k: float(v[i]) for k, v in inc.items()} for i in range(N)]
    reports = {}
    for name, make in ENGINES.items():
        spans = [s for i, r in enumerate(rows) for s in make(i, r)]
        path = write_jsonl(tmp_path / f"{name}.jsonl", [otlp_doc(spans)])
        reports[name] = triage(load_capture(path), slo, whatif=False)
    for rep in reports.values():
        assert rep.slos[0].breached
        assert rep.decomposition is not None and rep.decomposition.source == "spans"
    top = {n: r.findings[0].category for n, r in reports.items()}
    assert len(set(top.values())) == 1, top
    shares = {}
    for name, rep in reports.items():
        d = rep.decomposition
        assert d is not None
        shares[name] = {s.stage: s.seconds / d.total for s in d.stages}
    # Dynamo's worker time before its first token is prefill, nothing is left unattributed
    assert shares["dynamo_agg"].get("unattributed", 0.0) == 0.0
    assert shares["dynamo_agg"]["prefill"] > 0.5
    for stage in set().union(*shares.values()) - {"decode"}:
        got = [s.get(stage, 0.0) for s in shares.values()]
        assert max(got) - min(got) <= 0.05, (stage, shares)
