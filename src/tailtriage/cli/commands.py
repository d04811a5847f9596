"""Imports every command module so their ``@app.command()`` decorators register them."""

from tailtriage.cli import (  # noqa: F401
    cmd_analyze,
    cmd_bench,
    cmd_compare,
    cmd_demo,
    cmd_export,
    cmd_ingest,
    cmd_render,
    cmd_simulate,
    cmd_triage,
    cmd_whatif,
)
