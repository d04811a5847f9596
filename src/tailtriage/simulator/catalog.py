"""Built-in scenarios (YAML files shipped in ``tailtriage/simulator/scenarios``) and the
one-call entry point :func:`simulate`."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from tailtriage.errors import ConfigError
from tailtriage.model.capture import Capture
from tailtriage.simulator.config import ScenarioConfig, apply_overrides, load_scenario
from tailtriage.simulator.simulation import Progress, run

#: root causes the simulator does not model yet (disaggregated prefill/decode, prefix-aware
#: routing, admission control): they have no built-in scenario, and their remediations say
#: "not predicted" instead of showing an effect
UNMODELLED_CATEGORIES: frozenset[str] = frozenset(
    {"kv_transfer", "prefix_cache_miss", "admission_control"}
)


def _scenario_dir() -> Path:
    return Path(str(resources.files("tailtriage.simulator") / "scenarios"))


def builtin_scenarios() -> dict[str, str]:
    """Name -> one-line description of every built-in scenario, sorted by name."""
    out: dict[str, str] = {}
    for path in sorted(_scenario_dir().glob("*.yaml")):
        cfg = load_scenario(path)
        out[path.stem] = cfg.description.strip().splitlines()[0] if cfg.description else ""
    return out


def scenario_path(name: str) -> Path:
    """The file of a built-in scenario."""
    path = _scenario_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(p.stem for p in sorted(_scenario_dir().glob("*.yaml")))
        raise ConfigError(
            f"no scenario file or built-in scenario named {name!r} (built-ins: {known})"
        )
    return path


def resolve_scenario(name_or_path: str | Path) -> ScenarioConfig:
    """A YAML path, or the name of a built-in scenario (``canonical-example``)."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_scenario(p)
    return load_scenario(scenario_path(str(name_or_path)))


def simulate(
    scenario: ScenarioConfig | str | Path,
    *,
    seed: int | None = None,
    overrides: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> Capture:
    """Run a scenario (config, YAML path or built-in name) and return its Capture.

    ``seed`` defaults to the scenario's own; it is recorded in ``Metadata.seed``.
    """
    cfg = scenario if isinstance(scenario, ScenarioConfig) else resolve_scenario(scenario)
    if overrides:
        cfg = apply_overrides(cfg, overrides)
    rec = run(cfg, seed, progress)
    assert rec.capture is not None
    return rec.capture
