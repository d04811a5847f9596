"""Simulations run in forked workers give the captures they give here, byte for byte, in the
order asked - whatever the number of workers, and when the pool cannot start."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from simulator.test_simulation import small_config, table_bytes
from tailtriage.simulator import parallel
from tailtriage.simulator.config import ScenarioConfig, apply_overrides, from_dict

SEED = 5


def configs() -> list[ScenarioConfig]:
    """Three different stacks and a repeat of the first (run once, returned twice)."""
    base = from_dict(small_config(name="par", seed=2))
    return [
        base,
        apply_overrides(base, {"pods.initial_replicas": 2}),
        apply_overrides(base, {"engine.max_num_batched_tokens": 512}),
        base,
    ]


def here(cfgs: list[ScenarioConfig]) -> list[bytes]:
    return [table_bytes(parallel.run_one(c, SEED)) for c in cfgs]


class CountingPool(ProcessPoolExecutor):
    """A real process pool that counts what is submitted to it."""

    submitted = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        CountingPool.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_workers_give_the_captures_of_runs_made_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", CountingPool)
    CountingPool.submitted = 0
    cfgs = configs()
    got = [table_bytes(c) for c in parallel.run_many(cfgs, SEED)]
    assert CountingPool.submitted == 3  # the repeat ran once, in a worker
    want = here(cfgs)
    assert got == want
    assert got[0] == got[3] and got[0] != got[1] != got[2]


def test_one_worker_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", CountingPool)
    CountingPool.submitted = 0
    cfgs = configs()[:2]
    assert parallel.workers() == 1
    assert [table_bytes(c) for c in parallel.run_many(cfgs, SEED)] == here(cfgs)
    assert CountingPool.submitted == 0


def test_a_pool_that_cannot_start_runs_them_here(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoPool:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise OSError("no processes left")

    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", NoPool)
    cfgs = configs()[:2]
    assert [table_bytes(c) for c in parallel.run_many(cfgs, SEED)] == here(cfgs)


def test_workers_follow_the_idle_cores_and_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(parallel.WORKERS_ENV, raising=False)
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: set(range(16)))
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (1.0, 1.0, 1.0))  # this process
    assert parallel.workers() == parallel.MAX_WORKERS
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert parallel.workers() == 2  # the second core is idle
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    assert parallel.workers() == 1  # both are busy: forking would only cost
    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    assert parallel.workers() == 2  # as the user says, whatever the load
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: {0})
    assert parallel.workers() == 1  # but never more than the cores
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: set(range(16)))
    monkeypatch.setenv(parallel.WORKERS_ENV, "4")
    assert parallel.workers() == 4
    monkeypatch.setenv(parallel.WORKERS_ENV, "many")  # not a number: as if unset
    assert parallel.workers() == parallel.MAX_WORKERS  # 13 of the 16 cores idle


def test_shared_workers_keep_one_pool_for_every_round(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[CountingPool] = []

    class OnePool(CountingPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setenv(parallel.WORKERS_ENV, "2")
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", OnePool)
    CountingPool.submitted = 0
    cfgs = configs()
    with parallel.shared_workers():
        first = [table_bytes(c) for c in parallel.run_many(cfgs[:2], SEED)]
        second = [table_bytes(c) for c in parallel.run_many(cfgs[2:], SEED)]
        with parallel.shared_workers():  # an inner block keeps the outer pool
            third = [table_bytes(c) for c in parallel.run_many(cfgs[1:3], SEED)]
    assert len(made) == 1 and CountingPool.submitted == 6
    assert first + second == here(cfgs)
    assert third == first[1:] + second[:1]
