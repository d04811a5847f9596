"""compare(): SLO changes with confidence intervals, stage deltas, too-few-requests guard."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import T0, capture_from_arrays
from tailtriage.analyses.results import SloSpec
from tailtriage.model import Capture
from tailtriage.pipeline.compare import compare, slo_change


def _cap(n: int, pending: float, seed: int) -> Capture:
    rng = np.random.default_rng(seed)
    stages = {
        "ingress": 0.05 * rng.lognormal(0, 0.1, n),
        "pending": pending * rng.lognormal(0, 0.3, n),
        "prefill": 0.3 * rng.lognormal(0, 0.2, n),
        "decode": 1.0 * rng.lognormal(0, 0.2, n),
    }
    return capture_from_arrays(np.sort(rng.uniform(T0, T0 + 600, n)), stages)


def test_a_real_improvement_is_significant_and_names_the_stage() -> None:
    rep = compare(_cap(3000, 0.25, 1), _cap(3000, 0.02, 2), "p95 ttft < 500ms")
    section = rep.sections.compare
    assert section is not None
    row = section.slos[0]
    assert row.verdict == "improved" and row.significant
    assert row.delta_ci is not None and row.delta is not None
    lo, hi = row.delta_ci
    assert lo is not None and hi is not None and lo < row.delta < hi < 0
    assert row.before_breached and not row.after_breached
    assert section.changed_stages[0] == "pending"
    pending = next(s for s in section.stages if s.stage == "pending")
    assert pending.delta < -0.150
    tp = rep.to_dict()["extra"]["compare"]["throughput"]
    assert tp["before"]["requests_per_s"] > 0 and tp["after"]["requests_per_s"] > 0
    assert rep.kind == "compare"


def test_same_stack_twice_is_no_significant_change() -> None:
    rep = compare(_cap(3000, 0.1, 3), _cap(3000, 0.1, 4), "p95 ttft < 500ms")
    row = rep.to_dict()["extra"]["compare"]["slos"][0]
    assert row["verdict"] == "no significant change"
    lo, hi = row["delta_ci_ms"]
    assert lo <= 0 <= hi


def test_too_few_requests_is_said_with_the_minimum_count() -> None:
    rep = compare(_cap(40, 0.25, 5), _cap(40, 0.02, 6), "p95 ttft < 500ms")
    row = rep.to_dict()["extra"]["compare"]["slos"][0]
    assert row["verdict"] == "too few requests" and not row["significant"]
    assert "72" in row["warning"]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(0.001, 10.0), min_size=80, max_size=300), st.sampled_from([50.0, 95.0]))
def test_a_sample_compared_with_itself_never_changes(values: list[float], p: float) -> None:
    x = np.asarray(values)
    c = slo_change(SloSpec("ttft", p, 0.5), x, x.copy(), np.random.default_rng(0))
    assert c.delta == 0.0
    assert c.verdict in ("no significant change", "too few requests")
    if c.diff_ci is not None:
        assert c.diff_ci[0] <= 0.0 <= c.diff_ci[1]
