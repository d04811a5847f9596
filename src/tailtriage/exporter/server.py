"""Serve the exporter on loopback and feed it, at once or replaying a capture in scaled time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import start_http_server

from tailtriage.errors import ConfigError
from tailtriage.exporter.metrics import StageMetrics
from tailtriage.exporter.observations import ObservationSource

#: loopback only: the exporter carries trace ids, which are not for the whole network
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Served:
    port: int
    shutdown: Callable[[], None]


def serve(metrics: StageMetrics, port: int = 0) -> Served:
    """Start ``/metrics`` on 127.0.0.1 (port 0: any free one); OpenMetrics when the scraper
    asks for it (Prometheus does, for exemplars), else the classic text format."""
    try:
        httpd, thread = start_http_server(port, addr=LOOPBACK, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(f"--port {port}: cannot listen on {LOOPBACK} ({exc})") from None

    def shutdown() -> None:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

    return Served(int(httpd.server_port), shutdown)


def replay(
    metrics: StageMetrics,
    source: ObservationSource,
    *,
    speed: float = 0.0,
    loop: bool = False,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """File ``source``'s observations into ``metrics``; returns how many.

    ``speed`` 0 files them all at once; ``speed`` s > 0 files each when ``(its time - the
    first time) / s`` wall seconds have passed (10: ten times faster than it happened).
    ``loop`` starts over after the last one, until ``stop`` is set."""
    if speed < 0:
        raise ConfigError(f"--speed {speed}: must be >= 0")
    if loop and speed == 0:
        raise ConfigError("--loop needs --speed > 0 (at speed 0 it would refile without pause)")
    stop = stop or threading.Event()
    filed = 0
    while not stop.is_set():
        start, first = clock(), None
        for obs in source.observations():
            if stop.is_set():
                return filed
            first = obs.time if first is None else first
            if speed > 0:
                due = start + (obs.time - first) / speed
                while (wait := due - clock()) > 0:
                    if stop.wait(min(wait, 0.5)):
                        return filed
            metrics.observe(obs)
            filed += 1
        if not loop or first is None:
            return filed
    return filed
