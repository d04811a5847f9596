"""Ask one endpoint every item of an evaluation set, with the load generator's client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tailtriage.errors import EndpointError
from tailtriage.loadgen.config import LoadConfig
from tailtriage.loadgen.evalset import EvalItem
from tailtriage.loadgen.request import RequestRecord, RequestSpec
from tailtriage.loadgen.run import new_event_loop
from tailtriage.loadgen.runner import Timeouts, Worker
from tailtriage.loadgen.sink import RecordSink


@dataclass(frozen=True, slots=True)
class EndpointRun:
    """What one endpoint answered, and how fast."""

    url: str
    answers: tuple[str | None, ...]  # per item; None: the request failed
    records: tuple[RequestRecord, ...]
    wall_s: float

    @property
    def failed(self) -> int:
        return sum(a is None for a in self.answers)


def ask(
    url: str,
    model: str,
    items: Sequence[EvalItem],
    *,
    concurrency: int = 8,
    timeouts: Timeouts | None = None,
    api_key: str | None = None,
    seed: int = 0,
) -> EndpointRun:
    """Send every item (closed loop, ``concurrency`` users, EOS honoured) and collect the
    answers by item."""
    config = LoadConfig(url=url, model=model, concurrency=concurrency, requests=len(items),
                        ignore_eos=False, api_key=api_key, seed=seed)  # fmt: skip
    specs = [
        RequestSpec(i, item.prompt, max(1, len(item.prompt.split())), item.max_tokens)
        for i, item in enumerate(items)
    ]
    answers: list[str | None] = [None] * len(items)

    def on_answer(rec: RequestRecord, text: str) -> None:
        if rec.status == "ok":
            answers[rec.index] = text

    sink = RecordSink(None)
    plan = config.plan()
    worker = Worker(config.target(), iter(specs), plan, sink, seed=seed,
                    timeouts=timeouts or Timeouts(), on_answer=on_answer)  # fmt: skip
    loop = new_event_loop()
    try:
        stats = loop.run_until_complete(worker.run())
    finally:
        loop.close()
    if sink.records and all(r.error == "connect" for r in sink.records):
        raise EndpointError(f"{url}: no connection ({sink.records[0].error_detail})")
    return EndpointRun(url, tuple(answers), tuple(sink.records), stats.wall)
