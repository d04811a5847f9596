"""How metrics-only triage reads vLLM's histograms: phases observed at finish, the per-gap ITL
histogram standing in for TPOT, and an engine that did not change during the breach."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from prometheus_files import VLLM_ITL, VLLM_PHASE, VLLM_TTFT, histogram_rows, write_query_range
from tailtriage.pipeline.triage import triage
from tailtriage.store.input import load_capture

T0 = 1_767_261_600.0
STEP = 15.0
SCRAPES = 60
LAB = {"engine": "0", "model_name": "llama", "pod": "vllm-0"}


def _times() -> list[float]:
    return [T0 + i * STEP for i in range(SCRAPES)]


def test_phases_are_read_where_vllm_observes_them_at_finish(tmp_path: Path) -> None:
    """Requests whose first token comes in minutes 7.5-10.5 queued 3 s each; vLLM observes
    their queue and prefill times when they finish, 4 scrapes (60 s of decode) later."""
    rng = np.random.default_rng(2)
    lag = 4
    slow = range(30, 42)
    n = 100
    queue = [rng.uniform(2.5, 3.5, n) if i in slow else rng.uniform(0.0, 0.02, n)
             for i in range(SCRAPES)]  # fmt: skip
    prefill = [rng.uniform(0.05, 0.1, n) for _ in range(SCRAPES)]
    ttft = [q + p + 0.005 for q, p in zip(queue, prefill, strict=True)]
    at_finish = [i - lag for i in range(SCRAPES)]  # scrape i observes the phases of i - lag
    none = np.zeros(0)
    q_fin = [queue[j] if j >= 0 else none for j in at_finish]
    p_fin = [prefill[j] if j >= 0 else none for j in at_finish]
    d_fin = [np.full(n, lag * STEP) if j >= 0 else none for j in at_finish]
    t = _times()
    rows = [
        *histogram_rows("vllm:time_to_first_token_seconds", LAB, VLLM_TTFT, t, ttft),
        *histogram_rows("vllm:request_queue_time_seconds", LAB, VLLM_PHASE, t, q_fin),
        *histogram_rows("vllm:request_prefill_time_seconds", LAB, VLLM_PHASE, t, p_fin),
        *histogram_rows("vllm:request_decode_time_seconds", LAB, VLLM_PHASE, t, d_fin),
    ]
    write_query_range(tmp_path / "vllm.json", rows)
    rep = triage(load_capture(tmp_path), "p95 ttft < 1s", whatif=False)
    d = rep.decomposition
    assert d is not None and d.source == "engine_histograms"
    share = {s.stage: s.seconds / d.total for s in d.stages}
    assert share["engine_queue"] > 0.85  # not the API server: the queue of the same requests
    assert share.get("api_server", 0.0) < 0.05


def test_the_per_gap_itl_histogram_stands_in_for_tpot(tmp_path: Path) -> None:
    """vLLM before 0.11 exports ``time_per_output_token_seconds`` (per gap) and no per-request
    TPOT histogram: a TPOT SLO reads it, and says so."""
    rng = np.random.default_rng(3)
    gaps = [rng.uniform(0.02, 0.04, 0 if i == 0 else 2000) for i in range(SCRAPES)]
    write_query_range(
        tmp_path / "itl.json",
        histogram_rows("vllm:time_per_output_token_seconds", LAB, VLLM_ITL, _times(), gaps),
    )
    rep = triage(load_capture(tmp_path), "p95 tpot < 20ms", whatif=False)
    slo = rep.slos[0]
    assert slo.source == "engine_histograms" and slo.observed is not None and slo.breached
    assert slo.ci_low is not None and slo.ci_high is not None
    assert slo.ci_low <= float(np.percentile(np.concatenate(gaps), 95)) <= slo.ci_high
    assert "stands in" in slo.definition


def test_an_engine_that_did_not_change_says_the_time_is_before_it(tmp_path: Path) -> None:
    """The engine's TTFT is the same all capture long (what changed is in the gateway): the
    first finding is insufficient_telemetry naming gateway spans, no engine cause and no
    guessed gateway cause."""
    rng = np.random.default_rng(4)
    n = 100
    queue = [rng.uniform(0.01, 0.03, 0 if i == 0 else n) for i in range(SCRAPES)]
    prefill = [rng.uniform(0.2, 0.3, len(q)) for q in queue]
    ttft = [q + p for q, p in zip(queue, prefill, strict=True)]
    t = _times()
    rows = [
        *histogram_rows("vllm:time_to_first_token_seconds", LAB, VLLM_TTFT, t, ttft),
        *histogram_rows("vllm:request_queue_time_seconds", LAB, VLLM_PHASE, t, queue),
        *histogram_rows("vllm:request_prefill_time_seconds", LAB, VLLM_PHASE, t, prefill),
    ]
    write_query_range(tmp_path / "flat.json", rows)
    rep = triage(load_capture(tmp_path), "p95 ttft < 250ms", whatif=False)
    assert rep.slos[0].breached  # engine-side p95 about 310 ms
    top = rep.findings[0]
    assert top.category == "insufficient_telemetry", [f.category for f in rep.findings]
    assert "did not rise" in top.summary
    assert any("gateway spans" in s for s in top.next_steps)
    assert not {"gateway_queue", "ingress_network"} & {f.category for f in rep.findings}
