"""Several independent simulations at once, in forked worker processes.

The what-if replays one calibrated stack many times (a few step-time candidates, a scale
search, one run per candidate fix); each run is pure Python and holds the GIL, so they only
overlap in processes.  A run depends on nothing but its config and seed, so a capture from a
worker is the capture the same call would have made here: the results do not depend on how
many workers there are, or whether there are any (``workers()`` is 1 where ``fork`` is not
available, on a machine whose cores are busy, or with ``TAILTRIAGE_WORKERS=1``).

Workers are forked, not spawned: a fresh interpreter spends seconds importing what a forked
one already has.  A worker returns its capture pickled; the configs go to it the same way.
Forking a process that holds a large capture costs a few tenths of a second of wall time
(page tables, then the exit of a large address space), so a caller with several rounds of
runs keeps one pool for all of them: ``with shared_workers(): ...`` (the triage's what-if).
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from tailtriage.model import Capture
from tailtriage.simulator.config import ScenarioConfig

#: worker processes at most: the triage's replays come a handful at a time, and the machine
#: it is sized for has 2 cores (issue 14); more would only share them
MAX_WORKERS: Final = 2
#: environment variable that sets the workers (1: every run in this process)
WORKERS_ENV: Final = "TAILTRIAGE_WORKERS"
#: a core counts as idle when the load average leaves at least half of it free (a worker
#: there still runs at least half as fast as here)
IDLE_SLACK: Final = 0.5

#: the pool of the innermost ``shared_workers`` block, if any
_shared: ContextVar[ProcessPoolExecutor | None] = ContextVar("tailtriage_workers", default=None)


def workers() -> int:
    """How many simulations run at once: ``$TAILTRIAGE_WORKERS`` when set, else one more
    than the cores other work leaves idle (1-minute load average, this process in it; a
    second worker on a busy machine only adds the cost of forking), at most MAX_WORKERS;
    never more than the cores this process may use, and 1 without ``fork``."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        cores = os.cpu_count() or 1
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return max(1, min(cores, int(env)))
    idle = cores - os.getloadavg()[0]
    return max(1, min(cores, MAX_WORKERS, 1 + math.floor(idle + IDLE_SLACK)))


@contextmanager
def shared_workers() -> Iterator[None]:
    """One pool of ``workers()`` processes for every :func:`run_many` inside the block
    (forked at the first run, joined when the block ends); nothing when there is one worker
    or an outer block already keeps a pool."""
    n = workers()
    if n < 2 or _shared.get() is not None:
        yield
        return
    pool = _pool(n)
    token = _shared.set(pool)
    try:
        yield
    finally:
        _shared.reset(token)
        pool.shutdown(wait=True, cancel_futures=True)


def _pool(n: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("fork"))


def run_one(config: ScenarioConfig, seed: int) -> Capture:
    """The capture of ``config`` run with ``seed``."""
    from tailtriage.simulator.simulation import run

    capture = run(config, seed=seed).capture
    if not isinstance(capture, Capture):  # pragma: no cover - a broken simulator
        raise TypeError("the simulator returned no capture")
    return capture


def run_many(configs: Sequence[ScenarioConfig], seed: int) -> list[Capture]:
    """The capture of every config (same order), run ``workers()`` at a time.  Equal configs
    run once.  A config whose run raises raises here, as running them one by one would."""
    keys = [repr(c) for c in configs]
    unique = list(dict.fromkeys(keys))
    first = {k: configs[keys.index(k)] for k in unique}
    n = min(workers(), len(unique))
    done: dict[str, Capture] = {}
    if n > 1:
        try:
            shared = _shared.get()
            if shared is not None:
                done = _submit(shared, first, seed)
            else:
                with _pool(n) as pool:
                    done = _submit(pool, first, seed)
        except (BrokenProcessPool, OSError):
            done = {}  # a worker died (out of memory, killed): run them here instead
    for k in unique:
        if k not in done:
            done[k] = run_one(first[k], seed)
    return [done[k] for k in keys]


def _submit(
    pool: ProcessPoolExecutor, configs: dict[str, ScenarioConfig], seed: int
) -> dict[str, Capture]:
    futures = {k: pool.submit(run_one, c, seed) for k, c in configs.items()}
    return {k: f.result() for k, f in futures.items()}
