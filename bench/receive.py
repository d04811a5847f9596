"""Receive benchmark: spans/s that ``tailtriage receive`` ingests from the OpenTelemetry SDK.

Starts ``tailtriage receive`` in its own process on loopback, and a null OTLP sink (answers
every export with 200 and drops it) as the reference measured in the same run.  Then, in
this process, the real OpenTelemetry Python SDK (``BatchSpanProcessor`` + OTLP/HTTP
protobuf exporter, batches of 512) creates N vLLM-shaped ``llm_request`` spans and exports
them, first to the sink, then to the receiver; the time is from the first span to the end
of ``force_flush``.  Then the receiver's own capacity, without the SDK's encoding: one
512-span protobuf request (encoded once, ids made unique per post) POSTed by two client
threads over keep-alive connections, against the sink and the receiver.  The receiver's time
to drain, derive and write the capture after SIGTERM is reported separately.  Printed:
spans/s against each, and the ratios.

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


def _payloads(n: int, per: int = 512) -> list[bytes]:
    """``n`` spans as 512-span ExportTraceServiceRequests, every id distinct."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    out = []
    now = time.time_ns()
    for b in range(0, n, per):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        kv = rs.resource.attributes.add()
        kv.key, kv.value.string_value = "service.name", "vllm"
        ss = rs.scope_spans.add()
        for i in range(b, min(n, b + per)):
            sp = ss.spans.add()
            sp.trace_id = (i + 1).to_bytes(16, "big")
            sp.span_id = (i + 1).to_bytes(8, "big")
            sp.name, sp.kind = "llm_request", 2
            sp.start_time_unix_nano = now + i * 1_000_000
            sp.end_time_unix_nano = sp.start_time_unix_nano + 1_500_000_000
            for key, value in (("gen_ai.latency.time_to_first_token", 0.2),
                               ("gen_ai.latency.e2e", 1.5)):  # fmt: skip
                a = sp.attributes.add()
                a.key, a.value.double_value = key, value
        out.append(req.SerializeToString())
    return out


def _post_all(port: int, payloads: list[bytes], threads: int = 2) -> float:
    import http.client
    import threading

    def worker(part: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Content-Type": "application/x-protobuf"}
        for body in part:
            while True:
                conn.request("POST", "/v1/traces", body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                if resp.status == 200:
                    break
                time.sleep(float(resp.getheader("Retry-After") or 1))
        conn.close()

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(payloads[i::threads],)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - t0


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
        payloads = _payloads(args.spans)
        try:
            _wait_port(port)
            ref = _export(f"http://127.0.0.1:{port}/v1/traces", args.spans)
            raw_ref = _post_all(port, payloads)
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
            raw = _post_all(port, payloads)
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
    print(f"raw 512-span posts -> null sink: {raw_ref:6.2f} s  {n / raw_ref:9.0f} spans/s")
    print(f"raw 512-span posts -> receive  : {raw:6.2f} s  {n / raw:9.0f} spans/s "
          f"({raw / raw_ref:.2f}x the sink's time)")  # fmt: skip
    print(f"receive drain + derive + write after SIGTERM ({2 * n} spans): {finish:.2f} s")


if __name__ == "__main__":
    main()
