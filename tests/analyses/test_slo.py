"""SLO spec parsing: the design's syntax, and one-line errors for everything else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.slo import parse_slo, parse_slos
from tailtriage.errors import ConfigError


def test_parses_the_design_example() -> None:
    specs = parse_slos("p95 ttft < 500ms, p99 itl < 50ms")
    assert specs == (SloSpec("ttft", 95.0, 0.5), SloSpec("itl", 99.0, 0.05))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p99.9 e2e < 30s", SloSpec("e2e", 99.9, 30.0)),
        ("P50 TPOT<40ms", SloSpec("tpot", 50.0, 0.04)),
        ("p90 ttft <= 1.5 s", SloSpec("ttft", 90.0, 1.5)),
        ("  p95   ttft   <   0.25s  ", SloSpec("ttft", 95.0, 0.25)),
    ],
)
def test_accepts_spacing_case_and_units(text: str, expected: SloSpec) -> None:
    assert parse_slo(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("p95 latency < 500ms", "metric must be one of"),
        ("p95 ttft < 500us", "unit must be"),
        ("p95 ttft < 500", "unit must be"),
        ("p0 ttft < 500ms", "between 0 and 100"),
        ("p100 ttft < 500ms", "between 0 and 100"),
        ("p95 ttft > 500ms", "expected 'p<N>"),
        ("ttft < 500ms", "expected 'p<N>"),
        ("p95 ttft < 0ms", "positive"),
        ("", "empty SLO"),
        ("p95 ttft < 1s, p95 ttft < 2s", "given twice"),
    ],
)
def test_bad_specs_give_one_line_config_errors(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_slos(text)
    msg = str(ei.value)
    assert needle in msg
    assert "\n" not in msg


@given(
    st.sampled_from(["ttft", "itl", "tpot", "e2e"]),
    st.floats(0.1, 99.9).map(lambda p: round(p, 1)),
    st.integers(1, 100_000),
)
def test_str_round_trips(metric: str, p: float, ms: int) -> None:
    spec = SloSpec(metric, p, ms / 1000.0)
    back = parse_slo(str(spec))
    assert back.metric == metric and back.percentile == p
    assert back.threshold == pytest.approx(ms / 1000.0)
