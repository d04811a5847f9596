"""A run stopped once the requests that arrived by a time have finished
(``output.stop_after_arrivals_s``) gives those requests exactly the rows the whole run gives
them, and ends sooner; a run nobody scrapes (no series, no autoscaler) skips its scrapes and
gives the same requests and stages."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from simulator.test_simulation import check_invariants, small_config
from tailtriage.model import Capture
from tailtriage.simulator import simulate
from tailtriage.simulator.config import from_dict

#: seconds after the start: inside the incident phase of ``small_config`` (20 s + 20 s)
UNTIL = 27.0


def _rows(cap: Capture, start: float, until: float) -> tuple[pa.Table, pa.Table]:
    """Requests (and their stages) that arrived by ``until`` seconds after ``start``."""
    req = cap.requests
    keep = pc.less_equal(req["arrival"], start + until)
    ids = req.filter(keep)["request_id"]
    st = cap.stages
    return req.filter(keep), st.filter(pc.is_in(st["request_id"], value_set=ids))


@pytest.mark.parametrize(
    "over",
    [
        {},  # autoscaler on, scraped series on
        {"hpa": {"enabled": False}, "gateway": {"routing": "random"}},
        {"engine": {"num_gpu_blocks": 300}},  # KV pressure: preemptions
    ],
)
def test_stopped_run_gives_the_watched_requests_the_same_rows(over: dict[str, Any]) -> None:
    cfg: dict[str, Any] = small_config(seed=4, **over)
    whole = simulate(from_dict(cfg))
    cfg["output"] = {**cfg["output"], "stop_after_arrivals_s": UNTIL}
    config = from_dict(cfg)
    stopped = simulate(config)
    check_invariants(stopped)
    start = config.start_unix_s
    for a, b in zip(_rows(stopped, start, UNTIL), _rows(whole, start, UNTIL), strict=True):
        assert a.num_rows > 0
        assert a.equals(b)
    # it did stop early: requests that arrived later are left unfinished (timeouts)
    late = np.asarray(stopped.requests["status"].to_pylist()) == "timeout"
    assert late.any()
    assert not (np.asarray(whole.requests["status"].to_pylist()) == "timeout").any()


def test_unscraped_run_skips_its_scrapes_and_gives_the_same_requests() -> None:
    cfg: dict[str, Any] = small_config(seed=5, hpa={"enabled": False})
    scraped = simulate(from_dict(cfg))
    cfg["output"] = {**cfg["output"], "metrics": False}
    quiet = simulate(from_dict(cfg))
    assert scraped.series.num_rows > 0 and quiet.series.num_rows == 0
    assert quiet.requests.equals(scraped.requests)
    assert quiet.stages.equals(scraped.stages)
