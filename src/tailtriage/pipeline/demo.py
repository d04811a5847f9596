"""The worked example of design section 1, end to end, with nothing installed beyond the package.

1. simulate the breaching stack (the ``canonical-example`` scenario: HPA on CPU, engine token
   budget 256) and write it as an incident bundle in the formats real systems export;
2. read that bundle back and triage it, exactly as a user's bundle would be;
3. apply the top recommendation (the worked example needs two fixes at once) to the scenario
   and simulate the fixed stack, written and read back the same way;
4. triage the fixed stack over the same window and compare before with after.

The triage sees only the bundle: the scenario's ground truth never reaches the diagnosis.  The
deployment's configuration (engine flags, model, GPU) is given to the what-if calibration as the
``base`` a user would supply, because no telemetry shows a flag like --max-num-batched-tokens."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailtriage.model import Capture
from tailtriage.pipeline.compare import compare
from tailtriage.pipeline.triage import triage
from tailtriage.remediation import Remediation, overrides_of, worst_ratio
from tailtriage.report import Report, reports_pair_dict
from tailtriage.simulator import apply_overrides, resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import ScenarioConfig
from tailtriage.store.input import load_capture

SCENARIO = "canonical-example"
SLO = "p95 ttft < 500ms"

#: (step, message): the narrative as it happens
Say = Callable[[str, str], None]


@dataclass(frozen=True)
class DemoResult:
    before: Report
    after: Report
    comparison: Report
    applied: tuple[Remediation, ...]
    overrides: dict[str, Any]
    bundle_dirs: tuple[str, str]
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"before": <report>, "after": <report>, "applied": [<actions>], ...}``."""
        doc = reports_pair_dict(self.before, self.after, self.applied_actions)
        doc["overrides"] = dict(self.overrides)
        doc["compare"] = self.comparison.to_dict()
        doc["timings_s"] = {k: round(v, 2) for k, v in self.timings.items()}
        return doc

    @property
    def applied_actions(self) -> list[str]:
        out: list[str] = []
        for r in self.applied:
            parts = r.parameters.get("combined")
            out.extend(parts if isinstance(parts, list) else [r.action])
        return out


def _bundle_roundtrip(capture: Capture, out: Path) -> Capture:
    """Write ``capture`` as a real-format bundle and read it back as a user's bundle."""
    write_bundle(capture, out)
    return load_capture(out)


def _windows(
    cfg: ScenarioConfig,
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    if len(cfg.incident_s) < 2:
        return None, None
    start = cfg.start_unix_s
    lo, hi = float(cfg.incident_s[0]), float(cfg.incident_s[1])
    return (start + lo, start + hi), ((start, start + lo) if lo > 0 else None)


def choose_fix(report: Report) -> tuple[Remediation, ...]:
    """The worked example applies its two fixes together: the best ``combined`` remediation
    predicted to meet every SLO; without one, the top remediation."""
    specs = [s.spec for s in report.slos]
    for r in report.remediations:
        if r.action == "combined" and r.predicted and worst_ratio(r.predicted, specs) <= 1.0:
            return (r,)
    return report.remediations[:1]


def run_demo(
    *,
    scenario: str | ScenarioConfig = SCENARIO,
    slo: str = SLO,
    workdir: str | Path | None = None,
    say: Say | None = None,
    seed: int | None = None,
) -> DemoResult:
    """Run the worked example; ``say`` receives the narrative step by step."""
    tell = say or (lambda step, msg: None)
    cfg = scenario if isinstance(scenario, ScenarioConfig) else resolve_scenario(scenario)
    tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="tailtriage-demo-")
    root = Path(workdir) if workdir is not None else Path(tmp.name)  # type: ignore[union-attr]
    timings: dict[str, float] = {}
    try:
        t = time.perf_counter()
        tell("simulate", f"Simulating the breaching stack ({cfg.name}) ...")
        before_cap = simulate(cfg, seed=seed)
        before_dir = root / "before"
        bundle = _bundle_roundtrip(before_cap, before_dir)
        timings["simulate_and_bundle_s"] = time.perf_counter() - t
        tell("bundle", f"Wrote and re-read an incident bundle: {before_dir}")
        t = time.perf_counter()
        # the page names the incident (the scenario's incident window), as a user would with
        # --incident; the healthy time before it is the baseline
        incident, baseline = _windows(cfg)
        before = triage(
            bundle,
            slo,
            incident=incident,
            baseline=baseline,
            base=cfg,
            progress=lambda s, d: tell(s, d),
        )
        timings["triage_s"] = time.perf_counter() - t
        applied = choose_fix(before)
        overrides: dict[str, Any] = {}
        for r in applied:
            overrides.update(overrides_of(r))
        tell("apply", "Applying " + ", ".join(f"{k}={v}" for k, v in overrides.items()))
        t = time.perf_counter()
        fixed_cfg = apply_overrides(cfg, overrides) if overrides else cfg
        after_cap = simulate(fixed_cfg, seed=seed)
        after_dir = root / "after"
        after_bundle = _bundle_roundtrip(after_cap, after_dir)
        window = before.windows.incident if before.windows else None
        baseline = before.windows.baseline if before.windows else None
        after = triage(after_bundle, slo, incident=window, baseline=baseline, whatif=False)
        comparison = compare(
            bundle, after_bundle, slo, before_window=window, after_window=window, seed=0
        )
        timings["verify_s"] = time.perf_counter() - t
        return DemoResult(
            before=before,
            after=after,
            comparison=comparison,
            applied=applied,
            overrides=overrides,
            bundle_dirs=(str(before_dir), str(after_dir)),
            timings=timings,
        )
    finally:
        if tmp is not None:
            tmp.cleanup()
