"""The renderer registry: names, import paths, options, write_report, and the contract every
registered renderer keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from renderers.report_builders import (
    make_compare_report,
    make_empty_report,
    make_hostile_report,
    make_nonfinite_report,
    make_report,
)
from tailtriage.errors import ConfigError
from tailtriage.renderers import (
    Renderer,
    format_for_path,
    get,
    make,
    register,
    registered_names,
    render,
    write_report,
)
from tailtriage.report import Report


def test_builtin_names() -> None:
    assert {"terminal", "json", "html"} <= set(registered_names())
    assert registered_names() == sorted(registered_names())


@pytest.mark.parametrize("name", ["terminal", "json", "html"])
@pytest.mark.parametrize(
    "builder",
    [
        make_report,
        make_empty_report,
        make_hostile_report,
        make_compare_report,
        make_nonfinite_report,
    ],
)
def test_contract_every_renderer(name: str, builder: object) -> None:
    report: Report = builder()  # type: ignore[operator]
    renderer = make(name)
    assert isinstance(renderer, Renderer)
    assert renderer.name == name
    assert renderer.output_file_extension.isalnum()
    out = renderer.render(report)
    assert isinstance(out, str) and out.strip()
    assert renderer.render(report) == out  # deterministic


class UpperRenderer:
    name = "upper"
    output_file_extension = "txt"

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix

    def render(self, report: Report) -> str:
        return self.prefix + report.title.upper()


def test_import_path_hook() -> None:
    out = render(make_report(), f"{__name__}:UpperRenderer", prefix="> ")
    assert out == "> " + make_report().title.upper()


def test_register_decorator() -> None:
    register("upper-test")(UpperRenderer)
    assert "upper-test" in registered_names()
    assert get("upper-test") is UpperRenderer


@pytest.mark.parametrize(
    "fmt", ["nope", "no.such.module:Thing", f"{__name__}:Missing", f"{__name__}:HOSTILE_CONST"]
)
def test_unknown_renderer_is_a_config_error(fmt: str) -> None:
    with pytest.raises(ConfigError) as info:
        render(make_report(), fmt)
    assert fmt.split(":")[0] in str(info.value) or "renderer" in str(info.value)


HOSTILE_CONST = "not a renderer"


def test_unknown_known_names_are_listed() -> None:
    with pytest.raises(ConfigError, match="terminal"):
        get("nope")


def test_bad_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="options"):
        render(make_report(), "terminal", colour=True)


def test_write_report_picks_format_from_extension(tmp_path: Path) -> None:
    html = write_report(make_report(), tmp_path / "sub" / "r.html")
    js = write_report(make_report(), tmp_path / "r.json")
    txt = write_report(make_report(), tmp_path / "r.txt", width=100)
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert js.read_text(encoding="utf-8").lstrip().startswith("{")
    assert "Where the p95 TTFT goes" in txt.read_text(encoding="utf-8")
    assert not list(tmp_path.rglob(".*.tmp"))  # no temporary file left behind


def test_format_for_path() -> None:
    assert format_for_path(Path("a.HTML")) == "html"
    assert format_for_path(Path("a.htm")) == "html"
    assert format_for_path(Path("a.json")) == "json"
    assert format_for_path(Path("a.txt")) == "terminal"
