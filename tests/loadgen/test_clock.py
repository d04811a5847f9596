"""The clock pair used to convert kernel receive stamps."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator

from tailtriage.loadgen.clock import SO_TIMESTAMPNS, clock_pair, kernel_arrival


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


def _stamp(wall: float) -> list[tuple[int, int, bytes]]:
    sec = int(wall)
    nsec = round((wall - sec) * 1e9)
    return [(socket.SOL_SOCKET, SO_TIMESTAMPNS, struct.pack("@qq", sec, nsec))]


def test_a_stamp_after_a_shared_clock_pair_is_still_converted() -> None:
    # one pair serves a whole round of reads: a packet stamped 5 ms after it arrived later
    t = kernel_arrival(_stamp(1000.005), 10.0, 1000.0)
    assert abs(t - 10.005) < 1e-6
    t = kernel_arrival(_stamp(999.98), 10.0, 1000.0)  # and one that waited 20 ms
    assert abs(t - 9.98) < 1e-6


def test_a_stamp_far_ahead_of_the_pair_is_a_clock_step_and_not_used() -> None:
    before = time.monotonic()
    t = kernel_arrival(_stamp(1005.0), 10.0, 1000.0)  # 5 s ahead: the wall clock stepped
    assert t >= before  # the read time instead
