"""Rules on hand-built incidents whose cause is known by construction."""

from __future__ import annotations

import numpy as np

from diagnosis.scenes import (
    BASELINE,
    INCIDENT,
    context,
    decomposition,
    gauge,
    requests,
    slo,
)
from tailtriage.diagnosis import diagnose, registered
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.model import Capture
from tailtriage.model.vocabulary import CATEGORIES, STAGES

HEALTHY = {"ingress": 0.05, "engine_queue": 0.02, "prefill": 0.25}


def _lagging_hpa_rows() -> list:
    n = 40  # 600 s of 15 s samples
    queue = [0.0] * 20 + [float(3 * i) for i in range(20)]
    rows = gauge("vllm:num_requests_waiting", queue)
    rows += gauge(
        "kube_horizontalpodautoscaler_spec_target_metric",
        [60.0] * n,
        labels={"horizontalpodautoscaler": "vllm", "metric_name": "cpu"},
    )
    rows += gauge("kube_horizontalpodautoscaler_status_current_replicas", [2] * 30 + [3] * 10)
    rows += gauge("kube_horizontalpodautoscaler_status_desired_replicas", [2] * 26 + [3] * 14)
    return rows


def test_scaling_lag_ranks_first_when_pending_grows_and_hpa_scales_on_cpu() -> None:
    inc = {"ingress": 0.05, "pending": 0.2, "engine_queue": 0.05, "prefill": 0.5}
    cap = requests(
        incident_stages={**inc, "decode": 2.0}, baseline_stages={**HEALTHY, "decode": 2.0}
    )
    ctx = context(
        cap,
        [slo("ttft", 0.5, 0.8)],
        decomposition(inc, HEALTHY),
        series_rows=_lagging_hpa_rows(),
        event_rows=[
            {
                "time": INCIDENT[0] + 90,
                "kind": "hpa_rescale",
                "object_kind": "HorizontalPodAutoscaler",
                "object_name": "vllm",
                "attributes": {"replicas": 3},
            },
        ],
    )
    findings = diagnose(ctx)
    assert findings, "a breached SLO with a grown pending stage must produce findings"
    top = findings[0]
    assert top.category == "scaling_lag"
    assert top.stage == "pending"
    signals = {e.signal for e in top.evidence}
    assert "hpa.target_metric" in signals and "stage.pending" in signals
    delay = next(e for e in top.evidence if e.signal == "hpa.first_scale_up_delay_s")
    assert delay.value == 90.0


def test_no_findings_when_every_slo_holds() -> None:
    cap = requests(baseline_stages={**HEALTHY, "decode": 2.0})
    ctx = context(cap, [slo("ttft", 0.5, 0.3)], decomposition(HEALTHY, HEALTHY))
    assert diagnose(ctx) == ()


def test_engine_queue_without_metrics_is_insufficient_telemetry_naming_the_metric() -> None:
    inc = {"ingress": 0.05, "engine_queue": 0.6, "prefill": 0.25}
    cap = requests(
        incident_stages={**inc, "decode": 2.0}, baseline_stages={**HEALTHY, "decode": 2.0}
    )
    ctx = context(cap, [slo("ttft", 0.5, 0.9)], decomposition(inc, HEALTHY))
    findings = diagnose(ctx)
    gap = [f for f in findings if f.category == "insufficient_telemetry"]
    assert gap and gap[0].stage == "engine_queue"
    assert any("vllm:num_requests_waiting" in s for s in gap[0].next_steps)


def test_missing_stage_timings_ask_for_traces() -> None:
    cap = requests(baseline_stages={**HEALTHY, "decode": 2.0})
    ctx = context(cap, [slo("ttft", 0.2, 0.4)], None)
    findings = diagnose(ctx)
    assert [f.category for f in findings] == ["insufficient_telemetry"]
    assert any("trac" in s for s in findings[0].next_steps)


def test_kv_cache_pressure_with_preemptions() -> None:
    inc = {"ingress": 0.05, "engine_queue": 0.5, "prefill": 0.3}
    cap = requests(
        incident_stages={**inc, "decode": 2.0}, baseline_stages={**HEALTHY, "decode": 2.0}
    )
    rows = gauge("vllm:kv_cache_usage_perc", [0.5] * 20 + [0.97] * 20)
    rows += gauge("vllm:num_preemptions_total", np.concatenate([np.zeros(20), np.arange(20) * 7]))
    rows += gauge("vllm:num_requests_waiting", [0.0] * 20 + [float(i) for i in range(20)])
    rows += gauge("DCGM_FI_PROF_SM_ACTIVE", [0.6] * 40)
    ctx = context(cap, [slo("ttft", 0.5, 0.85)], decomposition(inc, HEALTHY), series_rows=rows)
    findings = diagnose(ctx)
    assert findings[0].category == "kv_cache_pressure"
    pre = next(e for e in findings[0].evidence if e.signal == "vllm:num_preemptions_total")
    assert pre.value == 19 * 7


def _overlapped_decodes() -> Capture:
    """4 % long prompts in both windows; every decode that overlaps a long prefill on its
    replica takes twice as long."""
    rng = np.random.default_rng(3)
    n = 600
    prompts = np.where(rng.random(2 * n) < 0.04, 8000, 200)
    base = {"ingress": 0.02, "prefill": 0.05, "decode": 1.0}
    cap = requests(n_per_window=n, baseline_stages=base, prompt_tokens=prompts, replicas=1)
    # stretch the decode of every request whose decode overlaps a long prefill
    import pyarrow as pa
    import pyarrow.compute as pc

    st = cap.stages.to_pydict()
    req = cap.requests.to_pydict()
    long_ids = {
        r for r, p in zip(req["request_id"], req["prompt_tokens"], strict=True) if p >= 8000
    }
    pre = [
        (s, s + d)
        for r, k, s, d in zip(
            st["request_id"], st["stage"], st["start"], st["duration"], strict=True
        )
        if k == "prefill" and r in long_ids
    ]
    pre_arr = np.array(pre)
    dur = []
    for k, s, d in zip(st["stage"], st["start"], st["duration"], strict=True):
        if k == "decode" and ((pre_arr[:, 0] < s + d) & (pre_arr[:, 1] > s)).any():
            d = d * 2.0
        dur.append(d)
    cap = cap.replace(stages=cap.stages.set_column(3, "duration", pa.array(dur)))
    assert pc.sum(cap.stages["duration"]).as_py() > 0
    return cap


def test_prefill_interference_from_stage_overlaps() -> None:
    ctx = context(_overlapped_decodes(), [slo("tpot", 0.02, 0.03)], None)
    cats = [f.category for f in diagnose(ctx)]
    assert cats[0] == "prefill_interference", cats


def test_decode_overlaps_alone_do_not_explain_a_first_token_breach() -> None:
    # the same overlaps, but the breach is TTFT (queueing) and no long-prompt minority joined:
    # slower decode beside long prefills says nothing about when first tokens came, so the
    # rule claims nothing for it (it claimed the whole engine queue, at half strength, and
    # ranked above the API server that was the cause)
    base = {"ingress": 0.02, "prefill": 0.05}
    inc = {"ingress": 0.02, "engine_queue": 0.4, "prefill": 0.05}
    cap = _overlapped_decodes()

    def found(ctx: DiagnosisContext) -> list[str]:
        return [f.category for f in diagnose(ctx)]

    assert "prefill_interference" in found(context(cap, [slo("tpot", 0.02, 0.03)], None))
    ttft = context(cap, [slo("ttft", 0.3, 0.5)], decomposition(inc, base))
    assert "prefill_interference" not in found(ttft)
    # with a token-gap SLO breached as well, the gaps are claimed, not the first tokens
    both = context(cap, [slo("ttft", 0.3, 0.5), slo("tpot", 0.02, 0.03)], decomposition(inc, base))
    pi = [f for f in diagnose(both) if f.category == "prefill_interference"]
    assert pi and all(f.metric == "tpot" for f in pi), [(f.metric, f.stage) for f in pi]


def test_every_rule_names_a_known_category_and_stage() -> None:
    inc = {
        "ingress": 0.2,
        "gateway_queue": 0.2,
        "pending": 0.2,
        "api_server": 0.2,
        "engine_queue": 0.2,
        "prefill": 0.3,
    }
    cap = requests(
        incident_stages={**inc, "decode": 2.0}, baseline_stages={**HEALTHY, "decode": 2.0}
    )
    ctx = context(
        cap,
        [slo("ttft", 0.5, 1.3), slo("itl", 0.02, 0.05)],
        decomposition(inc, HEALTHY),
        series_rows=_lagging_hpa_rows(),
    )
    assert {r.category for r in registered()} <= set(CATEGORIES)
    for f in diagnose(ctx):
        assert f.category in CATEGORIES
        assert f.stage is None or f.stage in STAGES
        assert 0.0 <= f.confidence <= 1.0
        assert f.summary and "\n" not in f.summary
    assert BASELINE[1] == INCIDENT[0]


def test_an_itl_only_slo_is_not_explained_by_ttft_stages() -> None:
    inc = {"ingress": 0.05, "pending": 0.4, "engine_queue": 0.3, "prefill": 0.3}
    cap = requests(
        incident_stages={**inc, "decode": 2.0}, baseline_stages={**HEALTHY, "decode": 2.0}
    )
    rows = gauge("DCGM_FI_PROF_DRAM_ACTIVE", [0.5] * 20 + [0.85] * 20)
    rows += gauge("vllm:num_requests_running", [8.0] * 20 + [40.0] * 20)
    ctx = context(cap, [slo("tpot", 0.02, 0.05)], decomposition(inc, HEALTHY), series_rows=rows)
    findings = diagnose(ctx)
    assert findings[0].category == "decode_memory_bound" and findings[0].metric == "tpot"
    assert all(f.stage in (None, "decode") for f in findings), findings
