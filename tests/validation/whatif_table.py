"""Print the table of docs/simulator-validation.md section 6 (markdown), measured now:
the recommended fix on every built-in scenario at full length, predicted without ``--base``,
against the simulator's own run of the scenario with that fix, all over the report's
incident window.

    python tests/validation/whatif_table.py [SCENARIO ...]

``tests/validation/test_scenarios_whatif.py`` asserts the same loop, on shortened scenarios."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from pipeline.test_scenarios import slos_for  # noqa: E402
from tailtriage.analyses.slo import parse_slos  # noqa: E402
from tailtriage.pipeline.triage import triage  # noqa: E402
from tailtriage.remediation import overrides_of, slo_key  # noqa: E402
from tailtriage.remediation.whatif import slo_values  # noqa: E402
from tailtriage.simulator import builtin_scenarios, resolve_scenario, simulate  # noqa: E402
from tailtriage.simulator.bundle import write_bundle  # noqa: E402
from tailtriage.simulator.config import apply_overrides  # noqa: E402
from tailtriage.store.input import load_capture  # noqa: E402


def _ms(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 10:
        return f"{v:.1f} s"
    return f"{v * 1000:,.0f} ms" if v >= 1 else f"{v * 1000:.3g} ms"


def row(name: str) -> str:
    cfg = resolve_scenario(name)
    with tempfile.TemporaryDirectory() as d:
        write_bundle(simulate(cfg), d)
        bundle = load_capture(d)
    slo = slos_for(bundle, cfg.start_unix_s + cfg.workload[0].duration_s, cfg.root_cause)
    specs = parse_slos(slo)
    t = time.perf_counter()
    report = triage(bundle, specs)
    took = time.perf_counter() - t
    if not report.remediations or report.windows is None:
        return f"| {name} | {slo} | — | — | no remediation | — | — | — | — |"
    top, key = report.remediations[0], slo_key(specs[0])
    window = report.windows.incident
    observed = slo_values(bundle, specs, token_times=False, window=window)[0][0]
    truth_cap = simulate(apply_overrides(cfg, overrides_of(top)))
    truth = slo_values(truth_cap, specs, token_times=False, window=window)[0][0]
    pred = top.predicted.get(key)
    err = top.model_error_pct.get(key)
    params = ", ".join(f"{k}={v}" for k, v in overrides_of(top).items())
    basis = top.prediction_basis.replace("_", " ")
    miss = "—" if pred is None or not truth else f"{(pred / truth - 1) * 100:+.0f}%"
    if top.prediction_basis == "low_confidence":
        miss += " (not ranked)"
    print(f"  {name}: {bundle.requests.num_rows} requests, triage {took:.1f} s", file=sys.stderr)
    return (
        f"| {name} | {slo} | {_ms(observed)} | "
        f"{'—' if err is None else f'{err:+.0f}%'} | {top.action} (`{params}`) | {basis} | "
        f"{_ms(pred)} | {_ms(truth)} | {miss} |"
    )


def main() -> None:
    names = sys.argv[1:] or sorted(n for n in builtin_scenarios() if resolve_scenario(n).root_cause)
    print(
        "| scenario | SLO | observed p95 (incident) | model error | recommended fix | prediction "
        "| predicted p95 | simulated truth | error |"
    )
    print("|---|---|---:|---:|---|---|---:|---:|---:|")
    for name in names:
        print(row(name), flush=True)


if __name__ == "__main__":
    main()
