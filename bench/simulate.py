"""Simulator throughput: simulated requests per second of wall time (design section 5).

Runs a chat workload on a continuous-batching fleet (8 x Llama-3.1-8B on H100, ~80 % load,
autoscaler and metrics on, per-token times off as for any run above 20k requests), then the
built-in canonical example; prints requests simulated per wall-clock second for each.
Usage: ``python bench/simulate.py [--requests N]``.
"""

from __future__ import annotations

import argparse
import os
import time

from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.config import from_dict

TARGET = 20_000


def fleet(duration_s: float) -> dict[str, object]:
    return {
        "name": "bench-fleet",
        "seed": 1,
        "model": {"name": "llama-3.1-8b"},
        "gpu": {"type": "H100"},
        "engine": {"max_num_batched_tokens": 2048, "max_num_seqs": 256},
        "hpa": {"metric": "vllm:num_requests_waiting", "target": 5, "min_replicas": 8,
                "max_replicas": 8},
        "pods": {"initial_replicas": 8},
        "output": {"token_times": "off"},
        "workload": [{
            "name": "steady", "duration_s": duration_s,
            "arrivals": {"process": "poisson", "rate": 240},
            "prompt_tokens": {"kind": "lognormal", "median": 400, "sigma": 0.6, "max": 4000},
            "output_tokens": {"kind": "lognormal", "median": 60, "sigma": 0.6, "max": 1000},
        }],
    }  # fmt: skip


def measure(label: str, run: object) -> float:
    """Requests per wall second; CPU seconds too, since a shared machine inflates wall time."""
    t0, c0 = time.perf_counter(), time.process_time()
    capture = run()  # type: ignore[operator]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = capture.requests.num_rows
    rate = n / wall
    print(
        f"{label:<22} {n:>8} requests: {wall:6.2f} s wall = {rate:>9,.0f} req/s; "
        f"{cpu:6.2f} s CPU = {n / cpu:>9,.0f} req/s per CPU second"
    )
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--duration", type=float, default=300.0, help="simulated seconds of the fleet")
    args = ap.parse_args()
    simulate(from_dict(fleet(5.0)))  # warm imports (pyarrow, duckdb) outside the timing
    rate = measure("fleet (8 replicas)", lambda: simulate(from_dict(fleet(args.duration))))
    measure("canonical-example", lambda: simulate(resolve_scenario("canonical-example")))
    verdict = "meets" if rate >= TARGET else "MISSES"
    load = os.getloadavg()[0]
    print(
        f"simulator throughput: {rate:,.0f} simulated requests/s of wall time "
        f"({verdict} target {TARGET:,}; load average {load:.1f} on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
