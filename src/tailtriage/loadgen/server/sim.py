"""``tailtriage serve-sim``: an OpenAI-compatible server whose timings come from the
simulator's engine model, in real time.

The simulator's continuous-batching scheduler (``simulator.batching``) and step-time model
(``simulator.steptime``) own no clock; here one asyncio task plays the engine: it plans a
step, sleeps for the step time the model gives, applies the step, and hands every new token
to the waiting HTTP handler, which streams it.  Queueing, chunked prefill, KV-cache pressure
and preemption therefore happen as in the simulator, and show in ``/metrics`` (vLLM names)
and in OTLP spans (vLLM conventions, parented on the caller's ``traceparent``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
from aiohttp import web

from tailtriage.loadgen.clock import ClockAnchor
from tailtriage.loadgen.server.answers import load_answerer
from tailtriage.loadgen.server.metrics import VllmMetrics
from tailtriage.loadgen.server.otlp import OtlpSpanWriter, ServedRequest
from tailtriage.simulator.batching import BatchLimits, ContinuousBatcher, Sequence
from tailtriage.simulator.steptime import (
    GPUS,
    MODELS,
    RooflineStepTime,
    StepTimeModel,
    kv_cache_blocks,
)


@dataclass(frozen=True)
class SimSettings:
    served_model: str = "sim"
    shape: str = "llama-3.1-8b"  # a model shape of simulator.steptime.MODELS
    gpu: str = "H100"
    tp: int = 1
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    kv_blocks: int = 0  # 0: sized from GPU memory
    api_overhead: float = 0.001  # seconds the API server spends before the engine sees it
    default_max_tokens: int = 16
    otlp_out: Path | None = None
    send_log: Path | None = None
    service_name: str = "vllm"
    seed: int = 0
    #: evaluation mode: answer this set's prompts (wrong for a share ``eval_error_rate`` of
    #: the items, chosen by ``eval_seed``) instead of streaming filler tokens
    eval_file: Path | None = None
    eval_error_rate: float = 0.0
    eval_seed: int = 0


class _Req:
    """The HTTP side of one sequence: tokens arrive on ``queue`` as (count, engine time)."""

    __slots__ = ("arrival", "finish", "first_token", "last_t", "queue", "scheduled", "sent")

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[int, float]] = asyncio.Queue()
        self.sent = 0
        self.arrival = 0.0
        self.scheduled: float | None = None
        self.first_token: float | None = None
        self.finish: float | None = None
        self.last_t: float | None = None


def build_model(s: SimSettings) -> tuple[StepTimeModel, int]:
    from tailtriage.errors import ConfigError

    if s.shape not in MODELS or s.gpu not in GPUS:
        raise ConfigError(
            f"unknown model shape {s.shape!r} or GPU {s.gpu!r}; shapes: {', '.join(MODELS)}; "
            f"GPUs: {', '.join(GPUS)}"
        )
    model = RooflineStepTime(MODELS[s.shape], GPUS[s.gpu], tp=s.tp)
    blocks = s.kv_blocks or kv_cache_blocks(MODELS[s.shape], GPUS[s.gpu], gpus=s.tp)
    return model, blocks


class RealtimeEngine:
    """Drives a ContinuousBatcher on the wall clock (monotonic seconds)."""

    def __init__(self, settings: SimSettings, metrics: VllmMetrics) -> None:
        self.model, blocks = build_model(settings)
        limits = BatchLimits(settings.max_num_batched_tokens, settings.max_num_seqs)
        self.batcher = ContinuousBatcher(limits, blocks)
        self.metrics = metrics
        self._wake = asyncio.Event()
        self.steps = 0

    def submit(self, seq: Sequence) -> None:
        req: _Req = seq.payload
        req.arrival = time.monotonic()
        self.batcher.add(seq, req.arrival)
        self.metrics.waiting = self.batcher.num_waiting
        self._wake.set()

    async def run(self) -> None:
        b = self.batcher
        while True:
            if b.idle:
                self._wake.clear()
                await self._wake.wait()
            start = time.monotonic()
            plan = b.schedule(start)
            if plan is None:  # waiting requests that cannot be admitted yet
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), 0.01)
                continue
            for seq in plan.newly_scheduled:
                seq.payload.scheduled = start
            decoding = b.decoding()
            dt = self.model.step_time(
                plan.prefill_tokens, plan.decode_seqs, plan.context_tokens, plan.batch_seqs
            )
            await asyncio.sleep(max(0.0, start + dt - time.monotonic()))
            end = time.monotonic()
            outcome = b.complete(plan, end)
            self.steps += 1
            self._deliver(decoding + [s for s, _ in plan.chunks], end)
            for seq in outcome.finished:
                seq.payload.finish = end
                seq.payload.queue.put_nowait((-1, end))
            self._update_metrics(plan.tokens, plan.prefill_tokens)

    def _deliver(self, seqs: list[Sequence], t: float) -> None:
        seen: set[int] = set()
        for seq in seqs:
            if id(seq) in seen:
                continue
            seen.add(id(seq))
            req: _Req = seq.payload
            n = self.batcher.generated(seq) - req.sent
            if n <= 0:
                continue
            req.sent += n
            if req.first_token is None:
                req.first_token = t
            elif req.last_t is not None:
                self.metrics.itl.observe(t - req.last_t)
            req.last_t = t
            req.queue.put_nowait((n, t))

    def _update_metrics(self, tokens: int, prefill: int) -> None:
        m, b = self.metrics, self.batcher
        m.running, m.waiting, m.kv_usage = b.num_running, b.num_waiting, b.kv_usage
        m.preemptions = b.preemptions_total
        m.prompt_tokens = b.prompt_tokens_total
        m.generation_tokens = b.generation_tokens_total
        m.iter_tokens.observe(tokens)


class SimServer:
    def __init__(self, settings: SimSettings) -> None:
        self.s = settings
        self.metrics = VllmMetrics(settings.served_model)
        self.anchor = ClockAnchor.now()
        self.spans = (
            OtlpSpanWriter(settings.otlp_out, settings.service_name, settings.seed)
            if settings.otlp_out
            else None
        )
        self._log: IO[bytes] | None = (
            open(settings.send_log, "ab") if settings.send_log else None  # noqa: SIM115
        )
        self.requests = 0
        self.answerer = (
            load_answerer(settings.eval_file, settings.eval_error_rate, settings.eval_seed)
            if settings.eval_file is not None
            else None
        )

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.prometheus)
        app.cleanup_ctx.append(self._engine_ctx)
        return app

    async def _engine_ctx(self, app: web.Application) -> AsyncIterator[None]:
        self.engine = RealtimeEngine(self.s, self.metrics)
        task = asyncio.get_running_loop().create_task(self.engine.run())
        flusher = asyncio.get_running_loop().create_task(self._flush_periodically())
        yield
        task.cancel()
        flusher.cancel()
        if self.spans is not None:
            self.spans.close()
        if self._log is not None:
            self._log.close()

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            if self.spans is not None:
                self.spans.flush()
            if self._log is not None:
                self._log.flush()

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def models(self, request: web.Request) -> web.Response:
        data = {"object": "list", "data": [{"id": self.s.served_model, "object": "model"}]}
        return web.json_response(data)

    async def prometheus(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.render().encode(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        http_start = time.monotonic()
        try:
            body = orjson.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
            max_tokens = int(
                body.get("max_tokens")
                or body.get("max_completion_tokens")
                or self.s.default_max_tokens
            )
        except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
            return _error(400, f"bad request body: {exc}")
        chat = request.path.endswith("chat/completions")
        prompt = body.get("messages") if chat else body.get("prompt")
        prompt_tokens = max(1, _count_words(prompt))
        words: tuple[str, ...] = ()
        if self.answerer is not None:  # the answer's words are the tokens, then end of text
            words = tuple(self.answerer.answer(_last_text(prompt)).split())
            max_tokens = min(max_tokens, len(words))
        self.requests += 1
        rid = request.headers.get("X-Request-ID") or f"cmpl-{self.requests}"
        if self.s.api_overhead > 0:
            await asyncio.sleep(self.s.api_overhead)
        req = _Req()
        try:
            seq = Sequence(rid, prompt_tokens, max(1, max_tokens), payload=req)
        except Exception as exc:  # ConfigError for impossible lengths
            return _error(400, str(exc))
        self.engine.submit(seq)
        opts = body.get("stream_options") or {}
        ctx = _StreamCtx(rid, chat, self.s.served_model, bool(opts.get("include_usage")),
                         bool(opts.get("continuous_usage_stats")), prompt_tokens,
                         words)  # fmt: skip
        sends: list[float] = []
        if body.get("stream"):
            resp: web.StreamResponse = await self._stream(request, req, ctx, sends)
        else:
            resp = await self._unary(req, ctx)
        self._finished(rid, request, req, http_start, prompt_tokens, max_tokens, sends)
        return resp

    async def _stream(
        self, request: web.Request, req: _Req, ctx: _StreamCtx, sends: list[float]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        done = 0
        while True:
            n, _t = await req.queue.get()
            if n < 0:
                break
            sends.append(time.time())
            await resp.write(ctx.token_event(n, req.sent, done))
            done += n
        await resp.write(ctx.final_events(req.sent))
        await resp.write_eof()
        return resp

    async def _unary(self, req: _Req, ctx: _StreamCtx) -> web.Response:
        while True:
            n, _t = await req.queue.get()
            if n < 0:
                break
        return web.json_response(ctx.unary(req.sent))

    def _finished(
        self, rid: str, request: web.Request, req: _Req, http_start: float,
        prompt_tokens: int, max_tokens: int, sends: list[float],
    ) -> None:  # fmt: skip
        m = self.metrics
        a = self.anchor.to_unix
        first = req.first_token or req.finish or time.monotonic()
        finish = req.finish or time.monotonic()
        sched = req.scheduled or req.arrival
        m.ttft.observe(first - req.arrival)
        m.e2e.observe(finish - req.arrival)
        m.queue.observe(sched - req.arrival)
        m.prefill.observe(first - sched)
        m.decode.observe(finish - first)
        m.inference.observe(finish - sched)
        m.prompt_len.observe(prompt_tokens)
        m.gen_len.observe(req.sent)
        if req.sent > 1:
            m.tpot.observe((finish - first) / (req.sent - 1))
        m.success["length"] = m.success.get("length", 0) + 1
        traceparent = request.headers.get("traceparent")
        if self.spans is not None:
            self.spans.add(ServedRequest(
                rid, traceparent, request.path, self.s.served_model, a(http_start),
                a(req.arrival), a(sched), a(first), a(finish), prompt_tokens, req.sent, max_tokens,
            ))  # fmt: skip
        if self._log is not None:
            rec = {
                "request_id": rid,
                "traceparent": traceparent,
                "recv": a(http_start),
                "sends": sends,
            }
            self._log.write(orjson.dumps(rec) + b"\n")


@dataclass(frozen=True)
class _StreamCtx:
    rid: str
    chat: bool
    model: str
    include_usage: bool
    continuous_usage: bool
    prompt_tokens: int
    words: tuple[str, ...] = ()  # evaluation mode: the answer, one word per token

    def _text(self, start: int, n: int) -> str:
        if not self.words:
            return " tok" * n
        return "".join(("" if i == 0 else " ") + w
                       for i, w in enumerate(self.words[start:start + n], start))  # fmt: skip

    def _choice(self, text: str, finish: str | None) -> dict[str, Any]:
        c: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if self.chat:
            c["delta"] = {"content": text}
        else:
            c["text"] = text
        return c

    def _usage(self, n: int) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": n,
                "total_tokens": self.prompt_tokens + n}  # fmt: skip

    def token_event(self, n: int, total: int, start: int = 0) -> bytes:
        obj: dict[str, Any] = {
            "id": self.rid,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "model": self.model,
            "choices": [self._choice(self._text(start, n), None)],
        }
        if self.continuous_usage:
            obj["usage"] = self._usage(total)
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def final_events(self, total: int) -> bytes:
        obj: dict[str, Any] = {"id": self.rid, "model": self.model,
                               "choices": [self._choice("", "length")]}  # fmt: skip
        out = b"data: " + orjson.dumps(obj) + b"\n\n"
        if self.include_usage:
            u = {"id": self.rid, "model": self.model, "choices": [], "usage": self._usage(total)}
            out += b"data: " + orjson.dumps(u) + b"\n\n"
        return out + b"data: [DONE]\n\n"

    def unary(self, total: int) -> dict[str, Any]:
        text = self._text(0, total)
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {
            "id": self.rid,
            "object": "chat.completion" if self.chat else "text_completion",
            "model": self.model,
            "choices": [choice],
            "usage": self._usage(total),
        }


def _last_text(prompt: Any) -> str:
    """The prompt string, or the content of a chat's last message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        return str(prompt[-1].get("content") or "")
    return ""


def _count_words(prompt: Any) -> int:
    if isinstance(prompt, str):
        return len(prompt.split())
    if isinstance(prompt, list):
        return sum(_count_words(m.get("content") if isinstance(m, dict) else m) for m in prompt)
    return 0


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)


@contextlib.asynccontextmanager
async def serving(
    settings: SimSettings, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[int]:
    """Run the simulated server in the current loop; yields the bound port."""
    server = SimServer(settings)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    try:
        yield int(bound)
    finally:
        await runner.cleanup()
