"""The clock pair used to convert kernel receive stamps."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tailtriage.loadgen.clock import clock_pair


def _seq(values: list[float]) -> Callable[[], float]:
    it: Iterator[float] = iter(values)
    return lambda: next(it)


def test_clock_pair_reads_again_when_preempted_between_reads() -> None:
    # first bracket: 2 ms between the monotonic reads (the process lost the CPU) -> read again
    mono = _seq([10.0, 10.002, 10.003, 10.00301])
    wall = _seq([1000.001, 1000.003])
    m, w = clock_pair(mono, wall)
    assert w == 1000.003
    assert abs(m - 10.003005) < 1e-9


def test_clock_pair_gives_up_after_three_tries() -> None:
    mono = _seq([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    wall = _seq([100.0, 102.0, 104.0])
    assert clock_pair(mono, wall) == (4.5, 104.0)
