"""`tailtriage watch --prometheus URL --slo ... [--alertmanager-webhook HOST:PORT]
[--notify-webhook URL] --out DIR` (design 3.4): triage every SLO incident as it happens."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer
from rich.console import Console
from rich.markup import escape

from tailtriage.cli._app import app
from tailtriage.cli._options import (
    DurationOption,
    SloOption,
    parse_listen,
    slos_from,
    stop_event,
)
from tailtriage.errors import ConfigError, TailtriageError

if TYPE_CHECKING:
    from tailtriage.pipeline.watch import IncidentLog, WatchConfig

console = Console(highlight=False, stderr=True, soft_wrap=True)
#: seconds a stopping watcher waits for the triage in progress
GRACE_S = 600.0


@app.command()
def watch(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the incidents' reports.")],
    slo: SloOption = "p95 ttft < 500ms",
    prometheus: Annotated[
        str | None, typer.Option("--prometheus", help="Prometheus base URL (burn rate, collect).")
    ] = None,
    alertmanager_webhook: Annotated[
        str | None,
        typer.Option(
            "--alertmanager-webhook",
            help="Listen for Alertmanager webhooks here (HOST:PORT) instead of evaluating.",
        ),
    ] = None,
    notify_webhook: Annotated[
        str | None,
        typer.Option("--notify-webhook", help="Slack-compatible incoming webhook URL."),
    ] = None,
    traces: Annotated[
        str | None, typer.Option("--traces", help="Trace store to collect from (see collect).")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Kubernetes namespace.")
    ] = None,
    kubernetes: Annotated[
        bool | None,
        typer.Option("--kubernetes/--no-kubernetes", help="Collect Kubernetes objects too."),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between burn-rate evaluations.")
    ] = 60.0,
    once: Annotated[
        bool,
        typer.Option("--once", help="One evaluation, or the first incident of the webhook."),
    ] = False,
    evaluations: Annotated[
        int | None,
        typer.Option("--evaluations", help="Stop after this many burn-rate evaluations."),
    ] = None,
    duration: DurationOption = None,
    report_url: Annotated[
        str | None,
        typer.Option("--report-url", help="Base URL under which DIR is served (message links)."),
    ] = None,
    whatif: Annotated[
        bool, typer.Option("--whatif/--no-whatif", help="Predict each fix on the simulator.")
    ] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per source request.")] = 30.0,
    json: Annotated[
        Path | None,
        typer.Option("--json", help="Write the handled incidents as JSON to this file."),
    ] = None,
) -> None:
    """Watch SLOs and triage each incident once: collect its window, triage it, write the
    HTML/JSON reports into DIR and post a short summary to a chat webhook.

    Incidents come from Alertmanager (a `webhook_configs` receiver pointing at
    `--alertmanager-webhook`), or from the multi-window burn rate of each SLO computed from
    the engines' latency histograms in Prometheus (pages at 14.4x over 1 h and 5 min, or 6x
    over 6 h and 30 min). Re-notifications and evaluations of an open incident do not
    triage again. SIGTERM or Ctrl-C stops it.

    Examples:

        tailtriage watch --prometheus http://prometheus:9090 --slo 'p95 ttft < 500ms'
        --notify-webhook https://hooks.slack.com/services/... --out incidents/

        tailtriage watch --alertmanager-webhook 127.0.0.1:9095 --prometheus
        http://prometheus:9090 --out incidents/
    """
    from tailtriage.collect.kubernetes import kubernetes_configured
    from tailtriage.pipeline.watch import IncidentLog, WatchConfig

    specs = slos_from(slo)
    if alertmanager_webhook is None and prometheus is None:
        raise ConfigError("watch needs --prometheus (burn rate) or --alertmanager-webhook")
    cfg = WatchConfig(
        out=out,
        slos=specs,
        prometheus=prometheus,
        traces=traces,
        namespace=namespace,
        kubernetes=kubernetes if kubernetes is not None else kubernetes_configured(None, None),
        notify_url=notify_webhook,
        report_base_url=report_url,
        timeout=timeout,
        whatif=whatif,
    )
    out.mkdir(parents=True, exist_ok=True)
    log = IncidentLog.open(out)
    handled: list[dict[str, object]] = []
    listen = (
        parse_listen(alertmanager_webhook, "--alertmanager-webhook")
        if alertmanager_webhook
        else None
    )
    limit = 1 if once else evaluations
    asyncio.run(_run(cfg, log, listen, interval, once, limit, duration, handled))
    if json is not None:
        json.write_bytes(orjson.dumps({"incidents": handled}, option=orjson.OPT_INDENT_2) + b"\n")


async def _run(
    cfg: WatchConfig,
    log: IncidentLog,
    listen: tuple[str, int] | None,
    interval: float,
    once: bool,
    evaluations: int | None,
    duration: float | None,
    handled: list[dict[str, object]],
) -> None:
    from aiohttp import web

    from tailtriage.pipeline.watch import (
        BurnWatcher,
        IncidentOutcome,
        IncidentQueue,
        alertmanager_app,
        work,
    )

    stop = stop_event(duration)
    loop = asyncio.get_running_loop()
    queue = IncidentQueue(log)

    def report(o: IncidentOutcome) -> None:
        state = "[red]triage failed[/]" if o.error else "[green]triaged[/]"
        console.print(f"{state} {escape(o.incident.title)} -> {escape(str(o.folder))}")
        console.print(escape(o.message.text))
        if o.notify_error:
            console.print(f"[yellow]notify failed[/] {escape(o.notify_error)}")
        handled.append(
            {
                "key": o.incident.key,
                "title": o.incident.title,
                "folder": str(o.folder),
                "origin": o.incident.origin,
                "error": o.error,
                "notify_error": o.notify_error,
            }
        )

    tasks: list[asyncio.Task[None]] = []
    runner = None
    if listen is not None:
        runner = web.AppRunner(alertmanager_app(queue), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, *listen)
        await site.start()
        console.print(
            f"waiting for Alertmanager webhooks on http://{listen[0]}:{runner.addresses[0][1]}/"
        )
        worker = asyncio.create_task(work(queue, cfg, report, 1 if once else None))
        worker.add_done_callback(lambda _: stop.set())
        tasks.append(worker)
    else:
        watcher = BurnWatcher(cfg)

        async def evaluate() -> None:
            done = 0
            while True:
                try:
                    incidents = await loop.run_in_executor(None, watcher.evaluate, cfg.now())
                except TailtriageError as exc:
                    if once:
                        raise
                    console.print(f"[yellow]evaluation failed[/] {escape(str(exc))}")
                    incidents = []
                for note in watcher.notes:
                    console.print(f"note: {escape(note)}")
                watcher.notes.clear()
                for incident in incidents:
                    queue.offer(incident)
                if not incidents:
                    console.print(
                        "SLOs within their error budgets"
                        if not watcher.open
                        else "incident still open; not triaged again"
                    )
                while not queue.queue.empty():
                    await work(queue, cfg, report, 1)
                done += 1
                if evaluations is not None and done >= evaluations:
                    stop.set()
                    return
                await asyncio.sleep(interval)

        tasks.append(asyncio.create_task(evaluate()))
        tasks[-1].add_done_callback(lambda _: stop.set())
    await stop.wait()
    deadline = loop.time() + GRACE_S
    while queue.busy and loop.time() < deadline:  # let a running triage finish and post
        await asyncio.sleep(0.1)
    for task in tasks:
        if task.done() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        task.cancel()
    if runner is not None:
        await runner.cleanup()
