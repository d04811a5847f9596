"""`tailtriage bench URL --model M ...` and `tailtriage serve-sim ...` (design 3.4, issue 6)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tailtriage.cli._app import app
from tailtriage.cli._options import slos_from
from tailtriage.errors import ConfigError
from tailtriage.outputs import check_output_folder, check_outputs, write_bytes

if TYPE_CHECKING:
    import ssl

    from tailtriage.loadgen.config import LoadConfig
    from tailtriage.loadgen.run import RunResult
    from tailtriage.loadgen.server.sim import SimSettings

console = Console(highlight=False, soft_wrap=True, stderr=False)

_API_KEY_ENV = ("TAILTRIAGE_API_KEY", "OPENAI_API_KEY")


def _api_key() -> str | None:
    for name in _API_KEY_ENV:
        v = os.environ.get(name)
        if v:
            return v
    return None


@app.command()
def bench(
    url: Annotated[
        str,
        typer.Argument(help="Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000"),
    ],
    model: Annotated[str, typer.Option("--model", help="Model name sent in every request.")],
    rate: Annotated[float | None, typer.Option(help="Open loop: requests per second.")] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Closed loop: requests in flight.")
    ] = None,
    duration: Annotated[
        str | None, typer.Option(help="Measured duration after warm-up: 30s, 2m.")
    ] = None,
    requests: Annotated[int | None, typer.Option(help="Measured requests after warm-up.")] = None,
    slo: Annotated[
        str | None, typer.Option(help='SLOs for goodput, e.g. "p95 ttft < 500ms, p99 itl < 50ms".')
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output folder: records (written as the run goes), capture.duckdb, summary.json."
        ),
    ] = None,
    arrival: Annotated[
        str, typer.Option(help="Open-loop process: constant, poisson, gamma.")
    ] = "poisson",
    burstiness: Annotated[
        float, typer.Option(help="Gamma shape (1 = Poisson, larger = smoother).")
    ] = 1.0,
    steps: Annotated[
        str | None, typer.Option(help='Step schedule RATExDURATION,...: "10x30s,20x30s".')
    ] = None,
    ramp: Annotated[str | None, typer.Option(help='Ramp FROM:TO:DURATION: "1:50:60s".')] = None,
    replay: Annotated[
        Path | None, typer.Option(help="Replay a JSONL trace of timestamps and lengths.")
    ] = None,
    warmup: Annotated[str, typer.Option(help="Warm-up excluded from results: 5s.")] = "0s",
    warmup_requests: Annotated[
        int, typer.Option(help="Warm-up requests excluded from results.")
    ] = 0,
    input_len: Annotated[
        str, typer.Option(help="Prompt tokens: N, uniform:A:B, normal:M:S, lognormal:MED:SIGMA.")
    ] = "128",
    output_len: Annotated[str, typer.Option(help="Output tokens (max_tokens): same forms.")] = "64",
    prompts: Annotated[
        Path | None, typer.Option(help='JSONL prompts: {"prompt": ...} or {"messages": [...]}.')
    ] = None,
    endpoint: Annotated[str, typer.Option(help="chat or completions.")] = "chat",
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream with SSE.")] = True,
    continuous_usage: Annotated[
        bool, typer.Option(help="Ask vLLM for usage on every chunk (exact tokens per chunk).")
    ] = False,
    workers: Annotated[int, typer.Option(help="Client processes (one event loop each).")] = 1,
    max_in_flight: Annotated[
        int, typer.Option(help="Open-loop cap on requests in flight.")
    ] = 100_000,
    timeout: Annotated[float, typer.Option(help="Total timeout per request (s).")] = 600.0,
    connect_timeout: Annotated[float, typer.Option(help="Connect timeout (s).")] = 10.0,
    first_byte_timeout: Annotated[
        float, typer.Option(help="Request sent -> response headers (s).")
    ] = 60.0,
    idle_timeout: Annotated[
        float, typer.Option(help="Longest silence inside a stream (s).")
    ] = 30.0,
    drain: Annotated[
        float | None,
        typer.Option(
            help="After the run, wait this long for requests in flight (s); default the total timeout."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of arrivals, prompts and trace ids.")] = 0,
    otlp_out: Annotated[
        Path | None, typer.Option(help="Also write the client spans as OTLP/JSON lines.")
    ] = None,
    json: Annotated[Path | None, typer.Option("--json", help="Write the summary as JSON.")] = None,
    find_max_rate: Annotated[
        bool, typer.Option(help="Search the highest rate meeting every --slo.")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No live progress bar.")] = False,
    insecure: Annotated[
        bool, typer.Option(help="https: do not verify the server's certificate (self-signed).")
    ] = False,
    ca_bundle: Annotated[
        Path | None, typer.Option(help="https: PEM file of CAs to trust instead of the system's.")
    ] = None,
) -> None:
    """Drive an OpenAI-compatible endpoint and measure TTFT, ITL, TPOT and goodput from the client.

    The API key is read from TAILTRIAGE_API_KEY or OPENAI_API_KEY and is never written anywhere."""
    from tailtriage.loadgen.config import LoadConfig
    from tailtriage.loadgen.runner import Timeouts
    from tailtriage.loadgen.schedule import parse_duration

    cfg = LoadConfig(
        url=url, model=model, endpoint=endpoint, stream=stream, rate=rate, arrival=arrival,
        burstiness=burstiness, steps=steps, ramp=ramp, concurrency=concurrency, replay=replay,
        duration=parse_duration(duration) if duration else None, requests=requests,
        warmup=parse_duration(warmup) if warmup not in ("0", "0s", "") else 0.0,
        warmup_requests=warmup_requests, input_len=input_len, output_len=output_len,
        prompts_file=prompts, max_in_flight=max_in_flight, drain=drain,
        timeouts=Timeouts(connect_timeout, first_byte_timeout, idle_timeout, timeout),
        workers=workers, seed=seed, continuous_usage=continuous_usage,
        slos=slos_from(slo) if slo else (), api_key=_api_key(), insecure=insecure,
        ca_bundle=ca_bundle,
    )  # fmt: skip
    check_outputs(inputs=[replay, prompts, ca_bundle], outputs=[json, otlp_out])
    check_output_folder(out, inputs=[replay, prompts, ca_bundle, json, otlp_out])
    if find_max_rate:
        _search(cfg, out, quiet)
        return
    try:
        result = _run_with_progress(cfg, out, quiet, otlp_out)
    except KeyboardInterrupt:
        if out is None:
            raise
        from tailtriage.loadgen.run import finalize

        # what was measured up to Ctrl-C is on disk: finish the capture and summary from it
        console.print("[yellow]interrupted:[/] finishing the capture from the records so far")
        _print_summary(finalize(out, cfg).summary.to_dict(), out)
        raise typer.Exit(130) from None
    _print_summary(result.summary.to_dict(), out)
    _print_error_examples(result)
    if json is not None:
        write_bytes(json, orjson.dumps(result.summary.to_dict(), option=orjson.OPT_INDENT_2))


def _run_with_progress(
    cfg: LoadConfig, out: Path | None, quiet: bool, otlp_out: Path | None = None
) -> RunResult:
    from tailtriage.loadgen.run import run_load
    from tailtriage.loadgen.runner import Progress as Snap

    if quiet:
        return run_load(cfg, out, otlp_out=otlp_out)
    total = cfg.requests + cfg.warmup_requests if cfg.requests else None
    horizon = cfg.duration + cfg.warmup if cfg.duration else None
    progress = Progress(
        TextColumn("[bold]bench[/]"), BarColumn(), TextColumn("{task.description}"),
        TimeElapsedColumn(), console=console, auto_refresh=False, transient=False,
    )  # fmt: skip
    task = progress.add_task("starting", total=100.0)
    import time

    t0 = time.monotonic()

    def update(snaps: Sequence[Snap]) -> None:
        done = sum(s.done for s in snaps)
        errors = sum(s.errors for s in snaps)
        inflight = sum(s.in_flight for s in snaps)
        elapsed = max(time.monotonic() - t0, 1e-9)
        ttft = _p95([v for s in snaps for v in s.ttft])
        itl = _p95([v for s in snaps for v in s.itl])
        frac = 0.0
        if total:
            frac = done / total
        if horizon:
            frac = max(frac, min(1.0, elapsed / horizon))
        progress.update(
            task,
            completed=100.0 * min(frac, 1.0),
            description=(
                f"{done} done, {errors} errors, {inflight} in flight | {done / elapsed:.1f} req/s | "
                f"p95 TTFT {ttft} ITL {itl}"
            ),
        )
        progress.refresh()

    with progress:
        return run_load(cfg, out, update, otlp_out=otlp_out)


def _p95(values: list[float]) -> str:
    if not values:
        return "-"
    import numpy as np

    return f"{float(np.percentile(values, 95)) * 1e3:.1f} ms"


def _fmt(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f}"


def _print_error_examples(result: RunResult) -> None:
    """The first failure of each error class, so a count comes with its reason (an untrusted
    certificate, a refused port, an HTTP 429 body)."""
    seen: set[str] = set()
    for r in result.records:
        if r.error is not None and r.error not in seen and not r.warmup:
            seen.add(r.error)
            console.print(f"first {r.error} error: {(r.error_detail or '')[:200]}", markup=False)


def _print_summary(d: dict[str, Any], out: Path | None) -> None:
    table = Table(title="Latency (ms)", show_edge=False)
    for col in ("metric", "count", "p50", "p90", "p95", "p99", "mean"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    metrics = d["metrics"]
    for name in ("ttft", "itl", "tpot", "e2e"):
        m = metrics[name]
        table.add_row(
            name.upper(), str(m["count"]), _fmt(m.get("p50_ms")), _fmt(m.get("p90_ms")),
            _fmt(m.get("p95_ms")), _fmt(m.get("p99_ms")), _fmt(m.get("mean_ms")),
        )  # fmt: skip
    console.print(table)
    console.print(
        f"requests {d['requests']} (ok {d['ok']}, errors {d['errors'] or 'none'}), "
        f"{d['request_rate']:.2f} req/s, {d['output_token_rate']:.1f} output tok/s over "
        f"{d['duration_s']:.1f} s; warm-up excluded: {d['warmup_excluded']}"
    )
    slos = d["slos"]
    for s in slos:
        mark = "[green]met[/]" if s["met"] else "[red]missed[/]"
        console.print(
            f"SLO p{s['percentile']:g} {s['metric']} < {s['threshold_ms']:g} ms: "
            f"observed {_fmt(s['observed_ms'])} ms {mark}"
        )
    if slos:
        console.print(f"goodput {d['goodput']:.2f} req/s ({d['good_requests']} good requests)")
    checks = d["self_checks"]
    console.print(
        f"client: {checks.get('client_cores', 0):.2f} cores, loop lag p99 "
        f"{checks.get('loop_lag_p99_ms', 0):.1f} ms, late sends {checks.get('late_sends', 0)}, "
        f"coalesced chunks {checks.get('coalesced_chunks', 0)}"
    )
    warnings = d["warnings"]
    for w in warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    if out is not None:
        console.print(f"results in {out}/ (capture.duckdb, summary.json, requests.w*.jsonl)")


def _search(cfg: LoadConfig, out: Path | None, quiet: bool) -> None:
    from tailtriage.loadgen.results import Summary
    from tailtriage.loadgen.run import run_load
    from tailtriage.loadgen.search import Trial, find_max_rate

    if cfg.duration is None:
        raise ConfigError("--find-max-rate needs --duration (the length of each trial)")
    n = 0

    def run(c: LoadConfig) -> Summary:
        nonlocal n
        n += 1
        sub = out / f"trial{n:02d}" if out is not None else None
        return run_load(c, sub).summary

    def show(t: Trial) -> None:
        obs = ", ".join(
            f"p{o.spec.percentile:g} {o.spec.metric} {o.observed * 1e3:.1f} ms"
            for o in t.summary.slos
        )
        mark = "[green]pass[/]" if t.passed else "[red]fail[/]"
        console.print(
            f"rate {t.rate:8.2f} req/s: {mark} ({obs}; ok {t.summary.ok}/{t.summary.requests})"
        )

    start = cfg.rate or 1.0
    res = find_max_rate(replace(cfg, rate=start), run, start_rate=start, on_trial=show)
    if res.best_rate is None:
        console.print(f"no rate meets the SLOs (even {start:g} req/s failed)")
    else:
        console.print(f"highest rate meeting the SLOs: [bold]{res.best_rate:.2f} req/s[/]")


@app.command("serve-sim")
def serve_sim(
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    host: Annotated[
        str, typer.Option(help="Bind address (loopback unless told otherwise).")
    ] = "127.0.0.1",
    scenario: Annotated[
        str | None,
        typer.Option(
            help="Scenario YAML or built-in name whose model/gpu/engine sections set the engine."
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="sim (simulator engine model) or fast (fixed TTFT/ITL step grid, minimal CPU)."
        ),
    ] = "sim",
    model: Annotated[str, typer.Option(help="Served model name.")] = "sim",
    shape: Annotated[
        str, typer.Option(help="Model shape for the step-time model.")
    ] = "llama-3.1-8b",
    gpu: Annotated[str, typer.Option(help="GPU for the step-time model.")] = "H100",
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    max_num_batched_tokens: Annotated[
        int, typer.Option(help="Engine token budget per step.")
    ] = 2048,
    max_num_seqs: Annotated[int, typer.Option(help="Engine batch size cap.")] = 256,
    kv_blocks: Annotated[int, typer.Option(help="KV-cache blocks (0: sized from GPU memory).")] = 0,
    ttft_ms: Annotated[float, typer.Option(help="fast engine: time to first token.")] = 80.0,
    itl_ms: Annotated[
        float, typer.Option(help="fast engine: step period (inter-token latency).")
    ] = 20.0,
    otlp_out: Annotated[
        Path | None, typer.Option(help="Write server spans (vLLM conventions) as OTLP/JSON lines.")
    ] = None,
    send_log: Annotated[
        Path | None, typer.Option(help="Log each token's real send time (JSON lines).")
    ] = None,
    port_file: Annotated[
        Path | None, typer.Option(help="Write the bound port to this file once listening.")
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option(help="fast engine: serve https with this PEM certificate chain.")
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option(help="fast engine: the certificate's PEM private key.")
    ] = None,
    eval_file: Annotated[
        Path | None,
        typer.Option(
            "--eval",
            help="sim engine: answer this evaluation set's prompts (JSONL, "
            "as `tailtriage quantgate --eval` reads it).",
        ),
    ] = None,
    eval_error_rate: Annotated[
        float, typer.Option(help="With --eval: share of items answered wrongly.")
    ] = 0.0,
    eval_seed: Annotated[
        int, typer.Option(help="With --eval: which items are wrong (fixed per seed).")
    ] = 0,
) -> None:
    """A simulated OpenAI-compatible engine server with vLLM-compatible /metrics and OTLP spans.

    With `--eval FILE` it answers the evaluation set's prompts, wrong for a fixed share of the
    items, so `tailtriage quantgate` can be tried end to end: e.g. a baseline with
    `--eval-error-rate 0.05 --eval-seed 1` and a candidate with `--eval-error-rate 0.12
    --eval-seed 2`."""
    from tailtriage.loadgen.server.sim import SimSettings

    if engine not in ("sim", "fast"):
        raise ConfigError("--engine must be sim or fast")
    check_outputs(
        inputs=[tls_cert, tls_key, scenario if scenario and Path(scenario).is_file() else None],
        outputs=[otlp_out, send_log, port_file],
    )
    settings = SimSettings(
        served_model=model, shape=shape, gpu=gpu, tp=tp,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        kv_blocks=kv_blocks, otlp_out=otlp_out, send_log=send_log, eval_file=eval_file,
        eval_error_rate=eval_error_rate, eval_seed=eval_seed,
    )  # fmt: skip
    if eval_file is not None and engine != "sim":
        raise ConfigError("--eval is supported with --engine sim only")
    if scenario is not None:
        settings = _from_scenario(settings, scenario)
    tls = _server_tls(tls_cert, tls_key, engine)
    from tailtriage.loadgen.run import new_event_loop

    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=new_event_loop) as r:
        r.run(_serve(settings, engine, host, port, ttft_ms / 1e3, itl_ms / 1e3, port_file, tls))


def _server_tls(cert: Path | None, key: Path | None, engine: str) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None:
        raise ConfigError("--tls-key needs --tls-cert")
    if engine != "fast":
        raise ConfigError("--tls-cert is supported with --engine fast only")
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{cert}: cannot load the TLS certificate/key: {exc}") from exc
    return ctx


def _from_scenario(settings: SimSettings, path: str) -> SimSettings:
    from tailtriage.simulator.catalog import resolve_scenario

    sc = resolve_scenario(path)  # a YAML file or a built-in name (tailtriage simulate --list)
    return replace(
        settings,
        shape=sc.model.name,
        gpu=sc.gpu.type,
        tp=sc.gpu.tp,
        max_num_batched_tokens=sc.engine.max_num_batched_tokens,
        max_num_seqs=sc.engine.max_num_seqs,
        kv_blocks=sc.engine.num_gpu_blocks or settings.kv_blocks,
        seed=sc.seed,
    )


async def _serve(
    settings: SimSettings, engine: str, host: str, port: int, ttft: float, itl: float,
    port_file: Path | None, tls: ssl.SSLContext | None = None,
) -> None:  # fmt: skip
    from tailtriage.loadgen.server.fast import FastSSEServer
    from tailtriage.loadgen.server.sim import serving

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if engine == "fast":
        srv = FastSSEServer(host, port, ttft=ttft, itl=itl, model=settings.served_model,
                            send_log=settings.send_log, otlp_out=settings.otlp_out,
                            ssl=tls)  # fmt: skip
        await srv.start()
        _announce(host, srv.port, "fast", port_file, tls is not None)
        await stop.wait()
        await srv.stop()
        return
    async with serving(settings, host, port) as bound:
        _announce(host, bound, "sim", port_file)
        await stop.wait()


def _announce(host: str, port: int, engine: str, port_file: Path | None, tls: bool = False) -> None:
    if port_file is not None:
        port_file.write_text(str(port))
    scheme = "https" if tls else "http"
    console.print(
        f"serve-sim ({engine}) listening on {scheme}://{host}:{port} (/v1, /metrics); Ctrl-C stops"
    )
