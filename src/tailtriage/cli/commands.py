"""Imports every command module so their ``@app.command()`` decorators register them, in the
order ``tailtriage --help`` lists them: the paged engineer's path first."""

import importlib

import typer

from tailtriage.cli._app import app

#: command modules, in --help order
COMMAND_MODULES = (
    "cmd_demo",
    "cmd_triage",
    "cmd_doctor",
    "cmd_instrument",
    "cmd_analyze",
    "cmd_ingest",
    "cmd_compare",
    "cmd_whatif",
    "cmd_advise",
    "cmd_exporter",
    "cmd_dashboards",
    "cmd_quantgate",
    "cmd_simulate",
    "cmd_render",
    "cmd_bench",
    "cmd_export",
    "cmd_collect",
    "cmd_receive",
    "cmd_watch",
    "cmd_export_workload",
)
for _module in COMMAND_MODULES:
    importlib.import_module(f"tailtriage.cli.{_module}")


@app.command()
def version() -> None:
    """Print the tailtriage version."""
    from tailtriage import __version__

    typer.echo(f"tailtriage {__version__}")
