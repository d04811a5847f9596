"""Collect benchmark: ``tailtriage collect`` of a 1-hour window from a real Prometheus.

Backfills one hour of a vLLM fleet's metrics (``--pods`` engines scraped every 15 s: the
scheduler gauges, KV-cache usage, counters and the TTFT / ITL / e2e / queue histograms with
vLLM's buckets) into a TSDB with ``promtool tsdb create-blocks-from openmetrics``, starts
Prometheus on it (loopback), then times

* the reference: plain ``urllib`` GETs of ``query_range`` for every catalog query with the
  same step, one after another, as a user scripting ``curl`` would (the floor: the server's
  own work plus transfer), and
* ``tailtriage collect --since T0 --until T0+1h --prometheus URL --no-kubernetes``,

and prints both and the ratio.  Needs ``prometheus`` and ``promtool`` (Debian packages).

    python bench/collect.py [--pods 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, SRC)

from tailtriage.collect.prometheus import query_for, step_for  # noqa: E402
from tailtriage.model.metric_catalog import CATALOG  # noqa: E402

SCRAPE_S = 15
HOUR_S = 3600
BUCKETS = (0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
)


def openmetrics(path: Path, pods: int, t0: int, seed: int = 0) -> int:
    """Write the hour's samples; returns the number of samples."""
    rng = random.Random(seed)
    lines: list[str] = []
    samples = 0
    families: dict[str, list[str]] = {
        "vllm:num_requests_running": [],
        "vllm:num_requests_waiting": [],
        "vllm:kv_cache_usage_perc": [],
        "vllm:prompt_tokens": [],
        "vllm:generation_tokens": [],
        **{h: [] for h in HISTOGRAMS},
    }
    counts = {(p, h): [0] * (len(BUCKETS) + 1) for p in range(pods) for h in HISTOGRAMS}
    sums = {(p, h): 0.0 for p in range(pods) for h in HISTOGRAMS}
    tokens = {p: [0, 0] for p in range(pods)}
    for step in range(HOUR_S // SCRAPE_S + 1):
        t = t0 + step * SCRAPE_S
        for p in range(pods):
            lab = f'namespace="llm",pod="vllm-{p}",model_name="llama"'
            families["vllm:num_requests_running"].append(
                f"vllm:num_requests_running{{{lab}}} {rng.randint(0, 64)} {t}"
            )
            families["vllm:num_requests_waiting"].append(
                f"vllm:num_requests_waiting{{{lab}}} {rng.randint(0, 20)} {t}"
            )
            families["vllm:kv_cache_usage_perc"].append(
                f"vllm:kv_cache_usage_perc{{{lab}}} {rng.random():.3f} {t}"
            )
            tokens[p][0] += rng.randint(10_000, 20_000)
            tokens[p][1] += rng.randint(2_000, 4_000)
            families["vllm:prompt_tokens"].append(
                f"vllm:prompt_tokens_total{{{lab}}} {tokens[p][0]} {t}"
            )
            families["vllm:generation_tokens"].append(
                f"vllm:generation_tokens_total{{{lab}}} {tokens[p][1]} {t}"
            )
            for h in HISTOGRAMS:
                c = counts[(p, h)]
                for _ in range(rng.randint(5, 15)):
                    v = rng.lognormvariate(-1.0, 0.8)
                    sums[(p, h)] += v
                    i = next((k for k, b in enumerate(BUCKETS) if v <= b), len(BUCKETS))
                    c[i] += 1
                cum = 0
                for k, b in enumerate(BUCKETS):
                    cum += c[k]
                    families[h].append(f'{h}_bucket{{{lab},le="{b}"}} {cum} {t}')
                families[h].append(f'{h}_bucket{{{lab},le="+Inf"}} {sum(c)} {t}')
                families[h].append(f"{h}_sum{{{lab}}} {sums[(p, h)]:.3f} {t}")
                families[h].append(f"{h}_count{{{lab}}} {sum(c)} {t}")
    for name, rows in families.items():
        kind = "histogram" if name in HISTOGRAMS else "counter" if "tokens" in name else "gauge"
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(rows)
        samples += len(rows)
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")
    return samples


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _curl_all(url: str, start: float, end: float) -> int:
    step = step_for(start, end)
    n = 0
    for spec in CATALOG:
        params = urllib.parse.urlencode(
            {"query": query_for(spec, "llm"), "start": start, "end": end, "step": step}
        )
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=60) as r:
            n += len(json.load(r)["data"]["result"])
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=8)
    args = ap.parse_args()
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt-get install -y prometheus")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        t0 = (int(time.time()) - 3 * HOUR_S) // HOUR_S * HOUR_S
        samples = openmetrics(tmp / "data.om", args.pods, t0)
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", str(tmp / "data.om"),
             str(tmp / "tsdb")],
            check=True,
        )  # fmt: skip
        (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
        port = _free_port()
        prom = subprocess.Popen(
            ["prometheus", f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
             "--log.level=error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if _curl_all(url, t0, t0 + HOUR_S):
                        break
                except OSError:
                    pass
                time.sleep(0.2)
            t = time.perf_counter()
            series = _curl_all(url, t0, t0 + HOUR_S)
            ref = time.perf_counter() - t
            env = dict(os.environ, PYTHONPATH=SRC)
            t = time.perf_counter()
            run = subprocess.run(
                [sys.executable, "-m", "tailtriage", "collect", "--since", str(t0), "--until",
                 str(t0 + HOUR_S), "-n", "llm", "--prometheus", url, "--no-kubernetes",
                 "--out", str(tmp / "bundle")],
                env=env, capture_output=True, text=True,
            )  # fmt: skip
            got = time.perf_counter() - t
            if run.returncode != 0:
                raise SystemExit(run.stderr)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tailtriage", "version"], env=env, check=True,
                           capture_output=True)  # fmt: skip
            startup = time.perf_counter() - t
        finally:
            prom.terminate()
            prom.wait(30)
        size = sum(p.stat().st_size for p in (tmp / "bundle").rglob("*") if p.is_file())
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"1-hour window, {args.pods} pods, {samples} samples backfilled; {series} series")
    print(f"curl-style query_range loop : {ref:6.2f} s (reference)")
    print(f"tailtriage collect (process): {got:6.2f} s, bundle {size / 1e6:.1f} MB")
    print(f"  of which process start-up (tailtriage version): {startup:.2f} s")
    print(
        f"ratio collect/reference: {got / ref:.2f}x; without start-up {(got - startup) / ref:.2f}x"
    )


if __name__ == "__main__":
    main()
