"""KV transfer, prefix-cache misses and admission control: found from the stages and the
metrics those deployments export, with remediations marked "not predicted"."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from builders import T0, capture_from_arrays
from prometheus_files import gauge_rows, write_query_range
from tailtriage.model import Capture
from tailtriage.pipeline.triage import triage
from tailtriage.report import Report
from tailtriage.store.input import load_capture

N = 600
SPAN = 600.0  # seconds: baseline [0, 300), incident [300, 600)
BASELINE = (T0, T0 + 300.0)
INCIDENT = (T0 + 300.0, T0 + 600.0)
TIMES = [T0 + 15.0 * i for i in range(41)]


def _capture(grow: str, by: float, seed: int = 3) -> Capture:
    """Requests whose ``grow`` stage takes ``by`` seconds more in the incident."""
    rng = np.random.default_rng(seed)
    arrival = T0 + np.sort(rng.uniform(0, SPAN, N))
    late = arrival >= INCIDENT[0]
    stages = {
        "ingress": rng.uniform(0.005, 0.01, N),
        "api_server": rng.uniform(0.005, 0.01, N),
        "engine_queue": rng.uniform(0.01, 0.03, N),
        "prefill": rng.uniform(0.05, 0.1, N),
        "kv_transfer": rng.uniform(0.01, 0.02, N),
        "decode": rng.uniform(1.0, 2.0, N),
    }
    stages[grow] = stages[grow] + np.where(late, by * rng.uniform(0.8, 1.2, N), 0.0)
    return capture_from_arrays(arrival, stages, output_tokens=np.full(N, 100))


def _with_metrics(cap: Capture, folder: Path, rows: list[dict[str, object]]) -> Capture:
    folder.mkdir(parents=True, exist_ok=True)
    metrics = load_capture(write_query_range(folder / "m.json", rows))
    return cap.replace(series=metrics.series)


def _step(before: float, after: float) -> list[float]:
    return [before if t < INCIDENT[0] else after for t in TIMES]


def _triage(cap: Capture) -> Report:
    return triage(cap, "p95 ttft < 500ms", incident=INCIDENT, baseline=BASELINE, whatif=False)


def _counter(before_rate: float, after_rate: float) -> list[float]:
    out, v = [], 0.0
    for t in TIMES:
        v += 15.0 * (before_rate if t < INCIDENT[0] else after_rate)
        out.append(v)
    return out


def test_a_slow_failing_kv_transfer_is_kv_transfer(tmp_path: Path) -> None:
    lab = {"model_name": "m", "pod": "decode-0"}
    rows = [
        *gauge_rows("sglang:kv_transfer_latency_ms", lab, TIMES, _step(15.0, 420.0)),
        *gauge_rows("sglang:num_transfer_failed_reqs_total", lab, TIMES, _step(0.0, 7.0)),
    ]
    rep = _triage(_with_metrics(_capture("kv_transfer", 0.45), tmp_path, rows))
    assert rep.findings[0].category == "kv_transfer"
    assert rep.findings[0].stage == "kv_transfer"
    signals = {e.signal for e in rep.findings[0].evidence}
    assert {"sglang:kv_transfer_latency_ms", "sglang:num_transfer_failed_reqs_total"} <= signals
    fixes = [r for r in rep.remediations if "kv_transfer" in r.addresses]
    assert fixes and all(not r.predicted for r in fixes)
    assert all(any(c.startswith("Not predicted:") for c in r.caveats) for r in fixes)


def test_deferred_waiting_is_admission_control_not_capacity(tmp_path: Path) -> None:
    lab = {"engine": "0", "model_name": "m", "pod": "vllm-0"}
    rows = [
        *gauge_rows("vllm:num_requests_waiting_by_reason", {**lab, "reason": "deferred"}, TIMES,
                    _step(0.0, 30.0)),
        *gauge_rows("vllm:num_requests_waiting_by_reason", {**lab, "reason": "capacity"}, TIMES,
                    _step(1.0, 4.0)),
    ]  # fmt: skip
    rep = _triage(_with_metrics(_capture("engine_queue", 0.6), tmp_path, rows))
    cats = [f.category for f in rep.findings]
    assert "admission_control" in cats[:2], cats
    adm = next(f for f in rep.findings if f.category == "admission_control")
    assert any("deferred" in e.signal for e in adm.evidence)


def _by_source(hit_before: float, hit_after: float, lab: dict[str, str]) -> list[dict[str, object]]:
    name = "vllm:prompt_tokens_by_source_total"
    return [
        *gauge_rows(name, {**lab, "source": "local_cache_hit"}, TIMES,
                    _counter(1000 * hit_before, 1000 * hit_after)),
        *gauge_rows(name, {**lab, "source": "local_compute"}, TIMES,
                    _counter(1000 * (1 - hit_before), 1000 * (1 - hit_after))),
    ]  # fmt: skip


def test_prefix_cache_misses_say_routing_when_the_picker_index_still_hits(
    tmp_path: Path,
) -> None:
    lab = {"engine": "0", "model_name": "m", "pod": "vllm-0"}
    rows = [
        *_by_source(0.7, 0.1, lab),
        *gauge_rows("llm_d_epp_kv_cache_index_lookup_hits_total", {"pod": "epp-0"}, TIMES,
                    _counter(5.0, 5.0)),
    ]  # fmt: skip
    rep = _triage(_with_metrics(_capture("prefill", 0.6), tmp_path / "a", rows))
    miss = next(f for f in rep.findings if f.category == "prefix_cache_miss")
    assert "routing: the endpoint picker" in miss.summary
    assert rep.findings.index(miss) < 2
    # the same drop without router metrics cannot be pinned on routing
    plain = _triage(
        _with_metrics(_capture("prefill", 0.6), tmp_path / "b", _by_source(0.7, 0.1, lab))
    )
    miss = next(f for f in plain.findings if f.category == "prefix_cache_miss")
    assert "workload or routing" in miss.summary


def test_a_steady_hit_share_is_no_prefix_cache_miss(tmp_path: Path) -> None:
    lab = {"engine": "0", "model_name": "m", "pod": "vllm-0"}
    rep = _triage(_with_metrics(_capture("prefill", 0.6), tmp_path, _by_source(0.7, 0.65, lab)))
    assert "prefix_cache_miss" not in [f.category for f in rep.findings]
