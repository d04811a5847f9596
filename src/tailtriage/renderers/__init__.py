"""Renderers: a Report in, text out (terminal, JSON, self-contained HTML).

``render(report, "html")`` and ``write_report(report, path)`` are the entry points; renderers
are found by name in a small registry (``register``/``get``/``registered_names``) or by an
import path ``pkg.mod:Class``."""

from tailtriage.renderers.base import (
    Renderer,
    RendererFactory,
    format_for_path,
    get,
    make,
    register,
    registered_names,
    render,
    write_report,
)

__all__ = [
    "Renderer",
    "RendererFactory",
    "format_for_path",
    "get",
    "make",
    "register",
    "registered_names",
    "render",
    "write_report",
]
