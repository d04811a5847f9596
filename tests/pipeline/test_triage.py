"""triage(): analysis + diagnosis + remediation, and the JSON report of design 3.5."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from builders import T0, capture_from_arrays
from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S
from tailtriage.model.vocabulary import ACTIONS, CATEGORIES, STAGES
from tailtriage.pipeline.triage import target_of, triage
from tailtriage.remediation.forecast import Forecast
from tailtriage.renderers.jsonrenderer import dumps


def _lagging_capture(seed: int = 7) -> Capture:
    """Healthy for 300 s, then 300 s in which requests also wait ~200 ms for a pod while the
    HPA scales on CPU and reacts late."""
    rng = np.random.default_rng(seed)
    n = 1500
    arrival = np.sort(rng.uniform(T0, T0 + 600.0, n))
    late = arrival >= T0 + 300.0
    stages = {
        "ingress": 0.05 * rng.lognormal(0, 0.1, n),
        "pending": np.where(late, 0.2 * rng.lognormal(0, 0.3, n), 0.0),
        "engine_queue": 0.02 * rng.lognormal(0, 0.3, n),
        "prefill": 0.3 * rng.lognormal(0, 0.15, n),
        "decode": 2.0 * rng.lognormal(0, 0.2, n),
    }
    cap = capture_from_arrays(
        arrival,
        stages,
        replica=[f"vllm-{i % 3}" for i in range(n)],
        output_tokens=np.full(n, 64),
    )
    times = T0 + np.arange(0, 600, 15.0)
    waiting = np.where(times >= T0 + 300, (times - T0 - 300) / 10.0, 0.0)
    series = make_table(
        S.SERIES,
        {
            "metric": ["vllm:num_requests_waiting"] * len(times),
            "labels": ['{"pod":"vllm-0"}'] * len(times),
            "time": times.tolist(),
            "value": waiting.tolist(),
        },
    )
    ev = make_table(
        S.EVENTS,
        {
            "time": [T0 + 400.0],
            "kind": ["hpa_rescale"],
            "object_kind": ["HorizontalPodAutoscaler"],
            "object_name": ["chat-api"],
            "namespace": ["prod"],
            "reason": ["SuccessfulRescale"],
            "message": [
                "New size: 4; reason: cpu resource utilization (percentage of request) above target"
            ],
            "attributes": ['{"replicas": 4}'],
        },
    )
    return cap.replace(series=series, events=ev)


class Toy:
    def current(self, key: str) -> Any:
        return {"hpa.metric": "cpu", "engine.max_num_batched_tokens": 256}.get(key)

    def predict(self, overrides: Mapping[str, Any]) -> Forecast:
        pending = 0.02 if "hpa.metric" in overrides else 0.2
        return Forecast.of({"ttft_p95": 0.05 + pending + 0.35, "throughput_change_pct": 0.0})


INCIDENT = (T0 + 300.0, T0 + 600.0)
BASELINE = (T0, T0 + 300.0)


def test_triage_finds_scaling_lag_and_ranks_the_hpa_fix_first() -> None:
    rep = triage(
        _lagging_capture(),
        "p95 ttft < 500ms",
        incident=INCIDENT,
        baseline=BASELINE,
        predictor=Toy(),
    )
    assert rep.kind == "triage"
    assert rep.slos[0].breached
    assert rep.findings[0].category == "scaling_lag"
    assert rep.findings[0].stage == "pending"
    assert rep.remediations and rep.remediations[0].action == "hpa_metric"
    assert rep.remediations[0].predicted["ttft_p95"] < 0.5
    assert "chat-api" in rep.remediations[0].config and "prod" in rep.remediations[0].config


def test_json_report_has_every_field_of_design_3_5() -> None:
    rep = triage(
        _lagging_capture(),
        "p95 ttft < 500ms",
        incident=INCIDENT,
        baseline=BASELINE,
        predictor=Toy(),
    )
    doc = orjson.loads(dumps(rep.to_dict()))
    assert doc["schema_version"] == 1
    slo = doc["slos"][0]
    assert {"metric", "percentile", "threshold_ms", "observed_ms", "breached"} <= set(slo)
    assert slo["threshold_ms"] == 500 and slo["breached"] is True
    assert doc["windows"]["incident"] == list(INCIDENT)
    assert doc["windows"]["baseline"] == list(BASELINE)
    dec = doc["decomposition"]
    assert dec["metric"] == "ttft" and dec["percentile"] == 95
    assert abs(sum(s["ms"] for s in dec["stages"]) - slo["observed_ms"]) < 1.0
    assert all(s["stage"] in STAGES and "baseline_ms" in s for s in dec["stages"])
    for f in doc["findings"]:
        assert f["category"] in CATEGORIES
        assert {"stage", "confidence", "summary", "evidence"} <= set(f)
        for e in f["evidence"]:
            assert {"signal", "value", "detail"} <= set(e)
    for r in doc["remediations"]:
        assert r["action"] in ACTIONS
        assert {"addresses", "summary", "parameters", "predicted", "config"} <= set(r)
        assert "ttft_p95_ms" in r["predicted"] and "throughput_change_pct" in r["predicted"]
    q = doc["data_quality"]
    assert {"requests", "spans", "unattributed_share", "skipped_files", "warnings"} <= set(q)
    assert q["requests"] == 1500


def test_slo_status_is_a_percentile_never_an_average() -> None:
    # 90 % of requests are fast, 10 % very slow: the mean is under the threshold, p95 is not
    rng = np.random.default_rng(1)
    n = 2000
    slow = rng.random(n) < 0.1
    stages = {
        "ingress": np.full(n, 0.01),
        "prefill": np.where(slow, 2.0, 0.1),
        "decode": np.full(n, 1.0),
    }
    cap = capture_from_arrays(np.sort(rng.uniform(T0, T0 + 600, n)), stages)
    ttft = np.asarray(cap.requests["ttft"].to_numpy())
    assert ttft.mean() < 0.5
    rep = triage(cap, "p95 ttft < 500ms", incident=(T0, T0 + 601), whatif=False)
    assert rep.slos[0].breached and rep.slos[0].observed > 1.9
    # throughput is reported on its own, never folded into the latency numbers
    assert "requests_per_s" in rep.throughput


def test_no_breach_means_no_findings_and_no_remediations() -> None:
    rep = triage(
        _lagging_capture(), "p95 ttft < 5s", incident=INCIDENT, baseline=BASELINE, whatif=False
    )
    assert not rep.slos[0].breached
    assert rep.findings == () and rep.remediations == ()


def test_target_of_reads_deployment_and_namespace_from_events() -> None:
    t = target_of(_lagging_capture())
    assert (t.deployment, t.namespace) == ("chat-api", "prod")
    assert target_of(Capture()).deployment == "vllm"


def test_triage_of_spans_without_series_asks_for_metrics() -> None:
    cap = _lagging_capture().replace(series=S.SERIES.empty_table(), events=S.EVENTS.empty_table())
    rep = triage(cap, "p95 ttft < 500ms", incident=INCIDENT, baseline=BASELINE, whatif=False)
    cats = [f.category for f in rep.findings]
    assert "insufficient_telemetry" in cats
    gap = next(f for f in rep.findings if f.category == "insufficient_telemetry")
    assert gap.stage == "pending" and any("kubectl get events" in s for s in gap.next_steps)
