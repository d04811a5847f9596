"""How well a replay reproduces the capture: the score every calibration choice minimises.

A replay is compared with the capture on two things, weighted equally:

* the whole capture's latency percentiles (``CHECK``: TTFT and end-to-end, the tail first);
* the percentiles the user's SLOs are defined on, over the incident window, when the caller
  names them (a :class:`ReplayTarget`, e.g. the what-if's SLOs: p95 TPOT of the last ten
  minutes).  Without them a step model that reproduces TTFT and end-to-end latency over the
  whole capture could be kept while it misses the SLO's own metric - a TPOT SLO was scored
  on no TPOT at all - and the baseline is then judged off by exactly that.

Each error is a ratio, scored as ``|log(simulated / observed)|`` so that twice too slow and
half as fast weigh the same; a part's score is the mean over its percentiles."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

import numpy as np

from tailtriage.model import Capture

#: percentiles of the whole capture every replay is compared on (the tail first: that is what
#: SLOs are about)
CHECK = (("ttft", 50.0), ("ttft", 90.0), ("ttft", 99.0), ("e2e", 50.0), ("e2e", 99.0))


class ReplayTarget(Protocol):
    """What the caller asks the replay to reproduce besides ``CHECK``: percent error of the
    simulated capture against the observed one per named percentile (empty: nothing to
    compare, e.g. no request in the window)."""

    def errors(self, simulated: Capture) -> Mapping[str, float]: ...


def replay_error(
    observed: Capture, simulated: Capture, target: ReplayTarget | None = None
) -> dict[str, float]:
    """Percent error of the simulated percentiles against the observed ones: ``CHECK`` by
    name (``ttft_p90``), the target's under ``slo:<name>``."""
    out = {}
    for metric, p in CHECK:
        o, s = percentile(observed, metric, p), percentile(simulated, metric, p)
        if o and s and o > 0:
            out[f"{metric}_p{p:g}"] = (s - o) / o * 100.0
    if target is not None:
        out.update({f"slo:{k}": v for k, v in target.errors(simulated).items()})
    return out


def score_of(errors: Mapping[str, float]) -> float:
    """The mean |log ratio| of the capture's percentiles and, as an equal half, of the
    target's (``inf`` when nothing could be compared)."""
    if not errors:
        return math.inf
    halves = [
        [abs(math.log1p(e / 100.0)) for k, e in errors.items() if k.startswith("slo:") == t]
        for t in (False, True)
    ]
    return float(np.mean([np.mean(h) for h in halves if h]))


def score(
    observed: Capture, simulated: Capture, target: ReplayTarget | None = None
) -> tuple[float, dict[str, float]]:
    """(score, errors) of ``simulated`` against ``observed``: lower is better."""
    err = replay_error(observed, simulated, target)
    return score_of(err), err


def bias_of(errors: Mapping[str, float]) -> float:
    """The signed mean log ratio: above 0 the replay is slower than what was observed."""
    if not errors:
        return 0.0
    return float(np.mean([math.log1p(e / 100.0) for e in errors.values()]))


def percentile(capture: Capture, metric: str, p: float) -> float | None:
    """The ``p``-th percentile of a request column over the requests that succeeded."""
    rq = capture.requests
    ok = np.asarray(rq["status"].to_pylist(), dtype=object) == "ok"
    v = rq[metric].to_numpy(zero_copy_only=False).astype(np.float64)[ok]
    v = v[np.isfinite(v)]
    return float(np.percentile(v, p)) if v.size else None
