"""The typer application and the error boundary of the command line."""

from __future__ import annotations

import os
import sys
import traceback
from typing import NoReturn

import typer
from rich.console import Console
from rich.text import Text

from tailtriage.errors import InputError, TailtriageError

app = typer.Typer(
    name="tailtriage",
    help=(
        "Find why an LLM inference API breaches its latency SLO, prove it from the stack's own "
        "telemetry, and predict what each fix will do.\n\n"
        "Start with `tailtriage demo` (the worked example end to end), then "
        "`tailtriage triage BUNDLE --slo 'p95 ttft < 500ms'` on your own files."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


@app.callback()
def _root() -> None:
    """tailtriage: triage LLM inference latency SLO breaches."""


err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point: run the app; turn TailtriageError into a one-line message and exit code."""
    # Importing registers the commands; done here so importing tailtriage has no side effects.
    import tailtriage.cli.commands  # noqa: F401

    try:
        app()
    except TailtriageError as exc:
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except OSError as exc:  # a file-system error no source translated: still the file's fault
        where = f"{exc.filename}: " if exc.filename else ""
        _fail(f"{where}{exc.strerror or exc}", InputError.exit_code)
    except MemoryError:
        _fail("out of memory (read fewer files at once, or a saved capture)", InputError.exit_code)
    except Exception as exc:
        _fail(
            f"internal error {type(exc).__name__}: {exc} (please report it; run with "
            "TAILTRIAGE_TRACEBACK=1 for details)",
            INTERNAL_EXIT_CODE,
            exc,
        )


#: exit code of an unexpected exception (sysexits.h EX_SOFTWARE), documented in errors.py
INTERNAL_EXIT_CODE = 70


def _fail(message: str, code: int, exc: BaseException | None = None) -> NoReturn:
    """Print ``error: message`` as one line of plain text (never rich markup: a path like
    ``traces[backup].json`` must print as it is) and exit with ``code``."""
    if exc is not None and os.environ.get("TAILTRIAGE_TRACEBACK"):
        traceback.print_exception(exc)
    line = message.replace("\r", " ").replace("\n", " ")  # one line whatever it holds
    err_console.print(Text.assemble(("error:", "bold red"), " ", line))
    sys.exit(code)
