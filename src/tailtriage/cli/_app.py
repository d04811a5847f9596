"""The typer application and the error boundary of the command line."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from tailtriage.errors import TailtriageError

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
        err_console.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
