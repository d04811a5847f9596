"""Golden files: ``pytest tests/renderers --update-golden`` (or ``TAILTRIAGE_UPDATE_GOLDEN=1``)
rewrites them from the current output instead of comparing; review the diff before committing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    with contextlib.suppress(ValueError):  # another conftest registered it already
        parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden files")


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``golden(name, text)`` asserts ``text`` equals ``tests/golden/<name>`` (or rewrites it)."""
    update = bool(request.config.getoption("--update-golden", default=False)) or os.environ.get(
        "TAILTRIAGE_UPDATE_GOLDEN", ""
    ) not in ("", "0")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update:
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"missing golden file {path}; run with --update-golden"
        expected = path.read_text(encoding="utf-8")
        assert text == expected, (
            f"output differs from {path}; run with --update-golden and review the diff"
        )

    return check
