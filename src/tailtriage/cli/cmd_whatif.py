"""`tailtriage whatif` (see design 3.4)."""

from tailtriage.cli._app import app  # noqa: F401
