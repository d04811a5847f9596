"""Benchmark: the load generator against a server that logs its real send times.

    python bench/loadgen.py [--concurrency 50,500] [--duration 20] [--tokens 32] [--workers 1]
                            [--ttft-ms 80] [--peers aiperf,guidellm,inference-perf] [--json OUT]

The server is ``tailtriage serve-sim --engine fast`` in its own process: TTFT 80 ms, then one
token every 20 ms on a global step grid (the reference server of
``shared/reference/loadgen-peer-measurements.md``), logging the send time of every token.
For each concurrency, the client runs closed loop for ``--duration`` seconds after a 2 s
warm-up, and the table compares what it measured with what the server really did, the same
way the peer measurements were taken:

* srv req/s and tok/s: server sends inside the steady window (first recv + 2 s to last send
  - 2 s); srv streams: time-weighted mean and max of requests in flight (recv -> last send);
* TTFT and ITL error: tool percentile - server percentile (the peers' method), and the p99 of
  the per-request / per-gap paired error |client - server|, which is stricter;
* client cores: the client's CPU seconds / wall seconds (worker processes included);
* closed-loop ceiling (and srv req/s by cycles, ``c`` / the mean per-connection cycle, which
  does not depend on where the window cuts the waves of requests): the most req/s ``c`` users can get from this server whatever the
  client does.  A user's next request reaches the server after the step that carried its
  last token, so its first token comes ``floor(TTFT / ITL) + 1`` steps later and its last
  ``tokens - 1`` steps after that: 36 steps (720 ms) per request for 32 tokens, 694 req/s at
  c=500.  The turnaround (a user's last token sent -> its next request received, from the
  send log's connection numbers) only moves the server's TTFT inside that cycle, unless it
  pushes the request past the next step (a 37-step cycle, counted).

``--peers`` runs the peer tools installed in throwaway venvs under ``/tmp/peers/<tool>``
against the same server (skipped with a note when a venv is missing).  Figures depend on the
machine and on what else runs on it: report them as measured, side by side, in one run."""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
PEERS = Path(os.environ.get("PEERS", "/tmp/peers"))
TTFT_MS, ITL_MS = 80, 20


# -- server -----------------------------------------------------------------------------------
class Server:
    def __init__(self, log: Path) -> None:
        self.log = log
        port_file = log.with_suffix(".port")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tailtriage", "serve-sim", "--engine", "fast", "--port", "0",
             "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--send-log", str(log),
             "--port-file", str(port_file), "--model", "ref"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # its own session, so its own scheduler autogroup: on a shared Linux box the server
            # does not eat into the client's CPU share (they would be two machines in real use)
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("serve-sim did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self._cpu0 = self._cpu()
        self._t0 = time.monotonic()

    def _cpu(self) -> float:
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return 0.0

    def cpu(self) -> float:
        """Cores the server used since it started (CPU seconds / wall seconds)."""
        return (self._cpu() - self._cpu0) / max(time.monotonic() - self._t0, 1e-9)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def closed_loop_ceiling(c: int, ttft_ms: int, itl_ms: int, tokens: int) -> float:
    """Requests/s of ``c`` closed-loop users against the step-grid server (see the module doc)."""
    steps = ttft_ms // itl_ms + 1 + tokens - 1
    return c / (steps * itl_ms / 1e3)


def turnarounds(rows: list[dict[str, Any]], lo: float, hi: float) -> tuple[Any, Any]:
    """Per connection, consecutive requests finishing inside ``[lo, hi)``: the turnaround
    (next recv - last send, s) and the cycle in grid steps (last send to last send)."""
    by: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if "conn" in r:
            by.setdefault(r["conn"], []).append(r)
    gap, steps = [], []
    for rs in by.values():
        rs.sort(key=lambda r: r["recv"])
        for a, b in itertools.pairwise(rs):
            if a["sends"][-1] >= lo and b["sends"][-1] < hi:
                gap.append(b["recv"] - a["sends"][-1])
                steps.append(round((b["sends"][-1] - a["sends"][-1]) * 1e3 / ITL_MS))
    return np.asarray(gap), np.asarray(steps, dtype=int)


def server_view(log: Path) -> dict[str, Any]:
    """Steady-window throughput, streams in flight, TTFT and per-gap ITL from the send log."""
    rows = [orjson.loads(line) for line in log.read_bytes().splitlines() if line.strip()]
    rows = [r for r in rows if r["sends"]]
    recv = np.array([r["recv"] for r in rows])
    last = np.array([r["sends"][-1] for r in rows])
    lo, hi = recv.min() + 2.0, last.max() - 2.0
    sends = np.concatenate([np.asarray(r["sends"]) for r in rows])
    in_win = (sends >= lo) & (sends < hi)
    span = max(hi - lo, 1e-9)
    # time-weighted streams in flight inside the window
    grid = np.linspace(lo, hi, 2000)
    starts, ends = np.sort(recv), np.sort(last)
    flight = np.searchsorted(starts, grid, side="right") - np.searchsorted(ends, grid, side="right")
    ttft = np.array([r["sends"][0] - r["recv"] for r in rows])
    itl = np.concatenate([np.diff(r["sends"]) for r in rows if len(r["sends"]) > 1])
    gap, steps = turnarounds(rows, lo, hi)
    return {
        "turnaround": gap,
        "cycle_steps": steps,
        "by_id": {r["request_id"]: r for r in rows},
        "tok_s": float(in_win.sum() / span),
        "streams_mean": float(flight.mean()),
        "streams_max": int(flight.max()),
        "ttft": ttft,
        "itl": itl,
        # how long the server process took to parse a request after its bytes arrived (its
        # own scheduling delay; the server's recv is the kernel stamp, so TTFT excludes none)
        "parse_lag": np.array([r.get("parsed", r["recv"]) - r["recv"] for r in rows]),
    }


# -- tailtriage ---------------------------------------------------------------------------------
def run_tailtriage(port: int, c: int, duration: float, tokens: int, workers: int) -> dict[str, Any]:
    from tailtriage.loadgen import LoadConfig, run_load

    cfg = LoadConfig(
        url=f"http://127.0.0.1:{port}", model="ref", concurrency=c, duration=duration,
        warmup=2.0, input_len="16", output_len=str(tokens), workers=workers, drain=10.0,
    )  # fmt: skip
    cpu0 = time.process_time()
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        res = run_load(cfg, Path(tmp) / "out" if workers > 1 else None)
    wall = time.monotonic() - t0
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - cpu0 + (ch1.ru_utime - ch0.ru_utime) + (ch1.ru_stime - ch0.ru_stime)
    ok = [r for r in res.records if r.status == "ok" and not r.warmup]
    return {
        "records": ok,
        "req_s": res.summary.request_rate,
        "tok_s": res.summary.output_token_rate,
        "ttft": np.array([r.ttft for r in ok]),
        "itl": np.array([g for r in ok for g in r.gaps]),
        "cores": cpu / wall,
        "errors": res.summary.errors,
        "checks": res.summary.self_checks,
    }


def paired_errors(tool: dict[str, Any], srv: dict[str, Any]) -> dict[str, float]:
    """Paired client - server errors, in ms.

    ``ttft``/``itl``: p99 of |client - server| per request (TTFT) and per gap (ITL).  The TTFT
    error splits exactly into (a) request delivery, server recv - client send (how late the
    server saw the request), and (b) token delivery, client first-token arrival - server first
    send; both processes stamp the same host clock.  ``req_*``/``tok_*`` are their p50/p99."""
    ttft_err, gap_err, req, tok = [], [], [], []
    for r in tool["records"]:
        s = srv["by_id"].get(r.request_id)
        if s is None or len(s["sends"]) != len(r.chunks):
            continue
        ttft_err.append(abs(r.ttft - (s["sends"][0] - s["recv"])))
        gap_err.extend(np.abs(np.asarray(r.gaps) - np.diff(s["sends"])))
        req.append(s["recv"] - r.send)
        tok.append(r.first_token - s["sends"][0])
    out = {"ttft": float(np.percentile(ttft_err, 99)), "itl": float(np.percentile(gap_err, 99))}
    for name, v in (("req", req), ("tok", tok)):
        for p in (50, 99):
            out[f"{name}_p{p}"] = float(np.percentile(v, p))
    return {k: v * 1e3 for k, v in out.items()}


# -- peers ----------------------------------------------------------------------------------------
def _tokenizer(venv: Path) -> Path | None:
    """A local word-level tokenizer (each " tok" is one token), as in the peer measurements."""
    tok = PEERS / "tok"
    if (tok / "tokenizer.json").exists():
        return tok
    code = (
        "import sys\nfrom tokenizers import Tokenizer, models, pre_tokenizers\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "vocab = {'[UNK]': 0, **{w: i + 1 for i, w in enumerate(['tok'] + [f'w{j}' for j in range(20000)])}}\n"
        "t = Tokenizer(models.WordLevel(vocab, unk_token='[UNK]'))\n"
        "t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()\n"
        "PreTrainedTokenizerFast(tokenizer_object=t, unk_token='[UNK]').save_pretrained(sys.argv[1])\n"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, str(tok)], capture_output=True, check=False
    )
    return tok if done.returncode == 0 else None


def run_peer(tool: str, port: int, c: int, duration: float, run_dir: Path) -> dict[str, Any] | None:
    venv = PEERS / tool
    if not (venv / "bin").exists():
        return None
    tok = _tokenizer(venv)
    if tok is None:
        return None
    out = run_dir / tool
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    url = f"http://127.0.0.1:{port}"
    if tool == "aiperf":
        env.pop("HF_HUB_OFFLINE", None)
        cmd = [str(venv / "bin" / "aiperf"), "profile", "--model", "ref", "--url", url,
               "--endpoint-type", "chat", "--streaming", "--tokenizer", str(tok),
               "--concurrency", str(c), "--benchmark-duration", str(int(duration)), "--isl", "16",
               "--osl", "32", "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry",
               "--output-artifact-dir", str(out)]  # fmt: skip
    elif tool == "guidellm":
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        cmd = [str(venv / "bin" / "guidellm"), "run", "--backend",
               f"kind=openai_http,target={url},model=ref,request_format=/v1/chat/completions,validate_backend=false",
               "--profile", f"kind=concurrent,streams={c}", "--constraint",
               f"kind=max_duration,seconds={int(duration)}", "--data",
               "kind=synthetic_text,prompt_tokens=16,output_tokens=32", "--tokenizer",
               f"kind=huggingface_auto,model={tok}", "--output",
               f"kind=json,path={out}/benchmarks.json", "--disable-console-interactive"]  # fmt: skip
    else:
        env["HF_HUB_OFFLINE"] = "1"
        n = int(c * duration / 0.68)
        cfgf = out / "config.yaml"
        cfgf.write_text(
            f"api: {{type: chat, streaming: true}}\ndata: {{type: mock}}\n"
            f"load: {{type: concurrent, stages: [{{num_requests: {n}, concurrency_level: {c}}}], "
            f"worker_max_concurrency: {c}}}\n"
            f'server: {{type: vllm, model_name: ref, base_url: "{url}", ignore_eos: true}}\n'
            f"tokenizer: {{pretrained_model_name_or_path: {tok}}}\n"
            f"storage: {{local_storage: {{path: {out}}}}}\n"
        )
        cmd = [str(venv / "bin" / "inference-perf"), "-c", str(cfgf)]
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        subprocess.run(cmd, env=env, capture_output=True, timeout=duration * 4 + 120, check=False)
    except subprocess.TimeoutExpired:
        return {"note": "timed out"}
    wall = time.monotonic() - t0
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ch1.ru_utime - ch0.ru_utime) + (ch1.ru_stime - ch0.ru_stime)
    return {"cores": cpu / wall, "reported": _peer_report(tool, out), "note": ""}


def _find(obj: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in a JSON document."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            found = _find(v, key)
            if found is not None:
                return found
    return None


def _pct(d: Any, p: str) -> float | None:
    """p50/p99 from a percentile mapping, whatever its key spelling (seconds or ms given)."""
    if not isinstance(d, dict):
        return None
    for k in (["median", "p50", "p50.0", "50"]) if p == "50" else (["p99", "p99.0", "99"]):
        if k in d and isinstance(d[k], int | float):
            return float(d[k])
    return None


def _peer_report(tool: str, out: Path) -> dict[str, float | None]:
    """TTFT/ITL p50/p99 (ms) and req/s as the peer itself reported them."""
    try:
        if tool == "inference-perf":
            doc = orjson.loads((out / "stage_0_lifecycle_metrics.json").read_bytes())["successes"]
            lat = doc["latency"]
            return {
                "req_s": doc["throughput"]["requests_per_sec"],
                **{f"ttft_p{p}_ms": (_pct(lat["time_to_first_token"], p) or 0) * 1e3 for p in ("50", "99")},
                **{f"itl_p{p}_ms": (_pct(lat["inter_token_latency"], p) or 0) * 1e3 for p in ("50", "99")},
            }  # fmt: skip
        if tool == "guidellm":
            doc = orjson.loads((out / "benchmarks.json").read_bytes())
            ttft = _find(_find(doc, "time_to_first_token_ms"), "successful")
            itl = _find(_find(doc, "inter_token_latency_ms"), "successful")
            rps = _find(_find(doc, "requests_per_second"), "successful")
            return {
                "req_s": rps.get("mean") if isinstance(rps, dict) else None,
                **{f"ttft_p{p}_ms": _pct(_find(ttft, "percentiles"), p) for p in ("50", "99")},
                **{f"itl_p{p}_ms": _pct(_find(itl, "percentiles"), p) for p in ("50", "99")},
            }
        if tool == "aiperf":
            doc = orjson.loads(next(out.rglob("profile_export_aiperf.json")).read_bytes())
            ttft, icl = _find(doc, "time_to_first_token"), _find(doc, "inter_chunk_latency")
            thr = _find(doc, "request_throughput")
            return {
                "req_s": thr.get("avg") if isinstance(thr, dict) else None,
                **{f"ttft_p{p}_ms": _pct(ttft, p) for p in ("50", "99")},
                **{f"itl_p{p}_ms": _pct(icl, p) for p in ("50", "99")},
            }
    except (OSError, KeyError, StopIteration, orjson.JSONDecodeError, TypeError):
        pass
    return {}


# -- report ---------------------------------------------------------------------------------------
def _ms(v: float) -> str:
    return f"{v * 1e3:.1f}"


def row(
    name: str, c: int, tool: dict[str, Any] | None, srv: dict[str, Any], tokens: int
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "tool": name, "c": c, "srv_req_s": srv["tok_s"] / tokens, "srv_tok_s": srv["tok_s"],
        "srv_streams_mean": srv["streams_mean"], "srv_streams_max": srv["streams_max"],
        "srv_ttft_p50_ms": float(np.percentile(srv["ttft"], 50)) * 1e3,
        "srv_ttft_p99_ms": float(np.percentile(srv["ttft"], 99)) * 1e3,
        "srv_itl_p50_ms": float(np.percentile(srv["itl"], 50)) * 1e3,
        "srv_itl_p99_ms": float(np.percentile(srv["itl"], 99)) * 1e3,
        "srv_parse_lag_p99_ms": float(np.percentile(srv["parse_lag"], 99)) * 1e3,
        "ceiling_req_s": closed_loop_ceiling(c, TTFT_MS, ITL_MS, tokens),
    }  # fmt: skip
    gap, steps = srv["turnaround"], srv["cycle_steps"]
    if len(gap):
        least = int(steps.min())
        d.update(
            turnaround_p50_ms=float(np.percentile(gap, 50)) * 1e3,
            turnaround_p99_ms=float(np.percentile(gap, 99)) * 1e3,
            cycle_steps_min=least, cycles=len(steps),
            cycle_req_s=c / (float(steps.mean()) * ITL_MS / 1e3),
            cycles_longer=int((steps > least).sum()),
        )  # fmt: skip
    if tool is not None and "records" in tool:
        pe = paired_errors(tool, srv)
        d.update(
            tool_req_s=tool["req_s"], tool_tok_s=tool["tok_s"],
            ttft_p50_ms=float(np.percentile(tool["ttft"], 50)) * 1e3,
            ttft_p99_ms=float(np.percentile(tool["ttft"], 99)) * 1e3,
            itl_p50_ms=float(np.percentile(tool["itl"], 50)) * 1e3,
            itl_p99_ms=float(np.percentile(tool["itl"], 99)) * 1e3,
            paired_ttft_err_p99_ms=pe["ttft"], paired_itl_err_p99_ms=pe["itl"],
            req_delivery_p50_ms=pe["req_p50"], req_delivery_p99_ms=pe["req_p99"],
            tok_delivery_p50_ms=pe["tok_p50"], tok_delivery_p99_ms=pe["tok_p99"],
            client_cores=tool["cores"], errors=tool["errors"],
            loop_lag_p99_ms=tool["checks"].get("loop_lag_p99_ms"),
            coalesced_chunks=tool["checks"].get("coalesced_chunks"),
        )  # fmt: skip
    elif tool is not None:
        d.update(client_cores=tool.get("cores"), note=tool.get("note"))
        rep = tool.get("reported") or {}
        if rep.get("ttft_p50_ms") is not None:
            d.update(tool_req_s=rep.get("req_s") or float("nan"))
            for m in ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99"):
                d[f"{m}_ms"] = (
                    rep.get(f"{m}_ms") if rep.get(f"{m}_ms") is not None else float("nan")
                )
            d.update(paired_ttft_err_p99_ms=float("nan"), paired_itl_err_p99_ms=float("nan"))
    return d


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ("| tool | c | req/s tool (srv) | srv streams mean/max | TTFT p50 tool/srv (err) | "
            "TTFT p99 tool/srv (err) | ITL p50 tool/srv (err) | ITL p99 tool/srv (err) | "
            "paired err p99 TTFT / ITL | client cores |")  # fmt: skip
    print(head)
    print("|" + "---|" * 10)
    for d in rows:
        if "ttft_p50_ms" not in d:
            print(f"| {d['tool']} | {d['c']} | ({d['srv_req_s']:.1f}) | {d['srv_streams_mean']:.1f}/"
                  f"{d['srv_streams_max']} | srv {d['srv_ttft_p50_ms']:.1f} | srv "
                  f"{d['srv_ttft_p99_ms']:.1f} | srv {d['srv_itl_p50_ms']:.1f} | srv "
                  f"{d['srv_itl_p99_ms']:.1f} | {d.get('note', '')} | "
                  f"{d.get('client_cores') or 0:.2f} |")  # fmt: skip
            continue
        cells = [f"{d['tool']}", f"{d['c']}", f"{d['tool_req_s']:.1f} ({d['srv_req_s']:.1f})",
                 f"{d['srv_streams_mean']:.1f}/{d['srv_streams_max']}"]  # fmt: skip
        for m in ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99"):
            t, s = d[f"{m}_ms"], d[f"srv_{m}_ms"]
            cells.append(f"{t:.1f} / {s:.1f} ({t - s:+.1f})")
        cells.append(f"{d['paired_ttft_err_p99_ms']:.2f} / {d['paired_itl_err_p99_ms']:.2f} ms")
        cells.append(f"{d['client_cores']:.2f}")
        print("| " + " | ".join(cells) + " |")
    split = [d for d in rows if "req_delivery_p50_ms" in d]
    if split:
        print()
        print("| tool | c | TTFT error (a) request delivery p50/p99 | (b) token delivery p50/p99 "
              "| server parse lag p99 | client loop lag p99 | coalesced chunks | errors "
              "| server cores | load avg 1 min |")  # fmt: skip
        print("|" + "---|" * 10)
        for d in split:
            print(f"| {d['tool']} | {d['c']} | {d['req_delivery_p50_ms']:.3f} / "
                  f"{d['req_delivery_p99_ms']:.3f} ms | {d['tok_delivery_p50_ms']:.3f} / "
                  f"{d['tok_delivery_p99_ms']:.3f} ms | {d['srv_parse_lag_p99_ms']:.2f} ms | "
                  f"{d['loop_lag_p99_ms']:.1f} ms | "
                  f"{d['coalesced_chunks']} | {d['errors']} | {d['server_cores']:.2f} | "
                  f"{d['load_before']:.2f} -> {d['load_after']:.2f} |")  # fmt: skip
    cyc = [d for d in rows if "cycles" in d]
    if cyc:
        print()
        print("| tool | c | srv req/s (by cycles) | closed-loop ceiling | of ceiling | turnaround "
              "p50/p99 | cycles (steps) | longer cycles |")  # fmt: skip
        print("|" + "---|" * 8)
        for d in cyc:
            print(f"| {d['tool']} | {d['c']} | {d['srv_req_s']:.1f} ({d['cycle_req_s']:.1f}) | "
                  f"{d['ceiling_req_s']:.1f} | {d['srv_req_s'] / d['ceiling_req_s']:.1%} | "
                  f"{d['turnaround_p50_ms']:.2f} / "
                  f"{d['turnaround_p99_ms']:.2f} ms | {d['cycles']} (min {d['cycle_steps_min']}) | "
                  f"{d['cycles_longer']} ({d['cycles_longer'] / d['cycles']:.1%}) |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", default="50,500")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument(
        "--ttft-ms",
        type=int,
        default=TTFT_MS,
        help="the reference server's TTFT (80: the peers' reference; 70: a 35-step cycle, "
        "whose closed-loop ceiling at 500 streams is 714 req/s)",
    )
    ap.add_argument("--peers", default="")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    globals()["TTFT_MS"] = args.ttft_ms  # the server, the ceiling and the cycle count use it
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in (int(x) for x in args.concurrency.split(",")):
            for tool in ["tailtriage", *(t for t in args.peers.split(",") if t)]:
                log = Path(tmp) / f"{tool}-{c}.jsonl"
                load_before = os.getloadavg()[0]
                srv = Server(log)
                try:
                    if tool == "tailtriage":
                        res = run_tailtriage(srv.port, c, args.duration, args.tokens, args.workers)
                    else:
                        res = run_peer(tool, srv.port, c, args.duration, Path(tmp))
                        if res is None:
                            print(
                                f"{tool}: not installed under {PEERS}/{tool}; skipped",
                                file=sys.stderr,
                            )
                            continue
                finally:
                    srv_cpu = srv.cpu()
                    srv.stop()
                view = server_view(log)
                d = row(tool, c, res, view, args.tokens)
                d["server_cores"] = srv_cpu
                d["load_before"], d["load_after"] = load_before, os.getloadavg()[0]
                rows.append(d)
                print(f"done: {tool} c={c}", file=sys.stderr)
    print_table(rows)
    if args.json:
        args.json.write_bytes(
            orjson.dumps(rows, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
        )


if __name__ == "__main__":
    main()
