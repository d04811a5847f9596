"""The one time grammar: instants, durations, and time options (an instant or a duration ago)."""

from __future__ import annotations

import pytest

from tailtriage.errors import ConfigError
from tailtriage.model.timeparse import parse_duration, parse_instant, parse_time

# 2024-06-01T10:00:00Z, written out once as a number so the RFC 3339 forms are checked
# against a value that is not computed by the code under test
T = 1717236000.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("850ms", 0.85),
        ("1m6.512s", 66.512),
        ("1h2m3s", 3723.0),
        ("2d", 172800.0),
        ("1w", 604800.0),
        ("500us", 0.0005),
        ("500µs", 0.0005),
        (" 45s ", 45.0),
    ],
)
def test_durations_as_kubectl_and_prometheus_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "1h30", "h", "30M", "-5m", "5 m", "1h 30m", "5mins"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1717236000", T),
        ("1717236000.5", T + 0.5),
        ("2024-06-01T10:00:00Z", T),
        ("2024-06-01T10:00:00z", T),
        ("2024-06-01T12:00:00+02:00", T),
        ("2024-06-01 10:00:00Z", T),
        ("2024-06-01T10:00:00.25Z", T + 0.25),
    ],
)
def test_instants(text: str, seconds: float) -> None:
    assert parse_instant(text) == seconds


def test_fraction_digits_beyond_microseconds_are_kept() -> None:
    got = parse_instant("2024-06-01T10:00:00.123456789Z")
    assert got - T == pytest.approx(0.123456789, abs=1e-7)
    assert got != parse_instant("2024-06-01T10:00:00.123456Z")


def test_an_instant_without_a_zone_is_ambiguous() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        parse_instant("2024-06-01T10:00:00")


def test_time_option_is_an_instant_or_a_duration_ago() -> None:
    assert parse_time("30m", now=lambda: 10_000.0) == 10_000.0 - 1800.0
    assert parse_time("1h30m", now=lambda: 10_000.0) == 10_000.0 - 5400.0
    assert parse_time("2024-06-01T10:00:00Z", now=lambda: 0.0) == T
    assert parse_time(12.5) == 12.5


@pytest.mark.parametrize("text", ["yesterday", "1h30", "nan", "inf", "2024-06-01T10:00:00", ""])
def test_a_bad_time_option_is_one_line_naming_option_and_value(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_time(text, "--since")
    message = str(info.value)
    assert message.startswith("--since: ")
    assert repr(text) in message
    assert "\n" not in message
