"""Golden files in ``tests/golden/``: ``TAILTRIAGE_UPDATE_GOLDEN=1 python -m pytest
tests/renderers`` rewrites them from the current output instead of comparing; review the diff
before committing.

Deliberately not a ``conftest.py``: a second module named ``conftest`` shadows
``tests/conftest.py`` for the ``from support import ...`` that test modules once used (they import ``support`` now)."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def updating() -> bool:
    return os.environ.get("TAILTRIAGE_UPDATE_GOLDEN", "") not in ("", "0")


def assert_golden(name: str, text: str) -> None:
    """``text`` equals ``tests/golden/<name>`` (or, when updating, becomes it)."""
    path = GOLDEN / name
    if updating():
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; run with TAILTRIAGE_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"output differs from {path}; rerun with TAILTRIAGE_UPDATE_GOLDEN=1 and review the diff"
    )
