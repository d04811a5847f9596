"""Shared fixtures: where the real sample files live, and the repository root."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: real files from public projects (origins, commits and licences in DATA/SOURCES.md), kept in
#: the repository so that a plain clone runs the tests with nothing beside it
DATA = ROOT / "tests" / "data" / "public"


def installed_binary(name: str, package: str) -> str:
    """The path of a Debian-packaged binary that integration tests start.

    Absent, the module is skipped with the install command as the reason, except under
    ``CI=true``: there an absent binary is a broken install step, so collection fails."""
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None
    )
    if found:
        return found
    reason = f"{name} is not installed: apt-get install -y {package}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


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
