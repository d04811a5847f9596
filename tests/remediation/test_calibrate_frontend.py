"""The frontend's worker count comes from the telemetry: a saturated API server queues its
requests, and a replay through the default eight workers would not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tailtriage.model import Capture
from tailtriage.remediation.calibrate import calibrate
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import apply_overrides
from tailtriage.store.input import load_capture

#: the api_server_overhead scene, shortened, on one frontend worker (vLLM's single API-server
#: process): tokenization slows 60x and requests queue for that worker
SHORT = {"api_server.workers": 1, "workload.0.duration_s": 120, "workload.1.duration_s": 180}


@pytest.fixture(scope="module")
def frontend_bundle(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    out = tmp_path_factory.mktemp("frontend")
    write_bundle(simulate(apply_overrides(resolve_scenario("api_server_overhead"), SHORT)), out)
    return load_capture(out)


def _p95_ttft(cap: Capture, start: float) -> float:
    rq = cap.requests
    a = rq["arrival"].to_numpy(zero_copy_only=False).astype(float)
    t = rq["ttft"].to_numpy(zero_copy_only=False).astype(float)
    keep = (a >= start) & np.isfinite(t)
    return float(np.percentile(t[keep], 95))


@pytest.mark.slow
def test_a_saturated_frontend_is_replayed_with_the_workers_it_had(
    frontend_bundle: Capture, tmp_path: Path
) -> None:
    cal = calibrate(frontend_bundle)  # telemetry alone: the base's frontend has eight workers
    part = cal.fit.parts["api_server"]
    assert "frontend worker" in part["chosen"], part
    assert cal.config.api_server.workers <= 2, part
    # the queue the fewer workers make is the incident's: its p95 TTFT replays within 25 %
    start = cal.config.start_unix_s + 150.0
    assert cal.baseline is not None
    observed, replayed = _p95_ttft(frontend_bundle, start), _p95_ttft(cal.baseline, start)
    assert abs(replayed / observed - 1.0) <= 0.25, (observed, replayed, part)
