"""Receive benchmark: spans/s that ``tailtriage receive`` ingests from the OpenTelemetry SDK.

Starts ``tailtriage receive`` in its own process on loopback, and a null OTLP sink (answers
every export with 200 and drops it) as the reference measured in the same run.  Then, in
this process, the real OpenTelemetry Python SDK (``BatchSpanProcessor`` + OTLP/HTTP
protobuf exporter, batches of 512) creates N vLLM-shaped ``llm_request`` spans and exports
them, first to the sink, then to the receiver; the time is from the first span to the end
of ``force_flush``.  The receiver's own time to drain, derive and write the capture after
SIGTERM is reported separately.  Printed: spans/s against each, and the ratio.

    python bench/receive.py [--spans 100000]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

SRC = str(Path(__file__).resolve().parents[1] / "src")
NULL_SINK = """
import sys
from aiohttp import web
async def ok(request):
    await request.read()
    return web.Response(body=b"", content_type="application/x-protobuf")
app = web.Application(client_max_size=64 * 1024 * 1024)
app.router.add_post("/v1/traces", ok)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


def _export(endpoint: str, n: int) -> float:
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=endpoint, timeout=60),
            max_queue_size=n,
            max_export_batch_size=512,
            schedule_delay_millis=100,
        )
    )
    tracer = provider.get_tracer("bench")
    now = time.time_ns()
    t0 = time.perf_counter()
    for i in range(n):
        start = now - (n - i) * 1_000_000
        span = tracer.start_span(
            "llm_request",
            start_time=start,
            attributes={
                "gen_ai.request.model": "meta-llama/Llama-3.1-8B-Instruct",
                "gen_ai.usage.prompt_tokens": 512,
                "gen_ai.usage.completion_tokens": 128,
                "gen_ai.latency.time_in_queue": 0.01,
                "gen_ai.latency.time_to_first_token": 0.2,
                "gen_ai.latency.e2e": 1.5,
            },
        )
        span.end(end_time=start + 1_500_000_000)
    provider.force_flush(600_000)
    elapsed = time.perf_counter() - t0
    provider.shutdown()
    return elapsed


def _wait_port(port: int) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spans", type=int, default=100_000)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=SRC)
    with TemporaryDirectory() as tmp:
        port = _free_port()
        sink = subprocess.Popen([sys.executable, "-c", NULL_SINK, str(port)], env=env)
        try:
            _wait_port(port)
            ref = _export(f"http://127.0.0.1:{port}/v1/traces", args.spans)
        finally:
            sink.terminate()
            sink.wait(30)
        port = _free_port()
        out = Path(tmp) / "capture.duckdb"
        recv = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tailtriage",
                "receive",
                "--otlp",
                f"127.0.0.1:{port}",
                "-o",
                str(out),
                "--json",
                str(Path(tmp) / "r.json"),
            ],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_port(port)
            got = _export(f"http://127.0.0.1:{port}/v1/traces", args.spans)
            t0 = time.perf_counter()
            recv.send_signal(signal.SIGTERM)
            recv.wait(600)
            finish = time.perf_counter() - t0
        finally:
            if recv.poll() is None:
                recv.kill()
        import json

        written = json.loads((Path(tmp) / "r.json").read_text())["written_spans"]
    n = args.spans
    print(f"load average {os.getloadavg()[0]:.1f}; spans: {n} (written by receive: {written})")
    print(f"SDK -> null sink : {ref:7.2f} s  {n / ref:9.0f} spans/s (reference)")
    print(f"SDK -> receive   : {got:7.2f} s  {n / got:9.0f} spans/s")
    print(f"ratio receive/reference time: {got / ref:.2f}x")
    print(f"receive drain + derive + write after SIGTERM: {finish:.2f} s")


if __name__ == "__main__":
    main()
