"""The built-in metric catalog: aliases across engine versions, lookups, live queries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tailtriage.model.metric_catalog import (
    CATALOG,
    canonical_metric,
    live_queries,
    lookup,
    names_for,
    spec,
)
from tailtriage.sources import base
from tailtriage.sources.exposition import SOURCE as EXPOSITION


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("vllm:gpu_cache_usage_perc", "kv_cache_usage"),
        ("vllm:kv_cache_usage_perc", "kv_cache_usage"),
        ("vllm_kv_cache_usage_perc", "kv_cache_usage"),  # ':' rewritten by a pipeline
        ("sglang:token_usage", "kv_cache_usage"),
        ("vllm:num_preemptions_total", "preemptions"),
        ("vllm:num_preemptions", "preemptions"),
        ("vllm:time_per_output_token_seconds_bucket", "itl"),
        ("vllm:inter_token_latency_seconds_sum", "itl"),
        ("sglang:time_per_output_token_seconds_count", "itl"),
        ("vllm:time_to_first_token_seconds_bucket", "ttft"),
        ("vllm:request_queue_time_seconds_bucket", "queue_time"),
        ("vllm:request_prefill_time_seconds_count", "prefill_time"),
        ("vllm:e2e_request_latency_seconds_bucket", "e2e_latency"),
        ("vllm:iteration_tokens_total_bucket", "iteration_tokens"),
        ("vllm:prompt_tokens_total", "prompt_tokens"),
        ("vllm:prefix_cache_hits_total", "prefix_cache_hits"),
        ("vllm:gpu_prefix_cache_hits_total", "prefix_cache_hits"),
        ("trtllm:kv_cache_utilization", "kv_cache_usage"),
        ("tgi_queue_size", "requests_waiting"),
        ("nv_inference_queue_duration_us", "triton_queue_duration"),
        ("DCGM_FI_DEV_GPU_UTIL", "gpu_util"),
        ("DCGM_FI_PROF_SM_ACTIVE", "sm_active"),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active"),
        ("DCGM_FI_PROF_NVLINK_TX_BYTES", "nvlink_tx_bytes"),
        ("kube_horizontalpodautoscaler_status_desired_replicas", "hpa_desired_replicas"),
        ("kube_horizontalpodautoscaler_spec_target_metric", "hpa_target_metric"),
        ("kube_pod_status_scheduled_time", "pod_scheduled_time"),
        ("container_cpu_usage_seconds_total", "container_cpu"),
    ],
)
def test_aliases_resolve_to_one_concept(name: str, canonical: str) -> None:
    assert canonical_metric(name) == canonical


def test_unknown_and_created_series_do_not_resolve() -> None:
    for name in ("go_goroutines", "vllm:num_preemptions_created", "vllm:", "", "kv_cache_usage"):
        assert canonical_metric(name) is None


def test_lookup_reports_part_and_spelling() -> None:
    m = lookup("vllm_time_to_first_token_seconds_bucket")
    assert m is not None and m.part == "bucket" and m.name == "vllm:time_to_first_token_seconds"
    assert m.spec.kind == "histogram" and m.spec.unit == "seconds"
    g = lookup("vllm:gpu_cache_usage_perc")
    assert g is not None and g.part == "" and g.spec.unit == "ratio"


def test_catalog_is_consistent() -> None:
    canon = [s.canonical for s in CATALOG]
    assert len(canon) == len(set(canon))
    seen: dict[str, str] = {}
    for s in CATALOG:
        assert s.kind in ("gauge", "counter", "histogram", "summary")
        assert s.names and s.unit and s.meaning
        for n in s.names:
            assert n not in seen, f"{n} listed under {seen.get(n)} and {s.canonical}"
            seen[n] = s.canonical
            assert canonical_metric(n) == s.canonical
    assert names_for("kv_cache_usage")[0] == "vllm:kv_cache_usage_perc"
    with pytest.raises(KeyError, match="known"):
        spec("nope")


def test_live_queries_are_selectors_matching_every_spelling() -> None:
    queries = dict(live_queries())
    assert set(queries) == {s.canonical for s in CATALOG}
    q = queries["itl"]
    pattern = re.fullmatch(r'\{__name__=~"(.*)"\}', q)
    assert pattern is not None
    rx = re.compile(pattern.group(1))
    for name in (
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:time_per_output_token_seconds_sum",
        "vllm_time_per_output_token_seconds_count",
        "sglang:inter_token_latency_seconds_bucket",
    ):
        assert rx.fullmatch(name), name
    assert not rx.fullmatch("vllm:time_to_first_token_seconds_bucket")
    preempt = re.compile(re.fullmatch(r'\{__name__=~"(.*)"\}', queries["preemptions"]).group(1))  # type: ignore[union-attr]
    assert preempt.fullmatch("vllm:num_preemptions_total") and preempt.fullmatch(
        "vllm:num_preemptions"
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "engines/vllm_metrics_sample.txt",
            {"requests_running", "generation_tokens", "request_success", "ttft"},
        ),
        (
            "engines/sglang_metrics_sample.txt",
            {
                "ttft",
                "e2e_latency",
                "itl",
                "requests_running",
                "requests_waiting",
                "kv_cache_usage",
                "prefix_cache_hit_rate",
                "gen_throughput",
                "prompt_tokens",
                "generation_tokens",
            },
        ),
    ],
)
def test_real_engine_scrapes_resolve_through_the_catalog(
    shared_data: Path, name: str, expected: set[str]
) -> None:
    cap = EXPOSITION.read(shared_data / name, base.ReadOptions())
    found = {canonical_metric(m) for m in cap.series.column("metric").to_pylist()}
    assert expected <= found


def test_docs_list_every_catalog_entry() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "sources.md").read_text()
    for s in CATALOG:
        row = next((ln for ln in docs.splitlines() if ln.startswith(f"| `{s.canonical}` |")), None)
        assert row is not None, f"docs/sources.md has no row for {s.canonical}"
        for name in s.names:
            assert f"`{name}`" in row, (s.canonical, name)
