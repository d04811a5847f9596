"""Loopback servers for the load-generator tests, each in its own thread and event loop."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tailtriage.loadgen.server.fast import FastSSEServer
from tailtriage.loadgen.server.sim import SimSettings, serving


@contextmanager
def in_thread(start: Callable[[asyncio.Event, list[int]], Awaitable[None]]) -> Iterator[int]:
    """Run ``start`` in a fresh loop on a thread; yields the port it reports; always stops."""
    box: list[int] = []
    ready = threading.Event()
    holder: dict[str, object] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        holder["loop"], holder["stop"] = loop, stop

        async def run() -> None:
            task = loop.create_task(start(stop, box))
            while not box and not task.done():
                await asyncio.sleep(0.01)
            ready.set()
            await task

        try:
            loop.run_until_complete(run())
        finally:
            ready.set()
            loop.close()

    th = threading.Thread(target=main, daemon=True)
    th.start()
    assert ready.wait(10.0), "test server did not start"
    assert box, "test server failed to start"
    try:
        yield box[0]
    finally:
        loop = holder["loop"]
        stop = holder["stop"]
        assert isinstance(loop, asyncio.AbstractEventLoop) and isinstance(stop, asyncio.Event)
        loop.call_soon_threadsafe(stop.set)
        th.join(10.0)


@contextmanager
def fast_server(
    *,
    ttft: float = 0.05,
    itl: float = 0.01,
    fault: str | None = None,
    send_log: Path | None = None,
    tls: ssl.SSLContext | None = None,
) -> Iterator[int]:
    async def start(stop: asyncio.Event, box: list[int]) -> None:
        srv = FastSSEServer(ttft=ttft, itl=itl, fault=fault, send_log=send_log, ssl=tls)
        await srv.start()
        box.append(srv.port)
        await stop.wait()
        await srv.stop()

    with in_thread(start) as port:
        yield port


@contextmanager
def sim_server(settings: SimSettings) -> Iterator[int]:
    async def start(stop: asyncio.Event, box: list[int]) -> None:
        async with serving(settings) as port:
            box.append(port)
            await stop.wait()

    with in_thread(start) as port:
        yield port


@contextmanager
def serve_sim_process(*args: str, wait_s: float = 20.0) -> Iterator[int]:
    """``tailtriage serve-sim`` in its own process (as users run it); yields its port and
    always stops it by its own PID."""
    import subprocess
    import sys
    import tempfile
    import time

    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tailtriage", "serve-sim", "--port", "0",
             "--port-file", str(port_file), *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + wait_s
            while not (port_file.exists() and port_file.read_text().strip()):
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"serve-sim did not start: {err[-500:]}")
                time.sleep(0.05)
            yield int(port_file.read_text())
        finally:
            proc.terminate()
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5.0)
