"""Clocks of the load generator.

Every measurement is taken on the monotonic clock (it never jumps).  Arrival times of response
bytes come from the kernel when it can stamp them (``SO_TIMESTAMPNS``): the time the packet
reached the socket, before the event loop got round to reading it, so a busy client loop does
not inflate TTFT or ITL.  Times are turned into unix seconds only when a record is written,
with one anchor taken at the start of the run."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Linux ``SO_TIMESTAMPNS`` / ``SCM_TIMESTAMPNS`` (Python's socket module has no constant).
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")
#: ancillary buffer large enough for one timespec control message
ANC_BUFSIZE = socket.CMSG_SPACE(_TIMESPEC.size)
#: how much later than the clock pair a packet may be stamped: a round of reads that shares
#: one pair lasts milliseconds; a stamp further ahead is a wall-clock step, and is not used
_LATE_S = 1.0


@dataclass(frozen=True)
class ClockAnchor:
    """One simultaneous reading of the monotonic and the wall clock: ``unix = mono + offset``."""

    offset: float

    @classmethod
    def now(
        cls,
        mono: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> ClockAnchor:
        # bracket the wall-clock read by two monotonic reads to halve the error
        a = mono()
        w = wall()
        b = mono()
        return cls(offset=w - (a + b) / 2.0)

    def to_unix(self, mono_t: float) -> float:
        return mono_t + self.offset


def clock_pair(
    mono: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time
) -> tuple[float, float]:
    """A monotonic and a wall-clock reading taken together.  A process preempted between two
    reads would turn the wait into an error of the converted stamp, so the wall read is
    bracketed by two monotonic ones and taken again (up to twice) when they are over 50 µs
    apart."""
    for _ in range(3):
        a = mono()
        w = wall()
        b = mono()
        if b - a < 5e-5:
            break
    return (a + b) / 2.0, w


def enable_kernel_timestamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp received packets; False where the platform cannot."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def kernel_arrival(
    ancdata: list[tuple[int, int, bytes]], mono_now: float, wall_now: float
) -> float:
    """Monotonic time at which the bytes of a ``recvmsg`` reached the socket.

    The kernel stamp is wall-clock; only its age (``wall_now - stamp``) is used, so a wall
    clock step between reads cannot move the result by more than that age.  The clock pair
    may be read shortly before the ``recvmsg`` (once per round of reads), so a stamp up to
    ``_LATE_S`` after it is accepted.  Without a stamp, the read time itself is the arrival
    time (``mono_now``, or now when the pair is older)."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            age = wall_now - (float(sec) + float(nsec) * 1e-9)
            if -_LATE_S < age < 60.0:
                return mono_now - age
    return max(mono_now, time.monotonic())
