"""Benchmark: triage with the what-if runs, the simulator's runs in worker processes or not.

    python bench/whatif_parallel.py --keep /tmp/corpus                 # the default bundles
    python bench/whatif_parallel.py --keep /tmp/corpus --rounds 2 load_imbalance-istio-s1001

Each bundle of the realistic corpus (``tests/realistic``, generated into ``--keep`` unless it
is there) is read and triaged exactly as ``tailtriage triage BUNDLE --slo ...`` does, with the
what-if runs in ``MAX_WORKERS`` worker processes (``TAILTRIAGE_WORKERS=2``: forced, so that a
busy machine does not fall back to one), against a reference measured in the same run: the
same triage with every simulator run in this process (``TAILTRIAGE_WORKERS=1``), rounds
interleaved (who goes first alternates).  On a machine whose cores are busy with other work
the workers cannot gain wall time: read the load average printed.  Printed per bundle: wall
and CPU seconds (CPU of the worker processes included), the ratio of the best walls, and
whether the two JSON reports are identical but for their timings (they must be: a run
depends on its config and seed only).
Target (issue 14): the slowest bundle under 10 s on 2 cores, what-if runs included."""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from tailtriage.pipeline.triage import triage
from tailtriage.renderers.jsonrenderer import JSONRenderer
from tailtriage.simulator import parallel
from tailtriage.store.input import load_capture

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the corpus generator, tests/realistic

#: the slowest bundles the corpus benchmark recorded with the what-if runs (2026-12-03/04)
DEFAULT_CASES = ("load_imbalance-istio-s1001", "scaling_lag-knative_direct-s2")


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _report(bundle: Path, slo: str) -> tuple[dict[str, Any], float, float]:
    w0, c0 = time.perf_counter(), _cpu()
    report = triage(load_capture(bundle), slo, whatif=True)
    wall, cpu = time.perf_counter() - w0, _cpu() - c0
    doc: dict[str, Any] = orjson.loads(JSONRenderer(indent=False).render(report))
    ((doc.get("extra") or {}).get("triage") or {}).pop("timings", None)
    return doc, wall, cpu


def bench_case(name: str, keep: Path, rounds: int) -> None:
    from realistic.corpus import case_by_name, read_truth, write_case

    folder = keep / name
    if not (folder / "truth.json").exists():
        write_case(case_by_name(name), folder)
    slo = read_truth(folder)["slo"]
    times: dict[str, list[tuple[float, float]]] = {"one process": [], "workers": []}
    docs: dict[str, dict[str, Any]] = {}
    for r in range(rounds):
        for mode in list(times)[:: 1 if r % 2 == 0 else -1]:
            # forced either way: left to itself, a busy machine gets one worker (parallel.py)
            n = 1 if mode == "one process" else parallel.MAX_WORKERS
            os.environ[parallel.WORKERS_ENV] = str(n)
            docs[mode], wall, cpu = _report(folder / "bundle", slo)
            times[mode].append((wall, cpu))
    os.environ.pop(parallel.WORKERS_ENV, None)
    print(f"{name} (slo {slo}; load average {os.getloadavg()[0]:.1f})")
    for mode, runs in times.items():
        shown = ", ".join(f"{w:.2f} s wall / {c:.2f} s CPU" for w, c in runs)
        print(f"  {mode:12s} {shown}")
    best = {mode: min(w for w, _ in runs) for mode, runs in times.items()}
    print(f"  ratio workers / one process (best wall): {best['workers'] / best['one process']:.2f}")
    differ = [k for k in docs["workers"] if docs["workers"][k] != docs["one process"].get(k)]
    print(
        f"  reports identical but for timings: {not differ}"
        + (f" (differ: {differ})" if differ else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", default=list(DEFAULT_CASES), help="corpus case names")
    ap.add_argument("--keep", type=Path, required=True, help="generate into (and reuse) this")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of each, interleaved")
    a = ap.parse_args()
    for name in a.cases:
        bench_case(name, a.keep, a.rounds)


if __name__ == "__main__":
    main()
