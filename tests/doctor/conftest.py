"""Bundles with telemetry removed on purpose: a small simulated incident, written once per
session with `python -m tailtriage simulate`, then copied and cut (``removals.REMOVALS``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from removals import REMOVALS

SCENARIO = Path(__file__).with_name("small.yaml")


@pytest.fixture(scope="session")
def complete_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("doctor") / "complete"
    subprocess.run(
        [sys.executable, "-m", "tailtriage", "simulate", str(SCENARIO), "--out", str(out), "-q"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


@pytest.fixture(scope="session")
def cut_bundle(
    complete_bundle: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Path]:
    """The complete bundle with one removal applied (made once per removal and session)."""
    made: dict[str, Path] = {}

    def make(removal: str) -> Path:
        if removal not in made:
            bundle = tmp_path_factory.mktemp("cut") / "bundle"
            shutil.copytree(complete_bundle, bundle)
            REMOVALS[removal][0](bundle)
            made[removal] = bundle
        return made[removal]

    return make
