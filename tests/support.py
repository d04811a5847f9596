"""Where the tests' files live and which binaries they may start, importable by any test
module as ``from support import DATA`` (a module named ``conftest`` would be shadowed by the
``conftest.py`` of a test package)."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: real files from public projects (origins, commits and licences in DATA/SOURCES.md), kept in
#: the repository so that a plain clone runs the tests with nothing beside it
DATA = ROOT / "tests" / "data" / "public"


def installed_binary(name: str, package: str, *aliases: str) -> str:
    """The path of a Debian-packaged binary that integration tests start.

    Absent, the module is skipped with the install command as the reason, except under
    ``CI=true``: there an absent binary is a broken install step, so collection fails."""
    for candidate in (name, *aliases):
        found = shutil.which(candidate) or (
            f"/usr/bin/{candidate}" if Path(f"/usr/bin/{candidate}").exists() else None
        )
        if found:
            return found
    reason = f"{name} is not installed: apt-get install -y {package}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections while the block runs: bound, never listening.
    A port closed right after binding can be taken by another test's server meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])
