"""Every built-in scenario, simulated, written as a real-format bundle, read back and triaged,
is diagnosed with its own root cause first.  Prints the confusion matrix (top-1 and top-2).

The scenario's ``root_cause`` is used for the assertion and to pick which latency the page is
about, as an on-call engineer would: the ITL-tree causes (memory-bound decode, tensor-parallel
overhead, prefill interference) page on p95 TPOT, KV-cache pressure on both, every other cause
on p95 TTFT.  Thresholds are 1.5x the scenario's first (healthy) phase.  The triage itself sees
the bundle and the SLO only."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tailtriage.analyses import quantiles as Q
from tailtriage.model import Capture
from tailtriage.pipeline.triage import triage
from tailtriage.simulator import builtin_scenarios, resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.store.input import load_capture

SCENARIOS = sorted(n for n in builtin_scenarios() if resolve_scenario(n).root_cause)
RESULTS: dict[str, tuple[str, tuple[str, ...], str]] = {}


#: causes that show in the per-token latency (the ITL tree of the diagnosis)
ITL_TREE = frozenset({"decode_memory_bound", "tensor_parallel_overhead", "prefill_interference"})


def slos_for(capture: Capture, healthy_end: float, root_cause: str = "") -> str:
    """p95 TTFT and/or TPOT SLOs at 1.5x the healthy phase's values (floors 50 ms / 5 ms)."""
    r = capture.requests
    arrival = r["arrival"].to_numpy()
    ttft = r["ttft"].to_numpy(zero_copy_only=False).astype(float)
    e2e = r["e2e"].to_numpy(zero_copy_only=False).astype(float)
    out = r["output_tokens"].to_numpy(zero_copy_only=False).astype(float)
    healthy = (arrival < healthy_end) & np.isfinite(ttft) & np.isfinite(e2e) & (out > 1)
    tpot = (e2e - ttft) / np.maximum(out - 1, 1)
    t = max(1.5 * Q.percentile(ttft[healthy], 95), 0.05)
    p = max(1.5 * Q.percentile(tpot[healthy], 95), 0.005)
    ttft_slo, tpot_slo = f"p95 ttft < {t * 1000:.0f}ms", f"p95 tpot < {p * 1000:.1f}ms"
    if root_cause in ITL_TREE:
        return tpot_slo
    if root_cause == "kv_cache_pressure":
        return f"{ttft_slo}, {tpot_slo}"
    return ttft_slo


def _diagnose(name: str, folder: Path) -> tuple[str, tuple[str, ...], str]:
    if name not in RESULTS:
        cfg = resolve_scenario(name)
        write_bundle(simulate(cfg), folder)
        bundle = load_capture(folder)
        slo = slos_for(bundle, cfg.start_unix_s + cfg.workload[0].duration_s, cfg.root_cause)
        report = triage(bundle, slo, whatif=False)
        RESULTS[name] = (cfg.root_cause, tuple(f.category for f in report.findings), slo)
    return RESULTS[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_is_diagnosed_with_its_category_first(name: str, tmp_path: Path) -> None:
    truth, ranked, slo = _diagnose(name, tmp_path)
    assert ranked, f"{name}: no findings for {slo}"
    assert ranked[0] == truth, f"{name} ({slo}): {ranked[:3]}"


@pytest.mark.slow
def test_zz_confusion_matrix(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Runs last (by name): prints the confusion matrix of every scenario (top-1, top-2)."""
    for name in SCENARIOS:
        _diagnose(name, tmp_path_factory.mktemp(name))
    top1 = Counter((t, r[0] if r else "-") for t, r, _ in RESULTS.values())
    hits1 = sum(1 for t, r, _ in RESULTS.values() if r and r[0] == t)
    hits2 = sum(1 for t, r, _ in RESULTS.values() if t in r[:2])
    lines = [f"{'true category':28s} -> top-1 diagnosis (count)"]
    lines += [f"{t:28s} -> {p} ({c})" for (t, p), c in sorted(top1.items())]
    lines.append(f"top-1 {hits1}/{len(RESULTS)}, top-2 {hits2}/{len(RESULTS)}")
    print("\n".join(lines))
    assert hits1 == len(SCENARIOS)
