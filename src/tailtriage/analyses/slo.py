"""SLO specs: ``"p95 ttft < 500ms, p99 itl < 50ms"`` -> ``(SloSpec, ...)`` (design 3.4).

Grammar, one spec per comma-separated part::

    p<N> <metric> < <value><unit>      N in (0, 100), metric in ttft|itl|tpot|e2e, unit ms|s

Whitespace is free (``p95 ttft<0.5s`` is fine); ``<=`` is accepted as ``<`` because latency is
continuous.  Anything else is a :class:`ConfigError` that quotes the offending part."""

from __future__ import annotations

import re

from tailtriage.analyses.results import SloSpec
from tailtriage.errors import ConfigError
from tailtriage.model.vocabulary import METRICS

_SPEC = re.compile(
    r"""^\s*p(?P<p>\d+(?:\.\d+)?)\s+(?P<metric>[a-z0-9_]+)\s*<=?\s*
        (?P<value>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)\s*(?P<unit>[a-z]*)\s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_UNITS = {"ms": 1e-3, "s": 1.0}
_EXAMPLE = 'e.g. "p95 ttft < 500ms, p99 itl < 50ms"'


#: a latency SLO above a day is a typo (or infinity): no request is watched that long
MAX_THRESHOLD_S = 86_400.0


def parse_slo(text: str) -> SloSpec:
    """Parse one spec such as ``p95 ttft < 500ms``."""
    m = _SPEC.match(text)
    if m is None:
        raise ConfigError(
            f"bad SLO {text.strip()!r}: expected 'p<N> <metric> < <value><unit>', {_EXAMPLE}"
        )
    metric = m["metric"].lower()
    if metric not in METRICS:
        raise ConfigError(f"bad SLO {text.strip()!r}: metric must be one of {', '.join(METRICS)}")
    unit = m["unit"].lower()
    if unit not in _UNITS:
        raise ConfigError(f"bad SLO {text.strip()!r}: unit must be 'ms' or 's' (got {unit!r})")
    percentile = float(m["p"])
    if not 0.0 < percentile < 100.0:
        raise ConfigError(f"bad SLO {text.strip()!r}: percentile must lie between 0 and 100")
    threshold = float(m["value"]) * _UNITS[unit]
    if not 0.0 < threshold < MAX_THRESHOLD_S:  # also NaN, and 1e400 (read as infinity)
        raise ConfigError(
            f"bad SLO {text.strip()!r}: threshold must be positive and under {MAX_THRESHOLD_S:g} s"
        )
    return SloSpec(metric=metric, percentile=percentile, threshold=threshold)


def parse_slos(text: str) -> tuple[SloSpec, ...]:
    """Parse a comma-separated list of specs; at least one, no duplicates of metric+percentile."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ConfigError(f"empty SLO: {_EXAMPLE}")
    specs = tuple(parse_slo(p) for p in parts)
    seen: set[tuple[str, float]] = set()
    for s in specs:
        key = (s.metric, s.percentile)
        if key in seen:
            raise ConfigError(f"SLO for p{s.percentile:g} {s.metric} given twice")
        seen.add(key)
    return specs
