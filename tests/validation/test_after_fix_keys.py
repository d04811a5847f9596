"""tailtriage's fix overrides translated into the realistic generator's knobs (issue 15's
after-fix truth, ``bench/after_fix_corpus.py``): every key the catalog proposes either lands on
a field the generator re-runs with, or is reported as unsupported - never silently dropped."""

from __future__ import annotations

import dataclasses

import pytest

from realistic.fix_keys import RULES, translate
from realistic.spec import Gateway, Spec, with_overrides

#: one value per key, as the catalog writes it
VALUES: dict[str, object] = {
    "engine.max_num_batched_tokens": 1024,
    "engine.max_num_seqs": 64,
    "engine.chunked_prefill": True,
    "hpa.metric": "vllm:num_requests_waiting",
    "hpa.target": 2.0,
    "hpa.enabled": True,
    "hpa.min_replicas": 4,
    "hpa.max_replicas": 8,
    "hpa.scale_up.pods": 4,
    "hpa.scale_up.period_s": 15.0,
    "hpa.scrape_lag_s": 5.0,
    "pods.initial_replicas": 4,
    "pods.image_cached": True,
    "pods.node_image_cached": True,
    "pods.load_gb_s": 8.0,
    "gpu.tp": 2,
    "gpu.interconnect": "nvlink",
    "gateway.concurrency_limit": 32,
    "gateway.routing": "least_outstanding",
    "ingress.keepalive_reuse": 0.99,
    "api_server.workers": 16,
}


@pytest.mark.parametrize("key", sorted(RULES))
def test_every_translated_key_is_a_field_the_generator_reruns_with(key: str) -> None:
    spec = Spec(incident_gateway=Gateway(keepalive_reuse=0.2))
    fix = translate(spec, {key: VALUES[key]})
    assert fix.unsupported == ()
    after = with_overrides(spec, fix.overrides)
    for path, value in fix.overrides.items():
        got: object = after
        for part in path.split("."):
            got = getattr(got, part)
        assert got == value, path


def test_what_the_generator_cannot_express_is_reported() -> None:
    fix = translate(
        Spec(),
        {"model.dtype": "fp8", "hpa.metric": "vllm:kv_cache_usage_perc", "gpu.tp": 2},
    )
    assert fix.overrides == {"tp": 2}
    assert sorted(fix.unsupported) == ["hpa.metric=vllm:kv_cache_usage_perc", "model.dtype=fp8"]


def test_a_per_replica_limit_is_envoys_pool_limit_times_the_replicas() -> None:
    istio = Spec(platform="istio", replicas=3)
    assert translate(istio, {"gateway.concurrency_limit": 32}).overrides == {
        "gateway.max_connections": 96
    }
    knative = dataclasses.replace(istio, platform="knative_direct")
    assert translate(knative, {"gateway.concurrency_limit": 32}).overrides == {
        "gateway.container_concurrency": 32
    }


def test_an_hpa_added_where_none_runs_scales_on_the_fixes_metric() -> None:
    spec = dataclasses.replace(Spec(), hpa=dataclasses.replace(Spec().hpa, metric="none"))
    fix = translate(spec, {"hpa.metric": "DCGM_FI_DEV_GPU_UTIL", "hpa.enabled": True})
    assert fix.overrides == {"hpa.metric": "gpu_util"}
