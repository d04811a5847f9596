"""An OTLP/HTTP trace receiver (``POST /v1/traces``) that streams spans into a capture file.

Protocol, per the OTLP specification (opentelemetry.io/docs/specs/otlp/#otlphttp):

* ``application/x-protobuf`` bodies are ``ExportTraceServiceRequest`` messages, answered with
  a protobuf ``ExportTraceServiceResponse``; ``application/json`` bodies the same in OTLP/JSON,
  answered in JSON.  gzip bodies are inflated by aiohttp.
* Spans that cannot be read (bad ids, negative durations) are counted in the response's
  ``partial_success.rejected_spans``; the rest are kept.
* When the spool's bounded queue is full the answer is ``429 Too Many Requests`` with
  ``Retry-After``: the OTLP throttling signal, which exporters retry after the given delay.
  While shutting down it is ``503 Service Unavailable``, also retryable.
* A ``200`` is sent only after the request's spans were accepted by the spool, which writes
  every accepted span before it closes (see ``collect.spool``): nothing acknowledged is lost.

Decoding reuses ``sources.otlp_proto`` / ``sources.otlp_json``; derivation of requests and
stages happens once, when the receiver stops (``collect.spool.finalize_capture``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiohttp import web

from tailtriage.collect.spool import DuckDBSpanSink, SpanSink, SpanSpool, finalize_capture
from tailtriage.derive.rules import RuleSet
from tailtriage.errors import BackendError
from tailtriage.model import FileProvenance, Metadata
from tailtriage.sources.otlp_json import read_request, read_typed
from tailtriage.sources.otlp_proto import add_request
from tailtriage.sources.spans import SpanColumns

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: largest request body accepted: the Collector's and SDKs' default batch fits many times over
MAX_BODY_BYTES = 16 * 1024 * 1024
#: seconds a throttled client is told to wait; one second lets a small queue drain
RETRY_AFTER_S = 1
#: spans held in memory before clients are throttled (about 100 MB of decoded spans)
MAX_QUEUED_SPANS = 200_000
#: seconds in-flight requests get to finish when the receiver stops
SHUTDOWN_S = 10.0
FORMAT = "otlp_receiver"


@dataclass
class ReceiverCounts:
    """Requests and spans the receiver saw, by outcome (the spool counts what it wrote)."""

    requests: int = 0
    throttled: int = 0
    invalid: int = 0
    rejected_spans: int = 0
    quality: dict[str, int] = field(default_factory=dict)


class OtlpReceiver:
    """The aiohttp handlers of one receiver; ``source`` names it in the capture."""

    def __init__(self, spool: SpanSpool, source: str, max_body_bytes: int = MAX_BODY_BYTES):
        self.spool = spool
        self.source = source
        self.max_body_bytes = max_body_bytes
        self.counts = ReceiverCounts()
        self.stopping = False

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post(TRACES_PATH, self.traces)
        return app

    async def traces(self, request: web.Request) -> web.StreamResponse:
        ctype = request.content_type
        if ctype not in (PROTOBUF, JSON):
            return _error(415, f"unsupported content type {ctype!r}; send {PROTOBUF} or {JSON}")
        if self.stopping:
            return _throttle(503, "shutting down")
        if not self.spool.has_room():
            self.counts.throttled += 1
            return _throttle(429, "receiver queue full")
        body = await request.read()
        try:
            cols = self._decode(body, ctype == JSON)
            table = cols.table()
        except ValueError as exc:
            self.counts.invalid += 1
            return _error(400, f"cannot decode the export request: {exc}")
        if not self.spool.offer(table):
            self.counts.throttled += 1
            return _throttle(503 if self.stopping else 429, "receiver queue full")
        self.counts.requests += 1
        for key, n in cols.counts.items():
            self.counts.quality[key] = self.counts.quality.get(key, 0) + n
        rejected = sum(n for k, n in cols.counts.items() if k.startswith("spans."))
        self.counts.rejected_spans += rejected
        return _success(rejected, ctype == JSON)

    def _decode(self, body: bytes, is_json: bool) -> SpanColumns:
        cols = SpanColumns(self.source, "otlp_json" if is_json else "otlp_proto")
        if is_json:
            if read_typed(body, cols):
                return cols
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"invalid JSON: {exc}") from None
            read_request(doc, cols, "request")
            if cols.counts.get("otlp.invalid_document"):
                raise ValueError("no resourceSpans list")
            return cols
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        req = ExportTraceServiceRequest()
        try:
            req.ParseFromString(body)
        except DecodeError as exc:
            raise ValueError(f"invalid protobuf: {exc}") from None
        add_request(req, cols)
        return cols


def _throttle(status: int, why: str) -> web.Response:
    return web.Response(status=status, text=why, headers={"Retry-After": str(RETRY_AFTER_S)})


def _error(status: int, message: str) -> web.Response:
    # google.rpc.Status in JSON (code 3: INVALID_ARGUMENT); protobuf clients read the status
    body = orjson.dumps({"code": 3, "message": message})
    return web.Response(status=status, body=body, content_type=JSON)


def _success(rejected: int, is_json: bool) -> web.Response:
    if is_json:
        doc: dict[str, object] = {}
        if rejected:
            doc["partialSuccess"] = {
                "rejectedSpans": str(rejected),
                "errorMessage": f"{rejected} spans had invalid ids or times",
            }
        return web.Response(body=orjson.dumps(doc), content_type=JSON)
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    resp = ExportTraceServiceResponse()
    if rejected:
        resp.partial_success.rejected_spans = rejected
        resp.partial_success.error_message = f"{rejected} spans had invalid ids or times"
    return web.Response(body=resp.SerializeToString(), content_type=PROTOBUF)


@dataclass(frozen=True)
class ReceiveResult:
    """What one run of the receiver took in and wrote."""

    output: str
    listen: str
    requests: int
    throttled: int
    invalid: int
    accepted_spans: int
    rejected_spans: int
    written_spans: int
    peak_queued_spans: int
    derived_requests: int
    quality: dict[str, int]


async def serve(
    host: str,
    port: int,
    output: Path,
    *,
    stop: asyncio.Event,
    max_queued_spans: int = MAX_QUEUED_SPANS,
    rules: RuleSet | None = None,
    ready: Callable[[str], None] | None = None,
    sink: Callable[[Path, Metadata], SpanSink] = DuckDBSpanSink,
) -> ReceiveResult:
    """Receive until ``stop`` is set, then drain, derive and write the capture.

    ``ready`` is called with ``host:port`` once the socket listens (port 0 picks a free one);
    ``sink`` makes the writer's sink for the output file (the DuckDB capture by default)."""
    listen = f"{host}:{port}"
    spool = SpanSpool(sink(output, Metadata()), max_queued_spans)
    receiver = OtlpReceiver(spool, f"otlp://{listen}")
    runner = web.AppRunner(receiver.app(), access_log=None, shutdown_timeout=SHUTDOWN_S)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        spool.close()
        raise BackendError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    bound = runner.addresses[0]
    listen = f"{host}:{bound[1]}"
    receiver.source = f"otlp://{listen}"
    if ready is not None:
        ready(listen)
    await stop.wait()
    receiver.stopping = True  # in-flight requests finish; new ones get 503
    await runner.cleanup()
    loop = asyncio.get_running_loop()
    stats = await loop.run_in_executor(None, spool.close)
    counts = receiver.counts
    extra = Metadata(
        provenance=(FileProvenance(receiver.source, FORMAT, stats.written_spans),),
        quality=dict(counts.quality),
    )
    capture = await loop.run_in_executor(None, finalize_capture, output, rules, extra)
    return ReceiveResult(
        output=str(output),
        listen=listen,
        requests=counts.requests,
        throttled=counts.throttled,
        invalid=counts.invalid,
        accepted_spans=stats.accepted_spans,
        rejected_spans=counts.rejected_spans,
        written_spans=stats.written_spans,
        peak_queued_spans=stats.peak_queued_spans,
        derived_requests=capture.requests.num_rows,
        quality=dict(counts.quality),
    )
