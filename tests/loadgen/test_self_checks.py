"""The client's self-checks and the warnings they raise."""

from __future__ import annotations

from dataclasses import replace

from tailtriage.loadgen.run import self_checks
from tailtriage.loadgen.runner import WorkerStats

QUIET = WorkerStats(
    worker=0, start_unix=0.0, wall=10.0, cpu=1.0, sent=1000, completed=1000, late_sends=0,
    lateness_p99=0.001, lateness_max=0.002, loop_lag_p99=0.001, loop_lag_max=0.002,
    coalesced_chunks=0, connections_opened=50, cancelled=0, chunks=32000,
)  # fmt: skip


def test_a_healthy_run_has_no_warnings() -> None:
    checks, warnings = self_checks([QUIET, replace(QUIET, worker=1)])
    assert warnings == []
    assert checks["sent"] == 2000 and checks["workers"] == 2
    assert abs(checks["client_cores"] - 0.2) < 1e-9


def test_late_sends_are_coordinated_omission() -> None:
    _, warnings = self_checks([replace(QUIET, late_sends=50, lateness_p99=0.04)])
    assert len(warnings) == 1 and "50 of 1000" in warnings[0] and "40.0 ms late" in warnings[0]


def test_lag_tells_a_busy_client_from_a_busy_machine() -> None:
    (busy,) = self_checks([replace(QUIET, loop_lag_p99=0.03, cpu=8.0)])[1]
    (starved,) = self_checks([replace(QUIET, loop_lag_p99=0.03, cpu=1.0)])[1]
    assert "--workers" in busy and "other processes" in starved


def test_cpu_and_coalescing_warnings() -> None:
    _, w = self_checks([replace(QUIET, cpu=9.5, coalesced_chunks=3200)])
    assert any("0.95 cores" in x for x in w)
    assert any("3200 of 32000 chunks (10.0 %)" in x for x in w)
