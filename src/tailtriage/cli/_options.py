"""Option types and parsers the commands share: ``--slo``, ``--incident``, ``--baseline``,
``--json`` (design 3.4), and for the long-running commands (``receive``, ``watch``) a
``HOST:PORT`` listen address and ``--duration`` with the stop event it sets.

Commands declare ``slo: SloOption`` and call :func:`slos_from` / :func:`window_from` on the
strings; bad values raise :class:`ConfigError`, which ``main()`` turns into one line and exit
code 2::

    @app.command()
    def analyze(path: PathArgument, slo: SloOption, incident: IncidentOption = None) -> None:
        specs = slos_from(slo)
        window = window_from(incident, "--incident")
"""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path
from typing import Annotated

import typer

from tailtriage.analyses.results import SloSpec
from tailtriage.analyses.slo import parse_slos
from tailtriage.errors import ConfigError
from tailtriage.model.timeparse import parse_time

PathArgument = Annotated[
    Path,
    typer.Argument(help="Bundle folder, single file or saved capture (.duckdb)."),
]
SloOption = Annotated[
    str,
    typer.Option(
        "--slo",
        help='SLOs, e.g. "p95 ttft < 500ms, p99 itl < 50ms" (metrics ttft, itl, tpot, e2e; '
        "units ms, s).",
    ),
]
IncidentOption = Annotated[
    str | None,
    typer.Option(
        "--incident",
        help="Incident window START..END (unix seconds or RFC 3339); detected when omitted.",
    ),
]
BaselineOption = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="Healthy baseline window START..END (unix seconds or RFC 3339); detected when "
        "omitted.",
    ),
]
JsonOption = Annotated[
    Path | None,
    typer.Option("--json", help="Write the JSON report (schema_version 1) to this file."),
]

KeepContentOption = Annotated[
    bool,
    typer.Option(
        "--keep-content",
        help="Keep prompts, completions and SQL statements found in span attributes (dropped "
        "by default; secrets are redacted either way).",
    ),
]

TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help="Seconds to wait for a backend (Prometheus, ClickHouse) to connect and to answer "
        "each request (default 30, or TAILTRIAGE_TIMEOUT).",
    ),
]

DurationOption = Annotated[
    float | None,
    typer.Option("--duration", help="Stop after this many seconds (default: at SIGTERM)."),
]

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def slos_from(text: str) -> tuple[SloSpec, ...]:
    """The SLO specs of ``--slo`` (ConfigError on a bad spec)."""
    return parse_slos(text)


def window_from(text: str | None, option: str = "window") -> tuple[float, float] | None:
    """``START..END`` -> (start, end) in unix seconds; None when not given.  Each end is a
    time as ``model.timeparse`` reads it (unix seconds, RFC 3339, or a duration ago)."""
    if text is None or not text.strip():
        return None
    start, sep, end = text.partition("..")
    if not sep or not start.strip() or not end.strip():
        raise ConfigError(f"{option}: expected START..END, got {text!r}")
    lo, hi = parse_time(start, option), parse_time(end, option)
    if hi <= lo:
        raise ConfigError(f"{option}: END must be after START in {text!r}")
    return (lo, hi)


def parse_listen(text: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:4318`` for IPv6) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"{option}: expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def stop_event(duration: float | None) -> asyncio.Event:
    """An event set by SIGTERM or Ctrl-C, or after ``duration`` seconds (``--duration``);
    call it inside the running event loop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if duration is not None:
        loop.call_later(max(0.0, duration), stop.set)
    return stop
