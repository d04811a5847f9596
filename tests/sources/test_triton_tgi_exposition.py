"""Triton (with its TensorRT-LLM backend) and TGI ``/metrics`` scrapes, written as the servers
expose them, resolve through the metric catalog; a TGI snapshot triages metrics-only.

Shapes: Triton ``docs/user_guide/metrics.md`` (labels ``model``, ``version``; µs counters;
the opt-in ``nv_inference_first_response_histogram_ms`` with buckets 100/500/2000/5000) and
the TensorRT-LLM backend's gauges split by a label (``nv_trt_llm_request_metrics{request_type}``);
TGI ``router/src/server.rs`` through metrics-exporter-prometheus (counters without
``_total``, 35 geometric ``duration`` buckets from 0.00015 s, no labels of its own)."""

from __future__ import annotations

from pathlib import Path

from tailtriage.model.metric_catalog import canonical_metric
from tailtriage.pipeline.triage import triage
from tailtriage.sources import base
from tailtriage.sources.exposition import SOURCE as EXPOSITION
from tailtriage.store.input import load_capture

TRITON = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="tensorrt_llm",version="1"} 161
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="tensorrt_llm",version="1"} 2
# HELP nv_inference_count Number of inferences performed (does not include cached requests)
# TYPE nv_inference_count counter
nv_inference_count{model="tensorrt_llm",version="1"} 161
# HELP nv_inference_exec_count Number of model executions performed
# TYPE nv_inference_exec_count counter
nv_inference_exec_count{model="tensorrt_llm",version="1"} 161
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="tensorrt_llm",version="1"} 4
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="tensorrt_llm",version="1"} 210336452
# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="tensorrt_llm",version="1"} 11110
# HELP nv_inference_compute_input_duration_us Cumulative compute input duration in microseconds
# TYPE nv_inference_compute_input_duration_us counter
nv_inference_compute_input_duration_us{model="tensorrt_llm",version="1"} 5120
# HELP nv_inference_compute_infer_duration_us Cumulative compute inference duration in microseconds
# TYPE nv_inference_compute_infer_duration_us counter
nv_inference_compute_infer_duration_us{model="tensorrt_llm",version="1"} 209876543
# HELP nv_inference_compute_output_duration_us Cumulative inference compute output duration in microseconds
# TYPE nv_inference_compute_output_duration_us counter
nv_inference_compute_output_duration_us{model="tensorrt_llm",version="1"} 3104
# HELP nv_inference_first_response_histogram_ms Duration from request to first response in milliseconds
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_count{model="tensorrt_llm",version="1"} 161
nv_inference_first_response_histogram_ms_sum{model="tensorrt_llm",version="1"} 40771
nv_inference_first_response_histogram_ms_bucket{model="tensorrt_llm",version="1",le="100"} 38
nv_inference_first_response_histogram_ms_bucket{model="tensorrt_llm",version="1",le="500"} 130
nv_inference_first_response_histogram_ms_bucket{model="tensorrt_llm",version="1",le="2000"} 158
nv_inference_first_response_histogram_ms_bucket{model="tensorrt_llm",version="1",le="5000"} 161
nv_inference_first_response_histogram_ms_bucket{model="tensorrt_llm",version="1",le="+Inf"} 161
# HELP nv_trt_llm_request_metrics TRT LLM request metrics
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="context",version="1"} 1
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="scheduled",version="1"} 12
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 512
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 16
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 4
# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="tensorrt_llm",version="1"} 11147
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="free",model="tensorrt_llm",version="1"} 2050
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="tensorrt_llm",version="1"} 9097
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="tensorrt_llm",version="1"} 64
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"} 0.816
# HELP nv_trt_llm_inflight_batcher_metrics TRT LLM inflight_batcher-specific metrics
# TYPE nv_trt_llm_inflight_batcher_metrics gauge
nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="generation_requests",model="tensorrt_llm",version="1"} 11
nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="total_context_tokens",model="tensorrt_llm",version="1"} 2048
"""

#: TGI's duration buckets: 0.0001 x 1.5^k, k = 1..35 (router/src/server.rs)
TGI_BUCKETS = [0.0001 * 1.5**k for k in range(1, 36)]


def _tgi_histogram(name: str, values: list[float]) -> list[str]:
    out = [f"# TYPE {name} histogram"]
    for le in TGI_BUCKETS:
        out.append(f'{name}_bucket{{le="{le:g}"}} {sum(v <= le for v in values)}')
    out += [
        f'{name}_bucket{{le="+Inf"}} {len(values)}',
        f"{name}_sum {sum(values)}",
        f"{name}_count {len(values)}",
    ]
    return out


def _tgi_scrape() -> str:
    n = 400
    validation = [0.002] * n
    queue = [0.05 + (4.0 if i % 10 == 0 else 0.0) for i in range(n)]  # a tenth queued 4 s
    inference = [3.0 + 0.001 * i for i in range(n)]
    total = [a + q + x for a, q, x in zip(validation, queue, inference, strict=True)]
    lines = [
        "# TYPE tgi_request_success counter",
        f"tgi_request_success {n}",
        "# TYPE tgi_request_count counter",
        f"tgi_request_count {n}",
        "# TYPE tgi_queue_size gauge",
        "tgi_queue_size 7",
        "# TYPE tgi_batch_current_size gauge",
        "tgi_batch_current_size 32",
        *_tgi_histogram("tgi_request_duration", total),
        *_tgi_histogram("tgi_request_validation_duration", validation),
        *_tgi_histogram("tgi_request_queue_duration", queue),
        *_tgi_histogram("tgi_request_inference_duration", inference),
        *_tgi_histogram("tgi_request_mean_time_per_token_duration", [x / 200 for x in inference]),
    ]
    return "\n".join(lines) + "\n"


def test_every_triton_series_resolves_through_the_catalog(tmp_path: Path) -> None:
    path = tmp_path / "triton_metrics.txt"
    path.write_text(TRITON)
    cap = EXPOSITION.read(path, base.ReadOptions())
    names = set(cap.series.column("metric").to_pylist())
    assert "nv_trt_llm_request_metrics" in names
    unresolved = {n for n in names if canonical_metric(n) is None}
    assert not unresolved, unresolved


def test_a_tgi_snapshot_triages_from_its_histograms(tmp_path: Path) -> None:
    path = tmp_path / "tgi_metrics.txt"
    path.write_text(_tgi_scrape())
    rep = triage(load_capture(path), "p95 e2e < 5s", whatif=False)
    slo = rep.slos[0]
    assert slo.source == "engine_histograms" and "tgi_request_duration" in slo.definition
    assert slo.observed is not None and slo.breached  # the queued tenth sets the p95
    assert slo.ci_low is not None and slo.ci_low <= 7.45 <= (slo.ci_high or 0.0)
    assert rep.findings  # at least what traces would add
    assert not {"gateway_queue", "ingress_network"} & {f.category for f in rep.findings}
