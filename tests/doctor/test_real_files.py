"""doctor on real files from public projects (tests/data/public, see its SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from tailtriage.pipeline.doctor import doctor
from tailtriage.store.input import load_capture


def test_zipkin_skew_sample_names_the_shifted_service(shared_data: Path) -> None:
    result = doctor(load_capture(shared_data / "zipkin" / "skew.json"), "p95 ttft < 500ms")
    gaps = {g.check: g for g in result.gaps}
    # openzipkin's skew fixture: serviceb's clock runs behind its caller's
    assert "serviceb up to 66 ms on 2 spans" in gaps["clock_skew"].what
    # its spans are a plain RPC, not an inference request
    assert "none marks an inference request" in gaps["traces"].what
    assert not result.triage_ready
