"""Benchmark: what the what-if runs cost a triage, against the same triage without them.

    python bench/whatif_speed.py --keep /tmp/corpus                       # the default bundles
    python bench/whatif_speed.py --keep /tmp/corpus cold_start-istio-s1 --rounds 2
    python bench/whatif_speed.py --keep /tmp/corpus --before /tmp/old/src  # before -> after

Each bundle of the realistic corpus (``tests/realistic``, generated into ``--keep`` unless it
is there) is read and triaged exactly as ``tailtriage triage BUNDLE --slo ...`` does, each
triage in a fresh process (nothing cached between them), rounds interleaved:

* ``no what-if``: ``whatif=False``, the reference measured in the same run;
* ``what-if``: the calibrated simulator's runs included (this checkout);
* ``before`` (with ``--before SRC``): the same, with another checkout's ``src`` folder (the
  code before a change), so a change's effect is a ratio measured in the same run.

Printed per bundle: wall and CPU seconds of the triage (reading the bundle excluded), the
what-if cost ratio (what-if / no what-if, CPU), after / before, the simulator runs, and
whether the JSON reports of ``what-if`` and ``before`` are identical but for their timings.
``--workers`` sets ``TAILTRIAGE_WORKERS`` (1 by default: every run in the triage's process,
what a machine with no idle core gets).  Target (issue 14): the slowest bundle's triage with
the what-if runs under 10 s on 2 cores."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the corpus generator, tests/realistic

#: the tuning bundles whose what-if runs cost the most in the corpus benchmark (2026-12-04)
DEFAULT_CASES = (
    "ingress_network+api_server_overhead-istio-s3",
    "compute_saturation+kv_cache_pressure-istio-s3",
    "tensor_parallel_overhead-knative_direct-s1",
    "cold_start-istio-s1",
    "load_imbalance-knative_direct-s2",
)

#: one triage, in a child process: prints {"wall", "cpu", "runs"} and writes the JSON report
CHILD = r"""
import json, resource, sys, time
from pathlib import Path
import orjson
from tailtriage.pipeline.triage import triage
from tailtriage.renderers.jsonrenderer import JSONRenderer
from tailtriage.store.input import load_capture

def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

bundle, slo, whatif, out = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
capture = load_capture(Path(bundle))
w0, c0 = time.perf_counter(), cpu()
report = triage(capture, slo, whatif=whatif)
wall, used = time.perf_counter() - w0, cpu() - c0
doc = orjson.loads(JSONRenderer(indent=False).render(report))
timings = ((doc.get("extra") or {}).get("triage") or {}).pop("timings", None) or {}
Path(out).write_bytes(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS))
print(json.dumps({"wall": wall, "cpu": used, "runs": timings.get("whatif_runs", 0)}))
"""

MODES = ("no what-if", "what-if", "before")


def _triage(src: Path, bundle: Path, slo: str, whatif: bool, out: Path, workers: str) -> Any:
    env = {**os.environ, "PYTHONPATH": str(src), "TAILTRIAGE_WORKERS": workers}
    flag = "1" if whatif else "0"
    cmd = [sys.executable, "-c", CHILD, str(bundle), slo, flag, str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{bundle}: triage failed\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_case(name: str, a: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from realistic.corpus import case_by_name, read_truth, write_case

    folder = a.keep / name
    if not (folder / "truth.json").exists():
        write_case(case_by_name(name), folder)
    slo = read_truth(folder)["slo"]
    here = ROOT / "src"
    plan = {"no what-if": (here, False), "what-if": (here, True)}
    if a.before is not None:
        plan["before"] = (a.before, True)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in plan}
    for r in range(a.rounds):
        for mode in list(plan)[:: 1 if r % 2 == 0 else -1]:  # who goes first alternates
            src, whatif = plan[mode]
            out = tmp / f"{mode.replace(' ', '_')}.json"
            runs[mode].append(_triage(src, folder / "bundle", slo, whatif, out, a.workers))
    best = {m: min(x["cpu"] for x in rs) for m, rs in runs.items()}
    walls = {m: min(x["wall"] for x in rs) for m, rs in runs.items()}
    row = {
        "case": name,
        "load": round(os.getloadavg()[0], 1),
        "cpu": {m: round(v, 2) for m, v in best.items()},
        "wall": {m: round(v, 2) for m, v in walls.items()},
        "runs": runs["what-if"][0]["runs"],
        "cost_ratio": round(best["what-if"] / best["no what-if"], 2),
    }
    print(f"{name} (slo {slo}; load average {row['load']})")
    for m in plan:
        print(f"  {m:11s} {walls[m]:7.2f} s wall {best[m]:7.2f} s CPU")
    print(f"  what-if cost (CPU, what-if / no what-if): {row['cost_ratio']:.2f}x")
    if a.before is not None:
        row["after_over_before"] = round(best["what-if"] / best["before"], 3)
        row["before_cost_ratio"] = round(best["before"] / best["no what-if"], 2)
        before = (tmp / "before.json").read_bytes()
        row["identical"] = before == (tmp / "what-if.json").read_bytes()
        print(
            f"  after / before (CPU): {row['after_over_before']:.3f}  "
            f"(cost ratio before {row['before_cost_ratio']:.2f}x); "
            f"reports identical but for timings: {row['identical']}"
        )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", default=list(DEFAULT_CASES), help="corpus case names")
    ap.add_argument("--keep", type=Path, required=True, help="generate into (and reuse) this")
    ap.add_argument("--before", type=Path, help="another checkout's src folder to compare")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of each, interleaved")
    ap.add_argument("--workers", default="1", help="TAILTRIAGE_WORKERS for every triage")
    ap.add_argument("--results", type=Path, help="append every row as JSON lines here")
    a = ap.parse_args()
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory(prefix="whatif-speed-") as d:
        for name in a.cases:
            rows.append(bench_case(name, a, Path(d)))
            if a.results is not None:
                with a.results.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(rows[-1]) + "\n")
    slowest = max(rows, key=lambda r: r["cpu"]["what-if"])
    print(
        f"slowest with the what-if runs: {slowest['case']} {slowest['cpu']['what-if']:.2f} s CPU "
        f"({slowest['wall']['what-if']:.2f} s wall); median what-if cost "
        f"{statistics.median(r['cost_ratio'] for r in rows):.2f}x"
    )
    if a.before is not None:
        total = sum(r["cpu"]["what-if"] for r in rows) / sum(r["cpu"]["before"] for r in rows)
        same = sum(r["identical"] for r in rows)
        print(
            f"after / before, all bundles (CPU): {total:.3f}; identical reports {same}/{len(rows)}"
        )


if __name__ == "__main__":
    main()
