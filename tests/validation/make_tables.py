"""Print the tables of docs/simulator-validation.md (markdown), measured now.

    python tests/validation/make_tables.py [--skip-canonical]

Everything here is also asserted, with bounds, by the tests in this folder."""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from sim_validation import (  # noqa: E402
    CANONICAL_SLOS,
    _stage_p95_band,
    canonical_example,
    replay_vllm_run,
)
from vllm_runs import RUNS, load_run  # noqa: E402

from support import DATA  # noqa: E402
from tailtriage.simulator.steptime import GPUS, MODELS, RooflineStepTime  # noqa: E402


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:,.1f}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:+.1f}%"


def vllm_tables() -> None:
    """The two tables of section 2: whole-run fit and first-half fit, each run also with its
    ``kv_cache`` deleted from meta.json where it has one (the cache's size then inferred)."""
    for fit_fraction, title in (
        (1.0, "Calibrated on the whole run, replayed"),
        (0.5, "Step time fitted on the first half of the requests only, replayed over all"),
    ):
        print(f"\n### {title}\n")
        print(
            "| run | TTFT p50 | p90 | p95 | p99 | e2e p50 | p95 | p99 | TPOT p50 | p95 "
            "| step model (whole run) | s |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
        for name in RUNS:
            run = load_run(DATA, name)
            variants = [(name, dict(run.meta))]
            if "kv_cache" in run.meta:
                meta = {k: v for k, v in run.meta.items() if k != "kv_cache"}
                variants.append((f"{name} (kv_cache deleted)", meta))
            for label, meta in variants:
                t = time.perf_counter()
                pred = replay_vllm_run(DATA / "vllm_runs" / name, meta, fit_fraction=fit_fraction)
                wall = time.perf_counter() - t
                errs = " | ".join(_pct(s.model_error_pct) for s in pred.slos)
                step = pred.fit.parts.get("step_time", {}) if pred.fit else {}
                scale = step.get("scale", {}).get("factor")
                model = f"{step.get('chosen', '?')}" + (f" x{scale:.3f}" if scale else "")
                print(f"| {label} | {errs} | {model} | {wall:.1f} |")


def steptime_table() -> None:
    print("\n#### Step time against published measurements\n")
    print("| case | published | model | error |")
    print("|---|---:|---:|---:|")
    vidur = {(1, 1): 0.625, (1, 256): 0.764, (1, 1024): 2.935, (1, 4096): 10.94, (2, 1): 0.319,
             (2, 4096): 5.46, (4, 1): 0.179, (4, 4096): 2.78, (8, 1): 0.105, (8, 4096): 1.53}  # fmt: skip
    for (tp, tok), want in vidur.items():
        m = RooflineStepTime(MODELS["llama-2-70b"], GPUS["H100"], tp=tp)
        c, mem = m.split(tok, 0, 0)[:2]
        got = max(c, mem) / 80 * 1e3
        print(
            f"| Vidur H100 Llama-2-70B linears/layer, TP{tp}, {tok} tok (ms) | {want} | {got:.3f} | {(got - want) / want * 100:+.1f}% |"
        )
    dbx = {("7b", 1): 46.0, ("7b", 2): 34.0, ("7b", 4): 26.0, ("70b", 4): 154.0, ("70b", 8): 114.0}
    for (model, n), want in dbx.items():
        shape = MODELS["llama-2-7b" if model == "7b" else "llama-2-70b"]
        got = RooflineStepTime(shape, GPUS["A100-40GB"], tp=n).step_time(512, 0, 512) * 1e3
        print(
            f"| Databricks TTFT 512 tok, {model}, {n}×A100-40GB (ms) | {want} | {got:.1f} | {(got - want) / want * 100:+.1f}% |"
        )
    for tp, want in ((2, 0.60),):
        m = RooflineStepTime(MODELS["llama-2-70b"], GPUS["H100"], tp=tp)
        mbu = MODELS["llama-2-70b"].params_b * 2e9 / m.step_time(0, 1, 512) / (3.35e12 * tp)
        print(
            f"| Databricks MBU batch 1, {tp}×H100 | {want:.0%} | {mbu:.0%} | {(mbu - want) / want * 100:+.1f}% |"
        )
    a = RooflineStepTime(MODELS["llama-2-7b"], GPUS["A100-40GB"], tp=2).step_time(0, 1, 512)
    b = RooflineStepTime(MODELS["llama-2-7b"], GPUS["A100-40GB"], tp=4).step_time(0, 1, 512)
    print(f"| Databricks TPOT 7B, 2→4 GPUs, batch 1 | −12% | {(b - a) / a * 100:+.0f}% | |")
    a = RooflineStepTime(MODELS["llama-2-70b"], GPUS["A100-40GB"], tp=4).step_time(0, 1, 512)
    b = RooflineStepTime(MODELS["llama-2-70b"], GPUS["H100"], tp=4).step_time(0, 1, 512)
    print(
        f"| Databricks 4×H100 vs 4×A100-40GB latency, batch 1 | −36% | {(b - a) / a * 100:+.0f}% | |"
    )


def canonical_table() -> None:
    from tailtriage.simulator.catalog import resolve_scenario

    cfg = resolve_scenario("canonical-example")
    t = time.perf_counter()
    sim, _observed, replay, results = canonical_example(cfg, cfg.seed)
    wall = time.perf_counter() - t
    base = replay.predict({})
    s0 = base.slos[0]
    print("\n#### Canonical example (simulated, written as a bundle, read back, calibrated)\n")
    print(
        f"Requests: {sim.requests.num_rows:,}; p95-band stages of the simulated incident (ms): "
        + ", ".join(
            f"{k} {v * 1000:,.0f}" for k, v in _stage_p95_band(sim).items() if k != "decode"
        )
    )
    print(
        f"\n{CANONICAL_SLOS[0]}: observed {_ms(s0.observed)} ms, calibrated baseline "
        f"{_ms(s0.baseline)} ms ({_pct(s0.model_error_pct)}); total wall time {wall:.0f} s\n"
    )
    print(
        "| fix | simulator (truth) p95 TTFT ms | what-if predicted ms | corrected ms | truth throughput | predicted throughput |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        s = r.prediction.slos[0]
        print(
            f"| {r.name} | {_ms(r.truth_s)} | {_ms(s.predicted)} | {_ms(s.corrected)} | "
            f"{r.truth_throughput_change_pct:+.1f}% | {r.prediction.throughput_change_pct:+.1f}% |"
        )
    print("\np95-band stages with each fix, simulator truth (ms):\n")
    for r in results:
        print(
            f"- {r.name}: "
            + ", ".join(f"{k} {v * 1000:,.0f}" for k, v in r.truth_stages.items() if k != "decode")
        )
    replay.close()


def main() -> None:
    steptime_table()
    vllm_tables()
    if "--skip-canonical" not in sys.argv:
        canonical_table()


if __name__ == "__main__":
    main()
