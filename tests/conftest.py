"""Shared fixtures: where the real sample files live, and the repository root."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import DATA, ROOT, installed_binary  # noqa: F401  (re-exported)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    assert DATA.is_dir(), f"real sample files expected at {DATA}"
    return DATA


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite the golden files in tests/golden/ from the current renderers",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--update-golden", default=False):
        import os

        os.environ["TAILTRIAGE_UPDATE_GOLDEN"] = "1"
