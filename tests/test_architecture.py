"""The import-linter contracts (stages import one way; the "never" edges) hold."""

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


def test_public_api_is_sorted_complete_and_importable() -> None:
    names = list(tailtriage.__all__)
    assert len(names) == len(set(names))  # order is kept sorted by ruff (RUF022)
    assert set(names) == {*tailtriage._EXPORTS, "__version__"}
    for name in names:
        assert getattr(tailtriage, name) is not None, name


def test_import_has_no_heavy_side_effects() -> None:
    code = "import sys, tailtriage; print('duckdb' in sys.modules or 'aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_test_modules_have_unique_basenames() -> None:
    """pytest's default import mode fails on two test files with one basename."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
