"""A routing skew read from each pod's request counter becomes the simulator's weighted
routing, from the interval the skew began; fair routing's spread and a changing fleet do not."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S
from tailtriage.remediation.calibrate.routing_skew import fit_routing_skew

SCRAPE_S = 15.0


def _counters(per_interval: dict[str, np.ndarray], restart: str | None = None) -> Capture:
    """``vllm:request_success_total`` of each pod, split over two ``finished_reason`` series
    (2:1), scraped every 15 s; ``restart``: that pod's counters start again from zero half
    way (the container restarted)."""
    rows = []
    for pod, counts in per_interval.items():
        for reason, part in (("stop", 2 / 3), ("length", 1 / 3)):
            total = np.cumsum(np.round(counts * part))
            if pod == restart:
                half = len(total) // 2
                total[half:] -= total[half - 1]
            labels = json.dumps({"pod": pod, "finished_reason": reason, "model_name": "m"})
            rows += [(labels, SCRAPE_S * i, float(v)) for i, v in enumerate(total)]
    series = make_table(
        S.SERIES,
        {"metric": ["vllm:request_success_total"] * len(rows), "labels": [r[0] for r in rows],
         "time": [r[1] for r in rows], "value": [r[2] for r in rows]},
    )  # fmt: skip
    return Capture(series=series)


def _pods(rates: list[tuple[float, float]], skew_at: int, bins: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out = {}
    for k, (before, after) in enumerate(rates):
        lam = np.where(np.arange(bins) < skew_at, before, after)
        out[f"vllm-{k}"] = rng.poisson(lam).astype(float)
    return out


@pytest.mark.parametrize("restart", [None, "vllm-1"])
def test_a_hot_pod_from_the_incident_on_is_weighted_routing(restart: str | None) -> None:
    cap = _counters(_pods([(20, 60), (20, 20), (20, 20)], skew_at=20), restart)
    settings, part = fit_routing_skew(cap, t0=0.0)
    assert settings["gateway.routing"] == "weighted"
    w = settings["gateway.weights"]
    assert 1.6 < w[0] < 2.0 and all(0.45 < x < 0.75 for x in w[1:])  # 60:20:20 = 1.8, 0.6, 0.6
    # the first interval with the skew counted requests from 285 s (its scrape is at 300 s)
    assert abs(settings["gateway.weighted_from_s"] - 285.0) <= SCRAPE_S
    assert part["source"].startswith("vllm:request_success_total")


def test_fair_routing_spread_is_not_a_skew() -> None:
    # random routing: every pod draws from the same rate, the spread is the multinomial's
    settings, part = fit_routing_skew(_counters(_pods([(25, 25)] * 4, skew_at=0)), t0=0.0)
    assert settings == {}
    assert part["busiest_fair_shares"] < 1.2


def test_a_mild_but_significant_unevenness_is_not_modelled() -> None:
    # 1.3 fair shares over thousands of requests: real, but below SKEW_MIN
    settings, _ = fit_routing_skew(_counters(_pods([(40, 52), (40, 34), (40, 34)], 20)), 0.0)
    assert settings == {}


def test_a_pod_that_joined_during_the_capture_stops_the_fit() -> None:
    pods = _pods([(20, 60), (20, 20), (20, 20)], skew_at=20)
    pods["vllm-2"][:15] = 0.0  # not serving for the first 15 intervals
    settings, part = fit_routing_skew(_counters(pods), t0=0.0)
    assert settings == {}
    assert "joined or left" in part["note"]
