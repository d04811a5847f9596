"""The recommended fix on every built-in scenario, predicted without ``--base``, against the
simulator's own run of the scenario with that fix (the ground truth).

Each scenario is simulated, written as a real-format incident bundle, read back and triaged
with only the bundle and an SLO (1.5x the healthy phase, as tests/pipeline/test_scenarios.py
pages).  The calibration infers the deployment from the telemetry (remediation/calibrate/
infer.py).  The top-ranked remediation is then applied to the scenario itself and simulated
with the scenario's seed; its p95 over the report's incident window is what the prediction
(anchored: observed x replay_after / replay_before, all over that window) must meet:

* a confident prediction (model error within ``MODEL_TOLERANCE_PCT``) is within
  ``PREDICTION_ERROR`` of the truth - the figure docs/simulator-validation.md states;
* a prediction from a model that misses the observation says so (``low_confidence``, with a
  caveat) and is never ranked above a confident one;
* the top fix is never predicted worse than observed.

The phases are shortened (``SHORT``) to keep the run affordable on two cores; the full-length
figures are in docs/simulator-validation.md section 6."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.test_scenarios import slos_for
from tailtriage.analyses.slo import parse_slos
from tailtriage.pipeline.triage import triage
from tailtriage.remediation import overrides_of, slo_key
from tailtriage.remediation.whatif import MODEL_TOLERANCE_PCT, slo_values
from tailtriage.simulator import builtin_scenarios, resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import ScenarioConfig, apply_overrides
from tailtriage.store.input import load_capture

#: a confident prediction of the recommended fix's p95 is within this of the simulated truth
PREDICTION_ERROR = 0.35
#: scenarios whose calibration cannot be confident, and why (docs/simulator-validation.md):
#: the replay input carries no prefix/tenant column, and HPA targets of engine gauges and
#: scale-up timing are not inferred from telemetry (rolling updates are: calibrate/rollout.py)
KNOWN_LOW_CONFIDENCE = frozenset(
    {"load_imbalance", "cold_start", "kv_cache_pressure", "scaling_lag"}
)
SCENARIOS = sorted(n for n in builtin_scenarios() if resolve_scenario(n).root_cause)


def shortened(cfg: ScenarioConfig) -> ScenarioConfig:
    """At most 240 s per phase (the incident must still build up)."""
    sets = {
        f"workload.{i}.duration_s": min(p.duration_s, 240.0)
        for i, p in enumerate(cfg.workload)
        if p.duration_s > 240.0
    }
    return apply_overrides(cfg, sets) if sets else cfg


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_recommended_fix_meets_the_simulated_truth(name: str, tmp_path: Path) -> None:
    cfg = shortened(resolve_scenario(name))
    write_bundle(simulate(cfg), tmp_path)
    bundle = load_capture(tmp_path)
    slo = slos_for(bundle, cfg.start_unix_s + cfg.workload[0].duration_s, cfg.root_cause)
    specs = parse_slos(slo)
    report = triage(bundle, specs)
    assert report.remediations, f"{name}: no remediation for {slo}"
    rems = report.remediations
    key = slo_key(specs[0])
    # confident predictions first; a low-confidence one never outranks them
    bases = [r.prediction_basis for r in rems if r.predicted]
    assert bases == sorted(bases, key=lambda b: b == "low_confidence"), bases
    top = rems[0]
    assert top.predicted and key in top.predicted, top
    assert key in top.model_error_pct
    error = top.model_error_pct[key]
    if abs(error) > MODEL_TOLERANCE_PCT:
        assert top.prediction_basis == "low_confidence"
        assert any("Low confidence" in c for c in top.caveats)
        assert name in KNOWN_LOW_CONFIDENCE, f"{name}: model error {error:+.0f}%"
        return
    assert top.prediction_basis == "anchored"
    assert report.windows is not None
    window = report.windows.incident
    observed = slo_values(bundle, specs, token_times=False, window=window)[0][0]
    assert observed is not None
    if top.recommended:
        assert top.predicted[key] <= max(observed, specs[0].threshold)
    truth_capture = simulate(apply_overrides(cfg, overrides_of(top)))
    truth = slo_values(truth_capture, specs, token_times=False, window=window)[0][0]
    assert truth is not None
    assert top.predicted[key] == pytest.approx(truth, rel=PREDICTION_ERROR), (
        f"{name}: {top.action} {overrides_of(top)} predicted {top.predicted[key] * 1000:.0f} ms, "
        f"simulated {truth * 1000:.0f} ms (observed {observed * 1000:.0f} ms, model error "
        f"{error:+.0f}%)"
    )
