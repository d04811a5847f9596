"""Keep-alive connections to one endpoint, reused one request at a time."""

from __future__ import annotations

import asyncio
import ssl

from tailtriage.loadgen.http import Connection, Reactor


class ConnectionPool:
    def __init__(
        self,
        host: str,
        port: int,
        loop: asyncio.AbstractEventLoop,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.loop = loop
        self.tls = tls
        self.reactor = Reactor(loop)
        self._idle: list[Connection] = []
        self.opened = 0

    async def acquire(self, timeout: float, fresh: bool = False) -> tuple[Connection, bool]:
        """An idle live connection (unless ``fresh``), else a new one; True when newly opened."""
        while self._idle and not fresh:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, False
        conn = await asyncio.wait_for(
            Connection.open(self.host, self.port, self.loop, self._on_free, self.tls, self.reactor),
            timeout,
        )
        self.opened += 1
        return conn, True

    def take_idle(self) -> Connection | None:
        """An idle live connection, without waiting; None when there is none."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    def release(self, conn: Connection) -> None:
        """Give back a connection taken and not used."""
        self._on_free(conn, True)

    def _on_free(self, conn: Connection, reusable: bool) -> None:
        if reusable and not conn.closed:
            conn.watch_idle()
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
        self.reactor.close()
