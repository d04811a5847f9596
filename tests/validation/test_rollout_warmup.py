"""The readiness gate on a warm-up completion, predicted without ``--base`` against the
simulator's own run of the same fix (the ground truth).

The built-in ``rollout`` scenario (shortened as tests/validation/test_scenarios_whatif.py
does), its new pods serving ``FACTOR`` x slower for ``WARM_S`` after Ready: simulated, written
as a real-format bundle, read back and triaged with only the bundle and an SLO.  The rollout
analysis measures the warm-up, the calibration puts it into the replay, and the gate's
prediction (anchored, over the report's incident window) must be within the bound every other
category meets."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.test_scenarios import slos_for
from tailtriage.analyses.slo import parse_slos
from tailtriage.pipeline.triage import triage
from tailtriage.remediation import overrides_of, slo_key
from tailtriage.remediation.whatif import MODEL_TOLERANCE_PCT, slo_values
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import apply_overrides
from tailtriage.store.input import load_capture
from validation.test_scenarios_whatif import PREDICTION_ERROR, shortened

WARM_S = 30.0
FACTOR = 4.0
GATE = "pods.ready_warmup_gated"


@pytest.mark.slow
def test_the_readiness_gate_meets_the_simulated_truth(tmp_path: Path) -> None:
    cfg = apply_overrides(
        shortened(resolve_scenario("rollout")),
        {"pods.ready_warmup_s": WARM_S, "pods.ready_warmup_factor": FACTOR},
    )
    write_bundle(simulate(cfg), tmp_path)
    bundle = load_capture(tmp_path)
    specs = parse_slos(slos_for(bundle, cfg.start_unix_s + cfg.workload[0].duration_s, "rollout"))
    report = triage(bundle, specs)
    gates = [r for r in report.remediations if overrides_of(r).get(GATE)]
    assert len(gates) == 1, [overrides_of(r) for r in report.remediations]
    gate = gates[0]
    key = slo_key(specs[0])
    assert key in gate.predicted, gate
    assert abs(gate.model_error_pct[key]) <= MODEL_TOLERANCE_PCT
    assert gate.prediction_basis == "anchored"
    assert report.windows is not None
    window = report.windows.incident
    truth_capture = simulate(apply_overrides(cfg, overrides_of(gate)))
    truth = slo_values(truth_capture, specs, token_times=False, window=window)[0][0]
    assert truth is not None
    assert gate.predicted[key] == pytest.approx(truth, rel=PREDICTION_ERROR), (
        f"gate predicted {gate.predicted[key] * 1000:.0f} ms, simulated {truth * 1000:.0f} ms"
    )
