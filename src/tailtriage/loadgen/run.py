"""Running a load: one event loop, or several worker processes when one loop is not enough.

While the run goes, every worker appends its records to ``requests.w<N>.jsonl`` in the output
folder; at the end they are read back and turned into a Capture (``capture.duckdb``), a
summary (``summary.json``) and, on request, OTLP/JSON client spans.  A run that was killed
can be finished later with :func:`finalize`."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import queue as queue_mod
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from tailtriage.loadgen.config import LoadConfig
from tailtriage.loadgen.request import RequestRecord
from tailtriage.loadgen.results import (
    Summary,
    otlp_client_spans,
    read_records,
    redact_url,
    summarize,
    to_capture,
)
from tailtriage.loadgen.runner import Progress, Worker, WorkerStats
from tailtriage.loadgen.sink import RecordSink
from tailtriage.outputs import ensure_folder, write_bytes

ProgressFn = Callable[[Sequence[Progress]], None]

#: self-check thresholds behind the warnings
LATE_SHARE_WARN = 0.01
LAG_P99_WARN = 0.010
CPU_SHARE_WARN = 0.9
COALESCED_SHARE_WARN = 0.01


@dataclass(frozen=True)
class RunResult:
    records: tuple[RequestRecord, ...]
    workers: tuple[WorkerStats, ...]
    summary: Summary
    out_dir: Path | None = None
    capture_path: Path | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when uvloop is installed (optional), else asyncio's."""
    try:
        import uvloop  # type: ignore[import-not-found]  # optional

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    except ImportError:
        return asyncio.new_event_loop()


def run_load(
    config: LoadConfig,
    out_dir: Path | None = None,
    on_progress: ProgressFn | None = None,
    *,
    otlp_out: Path | None = None,
) -> RunResult:
    """Run ``config`` to its bounds and return what was measured (blocking)."""
    if out_dir is not None:
        ensure_folder(out_dir)
        _write_run_json(out_dir, config, None)
    in_memory: list[RequestRecord] = []
    if config.workers == 1:
        stats = [_run_in_process(config, out_dir, on_progress, in_memory)]
    else:
        stats = _run_workers(config, out_dir, on_progress)
    paths = sorted(out_dir.glob("requests.w*.jsonl")) if out_dir is not None else []
    records, torn = read_records(paths) if paths else (in_memory, 0)
    return _finish(config, records, stats, out_dir, otlp_out, torn)


def _run_in_process(
    config: LoadConfig,
    out_dir: Path | None,
    on_progress: ProgressFn | None,
    keep: list[RequestRecord],
) -> WorkerStats:
    sink = RecordSink(out_dir / "requests.w0.jsonl" if out_dir is not None else None)
    worker = Worker(
        config.target(),
        config.specs(0),
        config.plan(),
        sink,
        worker=0,
        seed=config.seed,
        timeouts=config.timeouts,
        warmup=config.warmup,
        on_progress=(lambda p: on_progress([p])) if on_progress else None,
    )
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(worker.run())
    finally:
        sink.close()
        keep.extend(sink.records)


def _worker_main(config: LoadConfig, worker: int, out_dir: str, start_at: float, q: Any) -> None:
    """Entry point of a worker process."""
    sink = RecordSink(Path(out_dir) / f"requests.w{worker}.jsonl")

    def report(p: Progress) -> None:
        with contextlib.suppress(Exception):
            q.put(("progress", asdict(p)))

    w = Worker(
        config.target(),
        config.specs(worker),
        config.plan(),
        sink,
        worker=worker,
        seed=config.seed,
        timeouts=config.timeouts,
        warmup=config.warmup,
        on_progress=report,
    )
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)  # every worker starts the shared schedule at the same instant
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            stats = runner.run(w.run())
        q.put(("stats", asdict(stats)))
    finally:
        sink.close()


def _run_workers(
    config: LoadConfig, out_dir: Path | None, on_progress: ProgressFn | None
) -> list[WorkerStats]:
    if out_dir is None:
        raise ValueError("several workers need an output folder")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start_at = time.time() + 1.0 + 0.3 * config.workers  # after every process has started
    procs = [
        ctx.Process(target=_worker_main, args=(config, w, str(out_dir), start_at, q), daemon=True)
        for w in range(config.workers)
    ]
    for p in procs:
        p.start()
    latest: dict[int, Progress] = {}
    stats: dict[int, WorkerStats] = {}
    try:
        while len(stats) < len(procs):
            try:
                kind, payload = q.get(timeout=0.25)
            except queue_mod.Empty:
                if all(not p.is_alive() for p in procs):
                    break
                continue
            if kind == "progress":
                latest[payload["worker"]] = Progress(**payload)
                if on_progress is not None:
                    on_progress(list(latest.values()))
            else:
                stats[payload["worker"]] = WorkerStats(**payload)
    finally:
        for p in procs:
            p.join(timeout=5.0)
            if p.is_alive():
                p.terminate()
    return [stats[k] for k in sorted(stats)]


def self_checks(stats: Sequence[WorkerStats]) -> tuple[dict[str, Any], list[str]]:
    """Aggregate the workers' self-checks and say when the client itself distorted the run."""
    sent = sum(s.sent for s in stats)
    late = sum(s.late_sends for s in stats)
    lag99 = max((s.loop_lag_p99 for s in stats), default=0.0)
    cpu = [s.cpu / s.wall if s.wall else 0.0 for s in stats]
    checks = {
        "workers": len(stats),
        "sent": sent,
        "late_sends": late,
        "lateness_p99_ms": max((s.lateness_p99 for s in stats), default=0.0) * 1e3,
        "lateness_max_ms": max((s.lateness_max for s in stats), default=0.0) * 1e3,
        "loop_lag_p99_ms": lag99 * 1e3,
        "loop_lag_max_ms": max((s.loop_lag_max for s in stats), default=0.0) * 1e3,
        "client_cores": sum(cpu),
        "coalesced_chunks": sum(s.coalesced_chunks for s in stats),
        "connections_opened": sum(s.connections_opened for s in stats),
        "cancelled": sum(s.cancelled for s in stats),
    }
    warnings = []
    if sent and late / sent > LATE_SHARE_WARN:
        warnings.append(
            f"{late} of {sent} requests were sent more than 10 ms after their scheduled time "
            f"(p99 {checks['lateness_p99_ms']:.1f} ms late): the client or --max-in-flight held "
            "them back; latencies count from the real send, and each record keeps its schedule"
        )
    if lag99 > LAG_P99_WARN:
        busiest = max(cpu, default=0.0)
        why = (
            f"the client is busy ({busiest:.2f} cores); try --workers"
            if busiest > CPU_SHARE_WARN / 2
            else f"the client used only {busiest:.2f} cores, so other processes on this machine "
            "held it back"
        )
        warnings.append(
            f"client event-loop lag p99 {lag99 * 1e3:.1f} ms: {why}; token times come from "
            "kernel receive stamps, but sends may be late and waiting chunks can share a stamp"
        )
    chunks = sum(s.chunks for s in stats)
    coalesced = checks["coalesced_chunks"]
    if chunks and coalesced / chunks > COALESCED_SHARE_WARN:
        warnings.append(
            f"{coalesced} of {chunks} chunks ({100 * coalesced / chunks:.1f} %) shared a receive "
            "stamp with the chunk before: the client fell behind the stream, so those ITL gaps "
            "read as 0 and the next gap holds the wait; ITL is unreliable for this run"
        )
    if any(c > CPU_SHARE_WARN for c in cpu):
        warnings.append(
            f"a client worker used {max(cpu):.2f} cores: the client may be the bottleneck; "
            "use more --workers"
        )
    return checks, warnings


def _finish(
    config: LoadConfig,
    records: list[RequestRecord],
    stats: Sequence[WorkerStats],
    out_dir: Path | None,
    otlp_out: Path | None,
    torn: int = 0,
) -> RunResult:
    checks, warnings = self_checks(stats)
    summary = summarize(records, config.slos, checks, warnings)
    capture_path = None
    target = config.target()
    url = f"{'https' if target.tls else 'http'}://{target.host}:{target.port}{target.path}"
    if out_dir is not None:
        quality = {
            "loadgen.late_sends": checks["late_sends"],
            "loadgen.coalesced_chunks": checks["coalesced_chunks"],
            "loadgen.torn_lines": torn,
        }
        cap = to_capture(
            records,
            url=url,
            extra=_config_dict(config),
            quality=quality,
            warnings=warnings,
            seed=config.seed,
        )
        capture_path = cap.save(out_dir / "capture.duckdb")
        write_bytes(
            out_dir / "summary.json",
            orjson.dumps(
                summary.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
            ),
        )
        _write_run_json(out_dir, config, stats)
    if otlp_out is not None:
        measured = [r for r in records if not r.warmup]
        write_bytes(otlp_out, b"".join(line + b"\n" for line in otlp_client_spans(measured, url)))
    return RunResult(tuple(records), tuple(stats), summary, out_dir, capture_path, tuple(warnings))


def finalize(out_dir: Path, config: LoadConfig | None = None) -> RunResult:
    """Rebuild the capture and summary of a run from its JSON-lines records (after a crash)."""
    paths = sorted(Path(out_dir).glob("requests.w*.jsonl"))
    records, torn = read_records(paths)
    if config is None:
        raw = orjson.loads((Path(out_dir) / "run.json").read_bytes())["config"]
        config = LoadConfig(**_config_from_dict(raw))
    return _finish(config, records, [], Path(out_dir), None, torn)


def _config_dict(config: LoadConfig) -> dict[str, Any]:
    d = asdict(replace(config, api_key=None))
    d.pop("api_key", None)
    d["url"] = redact_url(config.url)
    d["slos"] = [str(s) for s in config.slos]
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


def _config_from_dict(d: dict[str, Any]) -> dict[str, Any]:
    from tailtriage.analyses.slo import parse_slo
    from tailtriage.loadgen.runner import Timeouts

    out = dict(d)
    out["timeouts"] = Timeouts(**d["timeouts"])
    for k in ("replay", "prompts_file", "ca_bundle"):
        if out.get(k):
            out[k] = Path(out[k])
    out["slos"] = tuple(parse_slo(s) for s in d.get("slos", []))
    return out


def _write_run_json(out_dir: Path, config: LoadConfig, stats: Sequence[WorkerStats] | None) -> None:
    doc: dict[str, Any] = {"config": _config_dict(config), "started_unix": time.time()}
    if stats is not None:
        doc["workers"] = [asdict(s) for s in stats]
    write_bytes(out_dir / "run.json", orjson.dumps(doc, option=orjson.OPT_INDENT_2))
