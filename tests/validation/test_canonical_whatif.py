"""The worked example end to end through real formats: simulate it, write the incident bundle,
read it back with the sources, calibrate on what was read, and ask the what-if about the two
fixes; the simulator re-run with each fix is the ground truth the predictions must meet.

The peak phase is shortened (300 s instead of 900 s) to keep the test affordable on two cores;
docs/simulator-validation.md has the full-length figures (tests/validation/make_tables.py)."""

from __future__ import annotations

import pytest
from sim_validation import FIXES, canonical_example

from tailtriage.simulator.catalog import resolve_scenario
from tailtriage.simulator.config import apply_overrides


@pytest.mark.slow
def test_what_if_on_the_bundle_meets_the_simulators_truth() -> None:
    cfg = apply_overrides(resolve_scenario("canonical-example"), {"workload.2.duration_s": 300})
    _, observed, replay, results = canonical_example(cfg, cfg.seed)
    try:
        assert observed.metadata.skipped_files == ()
        base = replay.predict({}).slos[0]
        assert abs(base.model_error_pct or 0.0) < 15.0
        for r in results:
            s = r.prediction.slos[0]
            assert r.truth_s is not None and s.predicted is not None
            assert s.predicted == pytest.approx(r.truth_s, rel=0.2), r.name
            # the direction of the token-budget change comes out of the calibrated model
            if "engine.max_num_batched_tokens" in r.overrides:
                assert s.predicted < (s.baseline or 0.0)
                assert r.prediction.throughput_change_pct < 0.0  # the slight throughput cost
        assert set(FIXES) == {r.name for r in results}
    finally:
        replay.close()
