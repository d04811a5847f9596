"""Metrics-only triage of TGI and TensorRT-LLM (``trtllm-serve``) bundles, their histograms
shaped exactly as the engines export them and Prometheus's ``query_range`` returns them.

* TGI (``huggingface/text-generation-inference router/src/server.rs``): no TTFT; per request
  ``tgi_request_duration`` (e2e), ``tgi_request_validation_duration``,
  ``tgi_request_queue_duration``, ``tgi_request_inference_duration`` and
  ``tgi_request_mean_time_per_token_duration`` (inference time / generated tokens), every
  ``*duration`` family on 35 geometric buckets from 0.00015 s (ratio 1.5); gauges
  ``tgi_queue_size`` and ``tgi_batch_current_size``; no labels of its own.
* TensorRT-LLM (``NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py``): vLLM's V0 set with
  the ``trtllm_`` prefix, labels ``model_name`` and ``engine_type``, its own prefill buckets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from prometheus_files import (
    VLLM_ITL,
    VLLM_PHASE,
    VLLM_TTFT,
    gauge_rows,
    histogram_rows,
    write_query_range,
)
from tailtriage.pipeline.triage import triage
from tailtriage.store.input import load_capture

T0 = 1_767_261_600.0
STEP = 15.0
SCRAPES = 60
SLOW = range(30, 42)  # the scrapes whose requests queue (minutes 7.5 to 10.5)
PER_SCRAPE = 120
#: TGI's duration buckets (router/src/server.rs: 0.0001 x 1.5^k, k = 1..35)
TGI_DURATION = tuple(0.0001 * 1.5**k for k in range(1, 36))
#: TensorRT-LLM's prefill buckets (collector.py, request_prefill_time_seconds)
TRTLLM_PREFILL = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0,
                  40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
GATEWAY_CAUSES = {"gateway_queue", "ingress_network"}


def _times() -> list[float]:
    return [T0 + i * STEP for i in range(SCRAPES)]


def _incident(seed: int) -> dict[str, list[np.ndarray]]:
    """Per scrape: validation, queue, prefill and decode seconds of the requests observed."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[np.ndarray]] = {"api": [], "queue": [], "prefill": [], "decode": []}
    for i in range(SCRAPES):
        n = 0 if i == 0 else PER_SCRAPE
        out["api"].append(rng.uniform(0.001, 0.004, n))
        out["queue"].append(rng.uniform(2.0, 6.0, n) if i in SLOW else rng.uniform(0.0, 0.05, n))
        out["prefill"].append(rng.uniform(0.05, 0.15, n))
        out["decode"].append(rng.uniform(2.0, 4.0, n))
    return out


def _queue_gauge(name: str, labels: dict[str, str]) -> list[dict[str, object]]:
    return gauge_rows(name, labels, _times(), [60.0 if i in SLOW else 1.0 for i in range(SCRAPES)])


def tgi_bundle(folder: Path, inc: dict[str, list[np.ndarray]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lab = {"job": "tgi", "instance": "10.0.3.7:80", "pod": "tgi-0"}  # Prometheus's, not TGI's
    t = _times()
    inference = [p + d for p, d in zip(inc["prefill"], inc["decode"], strict=True)]
    total = [a + q + x for a, q, x in zip(inc["api"], inc["queue"], inference, strict=True)]
    per_token = [x / 200.0 for x in inference]  # 200 generated tokens each
    rows = [
        *histogram_rows("tgi_request_duration", lab, TGI_DURATION, t, total),
        *histogram_rows("tgi_request_validation_duration", lab, TGI_DURATION, t, inc["api"]),
        *histogram_rows("tgi_request_queue_duration", lab, TGI_DURATION, t, inc["queue"]),
        *histogram_rows("tgi_request_inference_duration", lab, TGI_DURATION, t, inference),
        *histogram_rows(
            "tgi_request_mean_time_per_token_duration", lab, TGI_DURATION, t, per_token
        ),
        *_queue_gauge("tgi_queue_size", lab),
        *gauge_rows("tgi_batch_current_size", lab, t, [32.0] * SCRAPES),
    ]
    write_query_range(folder / "tgi.json", rows)
    return folder


def trtllm_bundle(folder: Path, inc: dict[str, list[np.ndarray]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lab = {"model_name": "llama", "engine_type": "trtllm", "pod": "trtllm-0"}
    t = _times()
    ttft = [a + q + p for a, q, p in zip(inc["api"], inc["queue"], inc["prefill"], strict=True)]
    rows = [
        *histogram_rows("trtllm_time_to_first_token_seconds", lab, VLLM_TTFT, t, ttft),
        *histogram_rows("trtllm_request_queue_time_seconds", lab, VLLM_PHASE, t, inc["queue"]),
        *histogram_rows(
            "trtllm_request_prefill_time_seconds", lab, TRTLLM_PREFILL, t, inc["prefill"]
        ),
        *histogram_rows(
            "trtllm_time_per_output_token_seconds",
            lab,
            VLLM_ITL,
            t,
            [d / 200.0 for d in inc["decode"]],
        ),
        *_queue_gauge("trtllm_num_requests_waiting", lab),
        *gauge_rows("trtllm_kv_cache_utilization", lab, t, [0.4] * SCRAPES),
    ]
    write_query_range(folder / "trtllm.json", rows)
    return folder


def _slow_requests(inc: dict[str, list[np.ndarray]], key: str) -> np.ndarray:
    return np.concatenate([x for i, x in enumerate(inc[key]) if i in SLOW])


def test_tgi_bundle_triages_e2e_from_its_histograms(tmp_path: Path) -> None:
    inc = _incident(seed=3)
    rep = triage(load_capture(tgi_bundle(tmp_path / "tgi", inc)), "p95 e2e < 5s", whatif=False)
    slo = rep.slos[0]
    assert slo.source == "engine_histograms" and slo.breached
    assert "tgi_request_duration" in slo.definition
    truth = np.percentile(
        _slow_requests(inc, "api")
        + _slow_requests(inc, "queue")
        + _slow_requests(inc, "prefill")
        + _slow_requests(inc, "decode"),
        95,
    )
    assert slo.ci_low is not None and slo.ci_high is not None
    assert slo.ci_low <= truth * 1.5 and truth / 1.5 <= slo.ci_high  # the incident's tail
    d = rep.decomposition
    assert d is not None and d.source == "engine_histograms"
    shares = {s.stage: s.seconds for s in d.stages}
    assert shares.get("engine_queue", 0.0) > shares.get("api_server", 0.0)
    cats = [f.category for f in rep.findings]
    assert cats and not GATEWAY_CAUSES & set(cats)
    assert "insufficient_telemetry" in cats  # says which spans would show the rest


def test_trtllm_bundle_triages_ttft_and_splits_queue_from_prefill(tmp_path: Path) -> None:
    inc = _incident(seed=4)
    cap = load_capture(trtllm_bundle(tmp_path / "trt", inc))
    rep = triage(cap, "p95 ttft < 1s", whatif=False)
    slo = rep.slos[0]
    assert slo.source == "engine_histograms" and slo.breached
    assert "trtllm_time_to_first_token_seconds" in slo.definition
    d = rep.decomposition
    assert d is not None
    shares = {s.stage: s.seconds / d.total for s in d.stages}
    assert max(shares, key=lambda s: shares[s]) == "engine_queue"
    assert 0.0 < shares["prefill"] < 0.2
    cats = [f.category for f in rep.findings]
    assert cats and not GATEWAY_CAUSES & set(cats)
