"""The one time grammar: instants and durations, for options and for data files alike.

* an **instant** is unix seconds (``1717236000.5``) or RFC 3339 with a zone
  (``2024-06-01T10:00:00Z``, ``2024-06-01T12:00:00.25+02:00``; fractions of any length);
* a **duration** is what kubectl, Go and Prometheus write: one or more ``<number><unit>``
  with units ``ns us µs ms s m h d w`` (``30s``, ``5m``, ``1h30m``, ``1.5h``, ``850ms``);
* a **time** option (``--since``, ``--until``, ``--incident A..B``) is an instant or a
  duration ago (``--since 30m`` = thirty minutes before now).

``parse_instant`` and ``parse_duration`` raise ``ValueError`` (file readers count and skip a
bad field); ``parse_time`` raises the one-line ``ConfigError`` that names the option and value.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Final

from tailtriage.errors import ConfigError

_NUMBER: Final = r"(?:\d+(?:\.\d*)?|\.\d+)"
_UNIT_S: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # micro sign, as Go prints it
    "μs": 1e-6,  # Greek mu, as some exporters write it
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,  # Prometheus: a day is 24 h
    "w": 604800.0,  # Prometheus: a week is 7 d
}
# longest units first so that "ms" is never read as "m" + "s"
_PART: Final = re.compile(rf"({_NUMBER})({'|'.join(sorted(_UNIT_S, key=len, reverse=True))})")
_SHAPE: Final = re.compile(rf"^(?:{_PART.pattern})+$")
_UNIX: Final = re.compile(rf"^[+-]?{_NUMBER}(?:[eE][+-]?\d+)?$")
_FRACTION: Final = re.compile(r"^(.*[T t]\d\d:\d\d:\d\d)(\.\d+)(.*)$")
_MICRO_DIGITS: Final = 6  # what datetime holds

#: what a bad time option is told it should have been
EXPECTED: Final = "unix seconds, RFC 3339 with a zone (2024-06-01T10:00:00Z) or a duration (30m)"


def parse_duration(text: str) -> float:
    """Seconds of a duration such as ``30s``, ``1h30m`` or ``850ms`` (ValueError otherwise)."""
    s = text.strip()
    if not _SHAPE.match(s):
        raise ValueError(f"{text!r} is not a duration like 30s, 5m, 1h30m or 850ms")
    return sum(float(n) * _UNIT_S[u] for n, u in _PART.findall(s))


def parse_instant(text: str) -> float:
    """Unix seconds of ``1717236000.5`` or an RFC 3339 time with a zone (ValueError otherwise).

    Fraction digits beyond microseconds are kept (``datetime`` alone would drop them)."""
    s = text.strip()
    if _UNIX.match(s):
        seconds = float(s)
        if not math.isfinite(seconds):
            raise ValueError(f"{text!r} is not a finite number of unix seconds")
        return seconds
    # datetime reads up to microseconds; further digits are added on (not dropped)
    m = _FRACTION.match(s)
    whole, beyond = s, 0.0
    if m is not None and len(m.group(2)) > _MICRO_DIGITS + 1:
        whole = m.group(1) + m.group(2)[: _MICRO_DIGITS + 1] + m.group(3)
        beyond = float("0." + "0" * _MICRO_DIGITS + m.group(2)[_MICRO_DIGITS + 1 :])
    if whole[-1:] in ("Z", "z"):
        whole = whole[:-1] + "+00:00"
    try:
        stamp = datetime.fromisoformat(whole)
    except ValueError:
        raise ValueError(f"{text!r} is not a time: expected {EXPECTED}") from None
    if stamp.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone; add Z or an offset like +02:00")
    return stamp.timestamp() + beyond


def parse_time(
    text: str | float, option: str = "time", now: Callable[[], float] = time.time
) -> float:
    """Unix seconds of a time option: an instant, or a duration before ``now()``.

    A bad value is a ConfigError of one line naming ``option`` and the value."""
    if isinstance(text, int | float):
        return float(text)
    s = text.strip()
    if _SHAPE.match(s):
        return now() - parse_duration(s)
    try:
        return parse_instant(s)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}") from None
