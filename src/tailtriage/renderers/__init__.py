"""Renderers: a Report in, text out (terminal, JSON, self-contained HTML).

``render(report, "html")`` and ``write_report(report, path)`` are the entry points; renderers
are found by name in a small registry (``register``/``get``/``registered_names``) or by an
import path ``pkg.mod:Class``.  They read the report only (an import-linter contract).

* ``base``             the Renderer protocol, its registry, ``render`` and ``write_report``
* ``terminal``         the terminal report (rich): the triage story on one screen
* ``jsonrenderer``     the JSON report (design 3.5)
* ``html``             the self-contained HTML report (charts as inline SVG, no CDN)
* ``doctor``           doctor's terminal view, shared with the triage report's gaps
* ``_html_sections``   the HTML report's sections, one function each
* ``_html_findings``   its findings and remediations sections
* ``_html_parts``      its building blocks: the shared view, escaped HTML helpers
* ``_charts``          its charts as inline SVG, on one shared time axis
* ``_svg``             scales, ticks and an escaping SVG element builder
* ``_aggregate``       bound what a report plots, whatever the capture's size
* ``_compare``         the before/after view of a compare report
* ``_format``          one stage palette and one way to print durations and times
"""

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
