"""Search tool for the canonical example: how scenario knobs move the worked example's figures.

For each seed (and ``--set`` overrides of ``canonical-example.yaml``) prints

* the demo's figures: p95 TTFT of the incident window and the ingress / pending / engine groups
  of tests/pipeline/test_demo.py, from the triage's p94-p96 band scaled to the p95, before and
  after both fixes (``hpa.target`` as the remediation derives it, 0.5 for this scenario);
* the simulator test's figures (tests/simulator/test_canonical.py: p93-p97 band of
  ``simulator.summary``): as is, HPA on queue depth (target 0.7), 128 batched tokens, both;
* which figures fall outside the two tests' bounds, and with several seeds the spread of each.

It skips the bundle round trip and the triage, so one seed takes seconds instead of a minute;
for the file's own config it reproduced the demo's figures to 0.1 ms.  Near saturation the
figures are chaotic in every knob (docs/scenarios.md): compare seeds, not single runs.

Usage: ``python bench/tune_canonical.py --seeds 1,2,3 --set '{"step_time.mfu": 0.68}'``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import pyarrow.compute as pc

from tailtriage.model import Capture
from tailtriage.model.vocabulary import STAGES
from tailtriage.simulator import apply_overrides, resolve_scenario, simulate
from tailtriage.simulator.summary import stage_matrix, summarize

GROUPS = {
    "ingress": ("client", "ingress", "gateway_queue"),
    "pending": ("pending",),
    "engine": ("api_server", "engine_queue", "prefill"),
}
HPA = {"hpa.metric": "vllm:num_requests_waiting"}
BUDGET = {"engine.max_num_batched_tokens": 128}


def demo_figures(cap: Capture) -> dict[str, float]:
    """p95 TTFT and the demo test's stage groups (ms), as the triage's decomposition makes them:
    band means, uncovered time to the engine group (``unattributed``), scaled to the p95."""
    lo, hi = cap.metadata.extra["incident"]
    req = cap.requests
    arrival = req["arrival"].to_numpy()
    ok = (req["status"].to_numpy(zero_copy_only=False) == "ok") & (arrival >= lo) & (arrival < hi)
    ttft = pc.fill_null(req["ttft"], np.nan).to_numpy()[ok]
    mat = stage_matrix(cap)[1][ok]
    p94, p95, p96 = np.percentile(ttft, [94, 95, 96])
    band = (ttft >= p94) & (ttft <= p96)
    means = mat[band].mean(axis=0)
    col = {s: j for j, s in enumerate(STAGES)}
    out = {g: float(sum(means[col[s]] for s in st)) for g, st in GROUPS.items()}
    out["engine"] += max(0.0, float(ttft[band].mean()) - sum(out.values()))
    scale = float(p95) / float(ttft[band].mean())
    return {"p95": float(p95) * 1e3, **{g: v * scale * 1e3 for g, v in out.items()}}


def sim_figures(cap: Capture) -> dict[str, float]:
    s = summarize(cap, tuple(cap.metadata.extra["incident"]))
    band = s["ttft_p95_decomposition_ms"]
    return {
        "p95": s["ttft"]["p95_ms"],
        "pending": band.get("pending", 0.0),
        **band,
        "throughput": s["throughput_rps"],
    }


#: (run, figure, low, high): the bounds of the two tests (10 % of the design's figures)
BOUNDS = (
    ("demo_before", "p95", 720, 880),
    ("demo_before", "ingress", 45, 55),
    ("demo_before", "pending", 180, 220),
    ("demo_before", "engine", 495, 605),
    ("demo_after", "p95", 333, 407),
    ("sim_as_is", "p95", 720, 880),
    ("sim_as_is", "ingress", 45, 55),
    ("sim_as_is", "pending", 180, 220),
    ("sim_as_is", "execution", 495, 605),
    ("sim_hpa", "pending", 0, 22),
    ("sim_budget", "execution", 270, 330),
    ("sim_both", "p95", 333, 407),
)


def misses(r: dict[str, dict[str, float]]) -> list[str]:
    """The figures outside the tests' bounds, e.g. ``["sim_both.p95=328"]``."""
    out = [
        f"{run}.{fig}={r[run].get(fig, 0.0):.0f}"
        for run, fig, lo, hi in BOUNDS
        if not lo <= r[run].get(fig, 0.0) <= hi
    ]
    tput, ref = r["sim_budget"]["throughput"], r["sim_as_is"]["throughput"]
    if abs(tput - ref) > 0.01 * ref:
        out.append(f"sim_budget.throughput={tput:.3f}/{ref:.3f}")
    return out


def run(overrides: dict[str, Any], seed: int, demo_target: float) -> dict[str, dict[str, float]]:
    cfg = apply_overrides(
        resolve_scenario("canonical-example"), {**overrides, "output.token_times": "off"}
    )

    def sim(extra: dict[str, Any]) -> Capture:
        return simulate(apply_overrides(cfg, extra) if extra else cfg, seed=seed)

    as_is = sim({})
    both_demo = {**HPA, "hpa.target": demo_target, **BUDGET}
    return {
        "demo_before": demo_figures(as_is),
        "demo_after": demo_figures(sim(both_demo)),
        "sim_as_is": sim_figures(as_is),
        "sim_hpa": sim_figures(sim({**HPA, "hpa.target": 0.7})),
        "sim_budget": sim_figures(sim(BUDGET)),
        "sim_both": sim_figures(sim({**HPA, "hpa.target": 0.7, **BUDGET})),
    }


def _fmt(d: dict[str, float], keys: tuple[str, ...]) -> str:
    return " ".join(f"{k}={d.get(k, 0.0):.0f}" for k in keys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="{}", help="JSON object of dotted scenario overrides")
    ap.add_argument("--seeds", default="", help="comma-separated seeds (default: the file's)")
    ap.add_argument("--demo-target", type=float, default=0.5, help="hpa.target of the demo fix")
    args = ap.parse_args()
    overrides = json.loads(args.set)
    seeds = [int(s) for s in args.seeds.split(",") if s] or [
        resolve_scenario("canonical-example").seed
    ]
    groups = ("p95", "ingress", "pending", "engine")
    spread: dict[str, list[float]] = {}
    for seed in seeds:
        r = run(overrides, seed, args.demo_target)
        for run_name, fig, _, _ in BOUNDS:
            spread.setdefault(f"{run_name}.{fig}", []).append(r[run_name].get(fig, 0.0))
        print(f"seed {seed}")
        print(f"  demo before  {_fmt(r['demo_before'], groups)}   (design 800 50 200 550)")
        print(f"  demo after   {_fmt(r['demo_after'], groups)}   (design 370 50 20 300)")
        print(f"  sim as is    {_fmt(r['sim_as_is'], ('p95', 'ingress', 'pending', 'execution'))}")
        print(
            f"  sim hpa 0.7  {_fmt(r['sim_hpa'], ('p95', 'pending', 'execution'))}  (pending ~20)"
        )
        print(
            f"  sim budget   {_fmt(r['sim_budget'], ('p95', 'pending', 'execution'))}  (exec ~300)"
        )
        print(f"  sim both     {_fmt(r['sim_both'], ('p95', 'pending', 'execution'))}  (p95 ~370)")
        out = misses(r)
        print(f"  outside the tests' bounds: {', '.join(out) if out else 'none'}")
    if len(seeds) > 1:
        print(f"spread over seeds {','.join(map(str, seeds))} (min .. max):")
        for key, vals in spread.items():
            print(f"  {key:<22} {min(vals):5.0f} .. {max(vals):5.0f}")


if __name__ == "__main__":
    main()
