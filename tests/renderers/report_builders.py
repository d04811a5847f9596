"""Hand-built Reports for renderer tests: the design's worked example (p95 TTFT 800 ms
against a 500 ms SLO: 50 ms ingress, 200 ms waiting for a pod, 550 ms in the engine), a
hostile variant whose every input-derived string is an HTML/script injection, an empty one,
and a huge one (100,000 requests' worth of raw points) for the size bound."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from statistics import NormalDist

import numpy as np

from tailtriage.analyses.results import (
    Decomposition,
    PercentilePoint,
    SloResult,
    SloSpec,
    StageValue,
    Windows,
)
from tailtriage.diagnosis.findings import Evidence, Finding
from tailtriage.remediation.actions import Remediation
from tailtriage.report import Charts, DataQuality, Report
from tailtriage.report_sections import sections_from

T0 = 1_764_000_000.0  # 2025-11-24T16:00:00Z
BASELINE = (T0, T0 + 600.0)
INCIDENT = (T0 + 900.0, T0 + 1500.0)

HOSTILE = '<img src=x onerror="window.__pwned=1">'
HOSTILE_SCRIPT = "</script><script>window.__pwned=2</script>"

#: (stage, incident ms, baseline ms) of the worked example; incident sums to 800
STAGE_MS: tuple[tuple[str, float, float], ...] = (
    ("ingress", 50.0, 48.0),
    ("gateway_queue", 0.0, 0.0),
    ("pending", 200.0, 4.0),
    ("api_server", 10.0, 9.0),
    ("engine_queue", 90.0, 31.0),
    ("prefill", 450.0, 262.0),
)


def _decomposition() -> Decomposition:
    stages = tuple(StageValue(s, ms / 1000, b / 1000) for s, ms, b in STAGE_MS)
    return Decomposition(
        metric="ttft",
        percentile=95.0,
        total=sum(s.seconds for s in stages),
        stages=stages,
        band=(94.0, 96.0),
        count=96,
        baseline_total=sum(b for _, _, b in STAGE_MS) / 1000,
        baseline_count=88,
    )


def _findings() -> tuple[Finding, ...]:
    return (
        Finding(
            category="scaling_lag",
            stage="pending",
            confidence=0.92,
            summary="p95 requests wait 200 ms for a pod: the HPA scales on CPU, which stays "
            "low while the GPU queue grows",
            evidence=(
                Evidence("pending", 0.2, "p95-band share 200 ms vs 4 ms in baseline", "span"),
                Evidence(
                    "vllm:num_requests_waiting",
                    37.0,
                    "peak 37 while HPA target is CPU 80%",
                    "metric",
                    5,
                ),
                Evidence(
                    "hpa_rescale",
                    "4 -> 7",
                    "HPA scaled 212 s after the queue started to grow",
                    "event",
                ),
            ),
        ),
        Finding(
            category="compute_saturation",
            stage="prefill",
            confidence=0.81,
            summary="prefill takes 450 ms at p95 (262 ms in baseline): batches of 256 tokens "
            "delay the first token",
            evidence=(
                Evidence(
                    "vllm:num_requests_running", 256.0, "batch full 94% of the incident", "metric"
                ),
                Evidence("gpu_utilization", 0.98, "DCGM_FI_DEV_GPU_UTIL near 100%", "metric", 0.9),
            ),
        ),
        Finding(
            category="ingress_network",
            stage="ingress",
            confidence=0.2,
            summary="ingress is 50 ms, unchanged from baseline; not a cause",
            evidence=(Evidence("ingress", 0.05, "48 ms in baseline", "span"),),
            next_steps=("export Envoy access logs with upstream timing to confirm",),
        ),
    )


HPA_YAML = """apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: llm
spec:
  metrics:
  - type: Pods
    pods:
      metric:
        name: vllm:num_requests_waiting
      target:
        type: AverageValue
        averageValue: "5"
"""


def _remediations() -> tuple[Remediation, ...]:
    return (
        Remediation(
            action="hpa_metric",
            addresses=("scaling_lag",),
            summary="Scale the HPA on the GPU queue (vllm:num_requests_waiting) instead of CPU",
            parameters={"hpa.metric": "vllm:num_requests_waiting", "hpa.target": 5},
            predicted={"ttft_p95": 0.62, "throughput_change_pct": 0.0},
            config=HPA_YAML,
        ),
        Remediation(
            action="max_num_batched_tokens",
            addresses=("compute_saturation", "prefill_compute"),
            summary="Cut the engine's max batched tokens from 256 to 128",
            parameters={"engine.max_num_batched_tokens": 128},
            predicted={"ttft_p95": 0.55, "throughput_change_pct": -6.5},
            config="--max-num-batched-tokens 128",
            caveats=("smaller batches lower peak throughput",),
        ),
        Remediation(
            action="combined",
            addresses=("scaling_lag", "compute_saturation"),
            summary="Both: HPA on GPU queue depth and max batched tokens 128",
            parameters={
                "hpa.metric": "vllm:num_requests_waiting",
                "engine.max_num_batched_tokens": 128,
            },
            predicted={"ttft_p95": 0.37, "throughput_change_pct": -6.5},
            config=HPA_YAML + "---\n# engine flags\n--max-num-batched-tokens 128\n",
        ),
    )


def _percentile_series() -> tuple[PercentilePoint, ...]:
    points = []
    for i in range(30):  # 30 bins of 50 s over 1500 s
        start = T0 + 50.0 * i
        in_incident = INCIDENT[0] <= start < INCIDENT[1]
        ramp = min(1.0, max(0.0, (start - INCIDENT[0] + 150) / 300)) if in_incident else 0.0
        p95 = 0.352 + (0.46 * ramp if in_incident else 0.01 * (i % 3))
        points.append(
            PercentilePoint(
                start, start + 50.0, 160 + i, ((50.0, p95 * 0.45), (95.0, p95), (99.0, p95 * 1.3))
            )
        )
    return tuple(points)


#: (median, sigma) of the log-normal TTFT and ITL: p50 310 ms / p95 800 ms, p50 24 ms / p95 34.2 ms
TTFT_LOGNORMAL = (0.31, math.log(0.8 / 0.31) / NormalDist().inv_cdf(0.95))
ITL_LOGNORMAL = (0.024, math.log(0.0342 / 0.024) / NormalDist().inv_cdf(0.95))


def _lognormal_q(median: float, sigma: float, q: float) -> float:
    return median * math.exp(sigma * NormalDist().inv_cdf(q / 100))


def _cdf(median: float, sigma: float, n: int = 200) -> tuple[tuple[float, float], ...]:
    """A log-normal CDF with ``n`` points."""
    z = NormalDist()
    q = [(i + 0.5) / n for i in range(n)]
    return tuple((median * math.exp(sigma * z.inv_cdf(f)), f) for f in q)


def _charts() -> Charts:
    waterfall = (
        ("ingress", 0.0, 0.05, "envoy ingress"),
        ("pending", 0.05, 0.2, "activator buffering"),
        ("api_server", 0.25, 0.01, "POST /v1/chat/completions"),
        ("engine_queue", 0.26, 0.09, "vllm scheduler wait"),
        ("prefill", 0.35, 0.45, "llm_request prefill"),
        ("decode", 0.8, 1.9, "llm_request decode"),
    )
    replicas: dict[str, Mapping[str, float]] = {
        f"llm-7f9c-{i}": {
            "count": 900.0 - 60 * i,
            "ttft_p95": 0.62 + 0.05 * i,
            "itl_p95": 0.031 + 0.002 * i,
        }
        for i in range(4)
    }
    events = (
        (
            T0 + 950.0,
            "hpa_rescale",
            "hpa/llm",
            "New size: 5; reason: cpu resource utilization above target",
        ),
        (T0 + 955.0, "pod_created", "pod/llm-7f9c-4", "Created pod llm-7f9c-4"),
        (
            T0 + 960.0,
            "failed_scheduling",
            "pod/llm-7f9c-4",
            "0/6 nodes are available: 6 Insufficient nvidia.com/gpu",
        ),
        (T0 + 1010.0, "node_scale_up", "node/gpu-7", "TriggeredScaleUp"),
        (T0 + 1120.0, "pod_ready", "pod/llm-7f9c-4", "Readiness probe succeeded"),
        (T0 + 1160.0, "hpa_rescale", "hpa/llm", "New size: 7"),
    )
    hpa = tuple(
        (T0 + t, v)
        for t, v in ((0.0, 4.0), (950.0, 5.0), (1120.0, 5.0), (1160.0, 7.0), (1500.0, 7.0))
    )
    queue = tuple(
        (T0 + 25.0 * i, float(max(0, 37 - abs(i - 44) * 2)) if 36 <= i <= 60 else 1.0)
        for i in range(61)
    )
    return Charts(
        percentile_series=_percentile_series(),
        cdfs={"ttft": _cdf(*TTFT_LOGNORMAL), "itl": _cdf(*ITL_LOGNORMAL)},
        waterfall=waterfall,
        waterfall_request_id="req-000731",
        replicas=replicas,
        events=events,
        series={"hpa_replicas": hpa, "vllm:num_requests_waiting": queue},
    )


def make_report() -> Report:
    """The design's worked example as a full triage Report."""
    slo = SloResult(
        SloSpec("ttft", 95.0, 0.5), 0.8, True, 4812, 0.781, 0.829, "edge span start to first token"
    )
    itl = SloResult(
        SloSpec("itl", 95.0, 0.05), 0.0342, False, 311_220, 0.0339, 0.0346, "engine ITL histogram"
    )
    return Report(
        kind="triage",
        slos=(slo, itl),
        windows=Windows(INCIDENT, BASELINE, detected=True),
        decomposition=_decomposition(),
        findings=_findings(),
        remediations=_remediations(),
        data_quality=DataQuality(
            requests=4812,
            spans=21344,
            unattributed_share=0.011,
            skipped_files=({"path": "bundle/notes.txt", "reason": "unknown format"},),
            warnings=("2 spans had a child outside its parent; clock skew corrected",),
            series=14,
            events=6,
            clock_adjustments=2,
            counts={"spans.duplicate_id": 3},
        ),
        charts=_charts(),
        stage_percentiles={
            s: {"p50": ms / 2000, "p95": ms / 1000, "p99": ms * 1.4 / 1000} for s, ms, _ in STAGE_MS
        },
        attribution={
            "pending": {"counterfactual": 0.196, "shapley": 0.19},
            "prefill": {"counterfactual": 0.188, "shapley": 0.2},
        },
        percentiles={
            "ttft": {f"p{q:g}": _lognormal_q(*TTFT_LOGNORMAL, q) for q in (50, 90, 95, 99)},
            "itl": {f"p{q:g}": _lognormal_q(*ITL_LOGNORMAL, q) for q in (50, 95, 99)},
        },
        throughput={"requests_per_s": 8.02, "output_tokens_per_s": 1604.0},
        title="triage: checkout-llm, p95 TTFT breach",
    )


def make_hostile_report() -> Report:
    """Every string that can come from input carries an injection payload."""
    base = make_report()
    f0 = base.findings[0]
    hostile_finding = replace(
        f0,
        summary=f"{f0.summary} {HOSTILE}",
        evidence=(
            *f0.evidence,
            Evidence(HOSTILE_SCRIPT, HOSTILE, f"span attribute {HOSTILE}", "span"),
        ),
    )
    charts = replace(
        base.charts,
        waterfall=(*base.charts.waterfall, ("unattributed", 0.1, 0.01, HOSTILE_SCRIPT)),
        waterfall_request_id=HOSTILE,
        replicas={
            **base.charts.replicas,
            HOSTILE: {"count": 5.0, "ttft_p95": 0.5},
            HOSTILE_SCRIPT: {"count": 3.0},
        },
        events=(*base.charts.events, (T0 + 1000.0, "other", HOSTILE, HOSTILE_SCRIPT)),
        series={**base.charts.series, HOSTILE: ((T0, 1.0), (T0 + 10, 2.0))},
    )
    rem = replace(
        base.remediations[0],
        config=base.remediations[0].config + f"# {HOSTILE_SCRIPT}\n",
        summary=HOSTILE,
    )
    return replace(
        base,
        title=f"report {HOSTILE_SCRIPT}",
        findings=(hostile_finding, *base.findings[1:]),
        remediations=(rem, *base.remediations[1:]),
        charts=charts,
        data_quality=replace(
            base.data_quality,
            skipped_files=({"path": HOSTILE_SCRIPT, "reason": HOSTILE},),
            warnings=(HOSTILE, "<!-- " + HOSTILE_SCRIPT),
        ),
        sections=sections_from(
            {"analysis": {"notes": [HOSTILE_SCRIPT], "definitions": {HOSTILE: HOSTILE_SCRIPT}}}
        ),
    )


def make_empty_report() -> Report:
    """What a run with nothing to say produces: no windows, no decomposition, no charts."""
    return Report(kind="analyze", slos=(), windows=None, decomposition=None)


def make_huge_report(n_requests: int = 100_000, seed: int = 7) -> Report:
    """A report whose charts carry raw, un-aggregated points for ``n_requests`` requests
    (one CDF point per request, one event per request, one replica per 10 requests): the
    renderer must aggregate before plotting to stay small."""
    rng = np.random.default_rng(seed)
    ttft = np.sort(rng.lognormal(np.log(0.3), 0.6, n_requests))
    itl = np.sort(rng.lognormal(np.log(0.025), 0.3, n_requests))
    frac = (np.arange(n_requests) + 1) / n_requests
    base = make_report()
    series = tuple((T0 + i * 0.015, float(v)) for i, v in enumerate(rng.poisson(5, n_requests)))
    charts = replace(
        base.charts,
        cdfs={
            "ttft": tuple(zip(ttft.tolist(), frac.tolist(), strict=True)),
            "itl": tuple(zip(itl.tolist(), frac.tolist(), strict=True)),
        },
        events=tuple(
            (T0 + i * 0.015, "pod_ready", f"pod/llm-{i}", "Readiness probe succeeded")
            for i in range(n_requests)
        ),
        replicas={
            f"llm-{i:05d}": {"count": 10.0, "ttft_p95": float(ttft[i])}
            for i in range(n_requests // 10)
        },
        series={"vllm:num_requests_waiting": series},
        percentile_series=tuple(
            PercentilePoint(T0 + i, T0 + i + 1, 1, ((95.0, float(v)),))
            for i, v in enumerate(ttft[: n_requests // 10])
        ),
        waterfall=tuple(
            ("decode", i * 0.001, 0.001, f"token {i}") for i in range(n_requests // 10)
        ),
    )
    return replace(
        base, charts=charts, data_quality=replace(base.data_quality, requests=n_requests)
    )


def make_compare_report() -> Report:
    """A ``compare`` report as ``pipeline.compare`` writes it: the after run, the before run
    as the decomposition's baseline, and the per-SLO verdicts in ``sections.compare``."""
    base = make_report()
    assert base.decomposition is not None
    after = {
        "ingress": 49.0,
        "pending": 20.0,
        "api_server": 10.0,
        "engine_queue": 31.0,
        "prefill": 260.0,
    }
    stages = tuple(StageValue(s, after.get(s, 0.0) / 1000, ms / 1000) for s, ms, _ in STAGE_MS)
    dec = replace(
        base.decomposition,
        stages=stages,
        total=sum(s.seconds for s in stages),
        baseline_total=base.decomposition.total,
    )
    slos = [
        {
            "metric": "ttft",
            "percentile": 95.0,
            "threshold_ms": 500.0,
            "before_ms": 800.0,
            "after_ms": 370.0,
            "delta_ms": -430.0,
            "before_ci_ms": [781.0, 829.0],
            "after_ci_ms": [361.0, 380.0],
            "delta_ci_ms": [-455.0, -405.0],
            "verdict": "improved",
            "warning": None,
        },
        {
            "metric": "itl",
            "percentile": 95.0,
            "threshold_ms": 50.0,
            "before_ms": 34.2,
            "after_ms": 35.0,
            "delta_ms": 0.8,
            "before_ci_ms": [33.9, 34.6],
            "after_ci_ms": [34.6, 35.3],
            "delta_ci_ms": [-0.1, 1.6],
            "verdict": "no significant change",
            "warning": None,
        },
    ]
    return replace(
        base,
        kind="compare",
        title="compare: before vs after the fixes",
        slos=(replace(base.slos[0], observed=0.37, breached=False), base.slos[1]),
        decomposition=dec,
        findings=(),
        remediations=(),
        sections=sections_from(
            {"compare": {"slos": slos, "changed_stages": ["pending", "prefill"], "seed": 0}}
        ),
    )


def make_nonfinite_report() -> Report:
    """NaN and infinity wherever a float can hide (a broken exporter, a division by zero)."""
    nan, inf = float("nan"), float("inf")
    base = make_report()
    c = base.charts
    charts = replace(
        c,
        cdfs={"ttft": ((nan, 0.1), (0.2, nan), (inf, 0.5), *c.cdfs["ttft"])},
        series={"hpa_replicas": ((T0 + 10, nan), (nan, 3.0), *c.series["hpa_replicas"])},
        percentile_series=(
            PercentilePoint(nan, T0, 1, ((95.0, 0.1),)),
            PercentilePoint(T0, T0 + 5, 1, ((95.0, inf),)),
            *c.percentile_series,
        ),
        events=((nan, "pod_ready", "pod/x", ""), *c.events),
        waterfall=(("prefill", nan, 0.1, "x"), *c.waterfall),
        replicas={**c.replicas, "llm-nan": {"count": nan, "ttft_p95": inf}},
    )
    return replace(base, charts=charts, throughput={"requests_per_s": nan})
