"""The one exception tree of tailtriage.

Every error that tailtriage raises on purpose derives from :class:`TailtriageError`.
Errors from third-party libraries (json, duckdb, aiohttp, clickhouse) are translated into
this tree at the boundary where they happen (``sources/``, ``loadgen/``), so callers need
to catch only these.  The CLI maps each branch to a one-line message and an exit code::

    TailtriageError                      exit 1
    ├── ConfigError                      exit 2   bad SLO spec, scenario, --set, window
    ├── InputError                       exit 3   a file or folder that cannot be read
    │   ├── UnknownFormatError                    content matches no known format
    │   ├── ParseError                            known format, broken content (file + position)
    │   └── OutputError                           an output that cannot be written (disk, rights)
    ├── BackendError                     exit 4   Prometheus / ClickHouse unreachable or refused
    ├── AnalysisError                    exit 5
    │   └── InsufficientDataError                 too few requests for what was asked
    ├── SimulationError                  exit 6
    └── LoadgenError                     exit 7
        ├── EndpointError                         connect / HTTP status failures
        └── StreamProtocolError                   bytes that break HTTP/1.1 or SSE framing

Anything else reaching the CLI (a bug, or a library error not translated yet) is one line
naming the exception and exit 70 (``EX_SOFTWARE``), never a traceback.
"""

from __future__ import annotations


class TailtriageError(Exception):
    """Base of every error tailtriage raises on purpose."""

    exit_code = 1


class ConfigError(TailtriageError):
    """A setting given by the user is invalid (SLO spec, scenario, ``--set``, window)."""

    exit_code = 2


class InputError(TailtriageError):
    """An input file or folder cannot be read.

    :param path: the file concerned, when there is one.
    :param position: where in the file (``line 12``, ``byte 4031``, ``$.resourceSpans[0]``).
    """

    exit_code = 3

    def __init__(self, message: str, path: str | None = None, position: str | None = None):
        self.path = path
        self.position = position
        where = ""
        if path is not None:
            where = f"{path}:{position}: " if position else f"{path}: "
        super().__init__(f"{where}{message}")


class UnknownFormatError(InputError):
    """The content matches none of the registered formats."""


class ParseError(InputError):
    """The format is known but the content is broken."""


class OutputError(InputError):
    """An output file or folder cannot be written (missing rights, disk full, a pipe where a
    regular file is needed).  Exit 3 like the unreadable input: both are the file system's."""


class BackendError(TailtriageError):
    """A live backend (Prometheus, ClickHouse) could not be reached or refused the query."""

    exit_code = 4


class AnalysisError(TailtriageError):
    """An analysis cannot produce a result."""

    exit_code = 5


class InsufficientDataError(AnalysisError):
    """Too few requests for the asked percentile or comparison."""


class SimulationError(TailtriageError):
    """The simulator was given an impossible configuration or failed to converge."""

    exit_code = 6


class LoadgenError(TailtriageError):
    """The load generator could not run."""

    exit_code = 7


class EndpointError(LoadgenError):
    """The endpoint refused the connection or answered with an error status."""


class StreamProtocolError(LoadgenError):
    """The endpoint's bytes break HTTP/1.1 or SSE framing (``loadgen.http`` raises it while
    parsing and records the request as a ``stream_protocol`` failure)."""
