"""Command line: `tailtriage ...` (design section 3.4)."""

from tailtriage.cli._app import app, main

__all__ = ["app", "main"]
