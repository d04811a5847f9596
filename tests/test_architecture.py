"""The import-linter contract (pipeline stages import one way) holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tailtriage

ROOT = Path(__file__).resolve().parents[1]


def test_import_layers_contract_is_kept() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken" in proc.stdout and "0 broken" in proc.stdout


def test_public_api_is_sorted_and_importable() -> None:
    names = list(tailtriage.__all__)
    assert names == sorted(names, key=str.lower) or names == sorted(names)
    for name in names:
        assert hasattr(tailtriage, name), name
