"""Benchmark: tail analysis of 1 M requests with 8 stages, end to end (pipeline.analyze).

    python bench/analyze.py [--requests 1000000] [--threads N]

Builds a synthetic capture (a healthy first half, then an incident where a pending stage and a
slower prefill appear), runs ``pipeline.analyze`` with two SLOs, and prints the wall time of the
analysis (not the build), the peak resident memory, and a check that the answer is right.
Target (design 5): under 10 s on the project machine (2 cores)."""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from builders import T0, capture_from_arrays
from tailtriage.analyses.slo import parse_slos
from tailtriage.pipeline.analyze import analyze

STAGES8 = (
    "ingress",
    "gateway_queue",
    "pending",
    "api_server",
    "engine_queue",
    "prefill",
    "decode",
    "unattributed",
)


def build(n: int, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    arrival = T0 + np.sort(rng.uniform(0, 3600, n))
    incident = arrival - T0 >= 1800
    stages = {
        "ingress": rng.gamma(4, 0.005, n),
        "gateway_queue": rng.exponential(0.01, n),
        "pending": np.where(incident & (rng.random(n) < 0.3), rng.uniform(0.1, 0.3, n), 0.0),
        "api_server": rng.gamma(2, 0.004, n),
        "engine_queue": rng.exponential(0.03, n),
        "prefill": rng.lognormal(np.log(np.where(incident, 0.45, 0.25)), 0.2, n),
        "decode": rng.lognormal(np.log(2.0), 0.3, n),
        "unattributed": rng.exponential(0.002, n),
    }
    replicas = np.char.add("pod-", rng.integers(0, 16, n).astype(str))
    return capture_from_arrays(
        arrival,
        stages,
        output_tokens=rng.integers(32, 512, n),
        prompt_tokens=rng.integers(64, 8192, n),
        replica=replicas,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    cap = build(args.requests)
    t_build = time.perf_counter() - t0
    print(
        f"built {cap.requests.num_rows:,} requests, {cap.stages.num_rows:,} stage rows "
        f"in {t_build:.1f} s"
    )
    t0, c0 = time.perf_counter(), time.process_time()
    report = analyze(cap, parse_slos("p95 ttft < 500ms, p99 e2e < 6s"))
    t_analyze, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    d = report.decomposition
    assert d is not None and report.windows is not None
    top = sorted(report.attribution.items(), key=lambda kv: -kv[1]["shapley"])[:2]
    print(
        f"analyze: {t_analyze:.2f} s wall, {cpu:.2f} s CPU (all threads) for "
        f"{args.requests:,} requests x 8 stages (target < 10 s wall); peak RSS "
        f"{peak_mb:,.0f} MB (capture included); load average {os.getloadavg()[0]:.1f}"
    )
    print(f"incident {report.windows.incident}, baseline {report.windows.baseline}")
    contributors = ", ".join(f"{s} {a['shapley'] * 1000:+.1f} ms" for s, a in top)
    print(
        f"p95 ttft {d.total * 1000:.1f} ms vs baseline {(d.baseline_total or 0) * 1000:.1f} ms; "
        f"top contributors: {contributors}"
    )


if __name__ == "__main__":
    main()
