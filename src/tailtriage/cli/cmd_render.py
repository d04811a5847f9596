"""`tailtriage render CAPTURE_OR_JSON -f html|terminal|json [-o OUT]`: render again without
analysing again ("capture once, render many").

The input is a saved JSON report (the ``--json`` output of triage/analyze, or the
``{"before", "after"}`` document of ``demo --json``) or a saved capture, which is analysed
first (with ``--slo``, default ``p95 ttft < 500ms``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console

from tailtriage.cli._app import app, err_console
from tailtriage.errors import ConfigError, InputError, ParseError
from tailtriage.outputs import check_outputs
from tailtriage.report import Report

DEFAULT_SLO = "p95 ttft < 500ms"

FormatOption = Annotated[
    str | None,
    typer.Option(
        "--format",
        "-f",
        help="terminal, json, html, or an import path pkg.mod:Class; "
        "default: from the extension of -o, else terminal.",
    ),
]
OutOption = Annotated[
    Path | None, typer.Option("--out", "-o", help="Write here instead of stdout.")
]
RenderOption = Annotated[
    list[str] | None,
    typer.Option("--render-option", "-r", help="key=value passed to the renderer, e.g. width=120."),
]


@app.command()
def render(
    path: Annotated[
        Path,
        typer.Argument(help="Saved JSON report, saved capture (.duckdb), bundle folder or file."),
    ],
    format: FormatOption = None,
    out: OutOption = None,
    slo: Annotated[
        str | None,
        typer.Option("--slo", help=f"SLOs when PATH is a capture (default {DEFAULT_SLO!r})."),
    ] = None,
    side: Annotated[
        str, typer.Option("--side", help="Which report of a demo document: before or after.")
    ] = "before",
    render_option: RenderOption = None,
) -> None:
    """Render a saved report or capture as terminal text, JSON or a self-contained HTML file."""
    from tailtriage.renderers import format_for_path, make, write_report
    from tailtriage.renderers.terminal import TerminalRenderer

    check_outputs(inputs=[path], outputs=[out])
    report = load_report(path, slo, side)
    options = parse_options(render_option or [])
    fmt = format or (format_for_path(out) if out is not None else "terminal")
    if out is not None:
        write_report(report, out, fmt, **options)
        err_console.print(f"{fmt} report written to {out}", markup=False)
        return
    renderer = make(fmt, **options)
    if isinstance(renderer, TerminalRenderer) and "color" not in options:
        # straight to the terminal: rich picks width and colours from it
        console = Console(highlight=False, emoji=False, width=options.get("width"))
        for part in renderer.renderables(report):
            console.print(part)
        return
    typer.echo(renderer.render(report), nl=False)


def load_report(path: Path, slo: str | None, side: str = "before") -> Report:
    """A Report from a JSON report file, or from a capture analysed against ``slo``."""
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    if path.is_file() and _looks_like_report(path):
        if slo is not None:
            err_console.print(
                "note: --slo is ignored: a saved report keeps the SLOs it was made with"
            )
        return report_from_json(path, side)
    from tailtriage.pipeline.analyze import analyze
    from tailtriage.store.input import load_capture

    if slo is None:
        err_console.print(f"note: no --slo given; analysing against {DEFAULT_SLO!r}")
    return analyze(load_capture(path), slo or DEFAULT_SLO)


def _looks_like_report(path: Path) -> bool:
    """A JSON object whose first keys are a report's (``schema_version`` leads ``to_dict``,
    ``before`` leads the demo document); other JSON (OTLP, Jaeger, ...) goes to the sources."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{") and (b'"schema_version"' in head or b'"before"' in head)


def report_from_json(path: Path, side: str = "before") -> Report:
    try:
        doc: Any = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ParseError(
            f"invalid JSON: {exc.msg}", str(path), f"line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(doc, dict):
        raise ParseError("not a tailtriage JSON report (expected an object)", str(path))
    if "before" in doc and "after" in doc:  # demo --json
        if side not in ("before", "after"):
            raise ConfigError(f"--side must be before or after, not {side!r}")
        doc = doc[side]
        if not isinstance(doc, dict):
            raise ParseError(f"$.{side} is not a report object", str(path))
    if "slos" not in doc or "schema_version" not in doc:
        raise ParseError("not a tailtriage JSON report (no schema_version/slos)", str(path))
    try:
        return Report.from_dict(doc)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ParseError(f"malformed report: {detail}", str(path)) from None


def parse_options(items: list[str]) -> dict[str, Any]:
    """``["width=120", "color=false"]`` -> ``{"width": 120, "color": False}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--render-option {item!r}: expected key=value")
        out[key.strip().replace("-", "_")] = _value(raw.strip())
    return out


def _value(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw
