"""Facts measured from hand-built captures."""

from __future__ import annotations

from tailtriage.doctor.facts import build_facts
from tailtriage.model import Capture
from tailtriage.model import schema as S

LABELS = '{"engine":"0","model_name":"m"}'


def _series(step: float, scrape: float, n: int) -> Capture:
    """A vLLM request counter read every ``step`` s from a Prometheus scraping every ``scrape``
    s: the value only changes at scrapes (one request more each time)."""
    times = [1000.0 + i * step for i in range(n)]
    values = [float(int((t - 1000.0) // scrape)) for t in times]
    table = S.make_table(S.SERIES, {
        "metric": ["vllm:e2e_request_latency_seconds_count"] * n, "labels": [LABELS] * n,
        "time": times, "value": values,
    })  # fmt: skip
    return Capture(series=table)


def test_scrape_interval_is_the_spacing_of_changes_not_of_samples() -> None:
    facts = build_facts(_series(step=15.0, scrape=60.0, n=80), (), None)
    assert facts.metrics.scrape_interval_s == 60.0
    assert facts.metrics.scrape_interval_of == "engine counters"


def test_scrape_interval_of_a_direct_scrape() -> None:
    facts = build_facts(_series(step=5.0, scrape=5.0, n=40), (), None)
    assert facts.metrics.scrape_interval_s == 5.0
