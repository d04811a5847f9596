"""The calibration's replays: each config run once, a round that would leave a worker idle
filled with the spare runs the caller expects to need next - and nothing the calibration
returns depends on the spares or on the number of workers."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.test_simulation import table_bytes
from tailtriage.remediation import calibrate as cal
from tailtriage.remediation.calibrate.replay import Replays
from tailtriage.simulator import parallel
from tailtriage.simulator.config import Arrivals, Dist, Phase, ScenarioConfig, StepTimeConfig
from tailtriage.simulator.simulation import run


def _observed() -> tuple[ScenarioConfig, cal.Calibration]:
    out = Dist("lognormal", median=80, sigma=0.4)
    truth = ScenarioConfig(
        workload=(Phase(duration_s=30, arrivals=Arrivals(rate=14.0), output_tokens=out),),
        step_time=StepTimeConfig(mode="fitted"),
    )
    return truth, cal.calibrate(run(truth, seed=2).capture, truth, seed=0)


def _workers(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    monkeypatch.setenv(parallel.WORKERS_ENV, str(n))
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: {0, 1})


def test_a_spare_fills_an_idle_worker_and_is_found_later(monkeypatch: pytest.MonkeyPatch) -> None:
    _, calibration = _observed()
    a = calibration.config
    b, c = cal._scaled(a, 0.9), cal._scaled(a, 1.1)
    assert b is not None and c is not None
    _workers(monkeypatch, 2)
    two = Replays(calibration.workload, 0)
    assert two.width == 2
    first = two.run([a], [b, c])  # one run asked for: one worker idle, b fills it
    assert two.ran == [repr(a), repr(b)]
    again = two.run([b, a])  # both done: nothing runs
    assert two.ran == [repr(a), repr(b)]
    two.run([c], [a])  # a ran already: no spare to take
    assert two.ran == [repr(a), repr(b), repr(c)]
    _workers(monkeypatch, 1)
    one = Replays(calibration.workload, 0)
    alone = one.run([a], [b, c])
    assert one.ran == [repr(a)]  # one worker: never idle, no spare
    assert [table_bytes(x) for x in (*first, *again)] == [
        table_bytes(x) for x in (*alone, *one.run([b, a]))
    ]


def test_the_calibration_does_not_depend_on_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the scale search forced on, two workers replay spares (the search's next steps)
    and return the calibration one worker returns, config, fit and baseline alike."""
    made: list[Replays] = []

    class Kept(Replays):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(cal, "Replays", Kept)
    monkeypatch.setattr(cal, "SCALE_MIN_SCORE", 0.0)  # every calibration searches its scale
    truth, _ = _observed()
    observed = run(truth, seed=2).capture
    got = {}
    for n in (1, 2):
        _workers(monkeypatch, n)
        made.clear()
        c = cal.calibrate(observed, truth, seed=0)
        assert c.baseline is not None and len(made) == 1
        got[n] = (repr(c.config), repr(c.fit), table_bytes(c.baseline), made[0].ran)
    assert got[1][:3] == got[2][:3]
    assert "scale" in repr(got[1][1])  # the search ran
    assert set(got[1][3]) < set(got[2][3])  # the second worker ran spares besides
