"""Every diagnosis threshold is named once, explained, and used from ``diagnosis.thresholds``."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

from tailtriage.diagnosis import thresholds as T

PACKAGE = Path(T.__file__).parent
DIAGNOSIS = PACKAGE.parent
#: literals a rule may write inline: float tolerances against division by zero, the percent ->
#: ratio scale, ms conversion, ``round`` digits and "at least two"
TRIVIAL = {0, 1, 2, 3, 1000, 1e-9, 1e-12, 0.01}
_CONSTANT = re.compile(r"^([A-Z][A-Z0-9_]*): Final = ")


def _modules() -> list[str]:
    return [m.name for m in pkgutil.iter_modules([str(PACKAGE)])]


def test_every_name_is_defined_in_one_module_and_exported() -> None:
    seen: dict[str, str] = {}
    for name in _modules():
        mod = importlib.import_module(f"tailtriage.diagnosis.thresholds.{name}")
        for key, value in vars(mod).items():
            if not key.isupper():
                continue
            assert key not in seen, f"{key} in both {seen[key]} and {name}"
            seen[key] = name
            assert isinstance(value, int | float) and not isinstance(value, bool), key
            assert getattr(T, key) == value, key
    assert len(seen) > 150


def test_every_constant_has_a_why_comment_above_it() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = _CONSTANT.match(line)
            if m:
                assert lines[i - 1].startswith("#: "), f"{path.name}: {m.group(1)} has no #: why"


def test_rules_write_no_threshold_inline() -> None:
    for path in sorted(DIAGNOSIS.glob("*.py")):
        tree = ast.parse(path.read_text())
        inline = sorted(
            {
                n.value
                for n in ast.walk(tree)
                if isinstance(n, ast.Constant)
                and isinstance(n.value, int | float)
                and not isinstance(n.value, bool)
                and n.value not in TRIVIAL
            }
        )
        assert not inline, f"{path.name} writes {inline} inline: name them in thresholds"
