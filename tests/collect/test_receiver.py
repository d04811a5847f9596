"""`receive`: the real OpenTelemetry Python SDK exports over OTLP/HTTP to the receiver on
loopback; every span the receiver acknowledged is in the capture, a burst is throttled with
429 instead of growing the queue, and a bad body gets a 4xx without stopping the receiver."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from tailtriage.collect.receiver import ReceiveResult, serve
from tailtriage.collect.spool import DuckDBSpanSink
from tailtriage.model import Capture

otel_sdk = pytest.importorskip(
    "opentelemetry.sdk.trace", reason="pip install opentelemetry-sdk (the dev extra)"
)
otlp_http = pytest.importorskip(
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    reason="pip install opentelemetry-exporter-otlp-proto-http (the dev extra)",
)
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import (  # noqa: E402
    BatchSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

WAIT_S = 30.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


class CountingExporter(SpanExporter):
    """The SDK's OTLP/HTTP exporter, remembering the span ids the receiver acknowledged."""

    def __init__(self, endpoint: str) -> None:
        self.inner = otlp_http.OTLPSpanExporter(endpoint=endpoint, timeout=WAIT_S)
        self.acked: set[str] = set()
        self.failed = 0
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        with self.lock:
            if result == SpanExportResult.SUCCESS:
                self.acked.update(format(s.context.span_id, "016x") for s in spans)
            else:
                self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()


def _emit(provider: TracerProvider, n: int, seed: int) -> None:
    """``n`` vLLM-shaped requests: an ``llm_request`` span with its latency attributes."""
    tracer = provider.get_tracer("tailtriage.tests")
    now = time.time_ns()
    for i in range(n):
        start = now - (n - i) * 10_000_000
        queue, ttft, e2e = 0.005 + (i % 7) * 0.001, 0.05 + (i % 11) * 0.01, 0.5 + (seed % 3) * 0.1
        span = tracer.start_span(
            "llm_request",
            start_time=start,
            attributes={
                "gen_ai.request.model": MODEL,
                "gen_ai.response.model": MODEL,
                "gen_ai.usage.prompt_tokens": 100,
                "gen_ai.usage.completion_tokens": 50,
                "gen_ai.latency.time_in_queue": queue,
                "gen_ai.latency.time_to_first_token": ttft,
                "gen_ai.latency.e2e": e2e,
            },
        )
        span.end(end_time=start + int(e2e * 1e9))


def _provider(endpoint: str, batch: int) -> tuple[TracerProvider, CountingExporter]:
    exporter = CountingExporter(endpoint)
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter, max_queue_size=100_000, max_export_batch_size=batch, schedule_delay_millis=50
        )
    )
    return provider, exporter


def _span_ids(path: Path) -> list[str]:
    return [str(s) for s in Capture.load(path).spans["span_id"].to_pylist()]


# -- the CLI in its own process, SIGTERM to stop ------------------------------------------


@pytest.fixture
def receiver_process(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str], Path]]:
    out = tmp_path / "capture.duckdb"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2] / "src"), COLUMNS="200")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tailtriage",
            "receive",
            "--otlp",
            "127.0.0.1:0",
            "-o",
            str(out),
            "--json",
            str(tmp_path / "receive.json"),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "receiving OTLP/HTTP on http://" in line, line
        url = line.split("on ", 1)[1].split(" ", 1)[0]
        yield url, proc, out
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(WAIT_S)


def test_sdk_export_lands_in_the_capture_and_sigterm_flushes(
    receiver_process: tuple[str, subprocess.Popen[str], Path], tmp_path: Path
) -> None:
    url, proc, out = receiver_process
    provider, exporter = _provider(url, batch=64)
    _emit(provider, 300, seed=1)
    assert provider.force_flush(int(WAIT_S * 1000))
    provider.shutdown()
    assert len(exporter.acked) == 300 and exporter.failed == 0

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(WAIT_S) == 0, proc.stderr.read() if proc.stderr else ""
    assert sorted(_span_ids(out)) == sorted(exporter.acked)
    capture = Capture.load(out)
    assert capture.requests.num_rows == 300  # derived once at shutdown
    assert set(capture.requests["model"].to_pylist()) == {MODEL}
    summary = orjson.loads((tmp_path / "receive.json").read_bytes())
    assert summary["written_spans"] == 300 and summary["throttled"] == 0


# -- in-process, with a writer held back: the burst is throttled, nothing acked is lost ----


@dataclass
class GatedSink:
    """The real DuckDB sink behind a gate the test opens (a disk that stalls)."""

    inner: DuckDBSpanSink
    gate: threading.Event

    def write(self, spans: pa.Table) -> None:
        self.gate.wait(WAIT_S)
        self.inner.write(spans)

    def close(self) -> None:
        self.inner.close()


class Running:
    """``serve`` on its own event loop thread."""

    def __init__(self, out: Path, max_queued: int, gate: threading.Event) -> None:
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.url: str | None = None
        self.result: ReceiveResult | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.receiver = None

        def sink_for(path: Path, meta: object) -> GatedSink:
            return GatedSink(DuckDBSpanSink(path, meta), gate)  # type: ignore[arg-type]

        async def main() -> None:
            def ready(listen: str) -> None:
                self.url = f"http://{listen}/v1/traces"
                self.ready.set()

            self.result = await serve(
                "127.0.0.1",
                0,
                out,
                stop=self.stop,
                max_queued_spans=max_queued,
                ready=ready,
                sink=sink_for,
            )

        def run() -> None:
            try:
                self.loop.run_until_complete(main())
            except BaseException as exc:
                self.error = exc
                self.ready.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert self.ready.wait(WAIT_S) and self.url, self.error

    def finish(self) -> ReceiveResult:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(WAIT_S)
        assert self.result is not None, self.error
        return self.result


def _json_request(n: int) -> bytes:
    """One OTLP/JSON export request of ``n`` spans."""
    now = time.time_ns()
    spans = [
        {
            "traceId": f"{i + 1:032x}",
            "spanId": f"{i + 1:016x}",
            "name": "probe",
            "kind": 2,
            "startTimeUnixNano": str(now),
            "endTimeUnixNano": str(now + 1000),
        }
        for i in range(n)
    ]
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def _post(url: str, body: bytes, ctype: str) -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=WAIT_S) as resp:
            return resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def test_burst_of_ten_times_the_queue_is_throttled_and_loses_no_acked_span(
    tmp_path: Path,
) -> None:
    max_queued, batch, exporters = 500, 125, 4
    gate = threading.Event()
    out = tmp_path / "burst.duckdb"
    running = Running(out, max_queued, gate)
    providers = [_provider(running.url or "", batch) for _ in range(exporters)]
    for seed, (provider, _) in enumerate(providers):
        _emit(provider, 10 * max_queued // exporters, seed)
    # the writer is stalled: once anything is queued, a request as big as the whole queue
    # must be throttled (429 + Retry-After), not queued
    probe = _json_request(max_queued)
    probes_taken = 0  # a probe is queued (and stored) when it finds the queue empty
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        status, headers = _post(running.url or "", probe, "application/json")
        assert status in (200, 429)
        if status == 429:
            break
        probes_taken += 1
        time.sleep(0.05)
    assert status == 429 and headers.get("Retry-After") == "1"
    gate.set()
    for provider, _ in providers:
        assert provider.force_flush(int(WAIT_S * 1000))
        provider.shutdown()
    result = running.finish()

    acked = set().union(*(e.acked for _, e in providers))
    stored = _span_ids(out)
    probe_spans = probes_taken * max_queued
    assert len(stored) == len(set(stored)) == len(acked) + probe_spans == result.written_spans
    assert acked <= set(stored) and result.accepted_spans == result.written_spans
    assert len(acked) == 10 * max_queued  # the SDK's retries after Retry-After got them all in
    assert result.throttled > 0
    assert result.peak_queued_spans <= max_queued


def test_bad_bodies_are_refused_and_the_receiver_goes_on(tmp_path: Path) -> None:
    gate = threading.Event()
    gate.set()
    running = Running(tmp_path / "bad.duckdb", 1_000, gate)
    url = running.url or ""
    assert _post(url, b"\x0a\xff\xff", "application/x-protobuf")[0] == 400
    assert _post(url, b"{not json", "application/json")[0] == 400
    assert _post(url, b"hello", "text/plain")[0] == 415
    provider, exporter = _provider(url, batch=10)
    _emit(provider, 20, seed=0)
    assert provider.force_flush(int(WAIT_S * 1000))
    provider.shutdown()
    result = running.finish()
    assert result.invalid == 2 and result.written_spans == len(exporter.acked) == 20


def test_an_unwritable_output_is_one_line_and_exit_3(tmp_path: Path) -> None:
    # a missing folder is created (issue 21); a folder that cannot exist, because a regular
    # file stands where it would be, cannot be written even by root
    (tmp_path / "missing").write_text("a file, not a folder")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2] / "src"))
    run = subprocess.run(
        [sys.executable, "-m", "tailtriage", "receive", "--otlp", "127.0.0.1:0", "-o",
         str(tmp_path / "missing" / "capture.duckdb"), "--duration", "1"],
        capture_output=True, text=True, env=env, timeout=WAIT_S,
    )  # fmt: skip
    assert run.returncode == 3
    assert run.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "missing: cannot create folder" in run.stderr and "Traceback" not in run.stderr
