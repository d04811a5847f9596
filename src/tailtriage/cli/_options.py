"""Option types and parsers the commands share: ``--slo``, ``--incident``, ``--baseline``,
``--json`` (design 3.4).

Commands declare ``slo: SloOption`` and call :func:`slos_from` / :func:`window_from` on the
strings; bad values raise :class:`ConfigError`, which ``main()`` turns into one line and exit
code 2::

    @app.command()
    def analyze(path: PathArgument, slo: SloOption, incident: IncidentOption = None) -> None:
        specs = slos_from(slo)
        window = window_from(incident, "--incident")
"""

from __future__ import annotations

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
