"""``tailtriage watch``: from an SLO breach to a posted triage, once per incident.

Two ways an incident opens:

* an Alertmanager webhook (``serve_alertmanager``): each firing alert is one incident, keyed
  by its fingerprint and ``startsAt`` (Alertmanager repeats both on every re-notification);
* the multi-window burn rate of an SLO (``BurnWatcher``, ``collect.burn_rate``): an incident
  opens at the first evaluation that pages and stays open, without a second triage, until an
  evaluation no longer pages.

Either way :func:`handle_incident` collects the window (``collect.bundle``), triages it
(``pipeline.triage``), writes ``report.json`` and ``report.html`` into its own folder of DIR
and posts a short summary to the notify webhook.  The keys already handled are kept in
``DIR/incidents.json``, so a restarted watcher does not triage the same incident again."""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiohttp import web

from tailtriage.analyses.results import SloSpec
from tailtriage.collect.alertmanager import parse_webhook
from tailtriage.collect.bundle import CollectRequest, collect_bundle
from tailtriage.errors import AnalysisError, BackendError, TailtriageError
from tailtriage.pipeline import notify

#: history collected before an incident's start, for the triage's healthy baseline
BASELINE_BEFORE_S = 1800.0
#: incidents waiting for triage at most; Alertmanager gets 503 (and retries) beyond that
MAX_PENDING = 16
LOG_NAME = "incidents.json"


@dataclass(frozen=True)
class Incident:
    """Something to triage once."""

    key: str
    title: str
    start: float
    namespace: str | None
    origin: str  # alertmanager | burn_rate


@dataclass(frozen=True)
class WatchConfig:
    out: Path
    slos: tuple[SloSpec, ...]
    prometheus: str | None = None
    traces: str | None = None
    namespace: str | None = None
    kubernetes: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    notify_url: str | None = None
    report_base_url: str | None = None  # links in messages; else the report's path
    timeout: float = 30.0
    whatif: bool = True
    now: Callable[[], float] = time.time


@dataclass(frozen=True)
class IncidentOutcome:
    incident: Incident
    folder: Path
    message: notify.Message
    error: str | None = None
    notify_error: str | None = None


@dataclass
class IncidentLog:
    """Keys of the incidents already handled, persisted in ``DIR/incidents.json``."""

    path: Path
    keys: dict[str, str] = field(default_factory=dict)  # key -> folder

    @classmethod
    def open(cls, folder: Path) -> IncidentLog:
        path = folder / LOG_NAME
        keys: dict[str, str] = {}
        if path.exists():
            try:
                doc = orjson.loads(path.read_bytes())
                keys = {str(k): str(v) for k, v in doc.get("incidents", {}).items()}
            except (orjson.JSONDecodeError, AttributeError):
                keys = {}  # a damaged log only costs a repeated triage
        return cls(path, keys)

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def add(self, key: str, folder: Path) -> None:
        self.keys[key] = str(folder)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps({"incidents": self.keys}, option=orjson.OPT_INDENT_2))
        tmp.replace(self.path)


def incident_folder(incident: Incident) -> str:
    """``20260601T100000Z-<alert name>-<8 hex of the key>``: sorted by time, unique."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(incident.start))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", incident.title).strip("-")[:40] or "incident"
    digest = hashlib.sha256(incident.key.encode()).hexdigest()[:8]
    return f"{stamp}-{slug}-{digest}"


def handle_incident(incident: Incident, cfg: WatchConfig) -> IncidentOutcome:
    """Collect, triage, write the reports, notify. Failures end up in the message, never
    raised: a watcher must go on to the next incident."""
    from tailtriage.pipeline.triage import triage
    from tailtriage.renderers import write_report
    from tailtriage.store.input import load_capture

    folder = cfg.out / incident_folder(incident)
    end = cfg.now()
    window = (min(incident.start, end) - BASELINE_BEFORE_S, end)
    error = None
    try:
        request = CollectRequest(
            window=window,
            namespace=incident.namespace or cfg.namespace,
            kubernetes=cfg.kubernetes,
            kubeconfig=cfg.kubeconfig,
            context=cfg.context,
            prometheus=cfg.prometheus,
            traces=cfg.traces,
            timeout=cfg.timeout,
        )
        if (folder / "bundle").exists():  # left by a watcher stopped mid-collection
            shutil.rmtree(folder / "bundle")
        collect_bundle(request, folder / "bundle")
        capture = load_capture(folder / "bundle")
        try:
            report = triage(capture, cfg.slos, incident=(incident.start, end), whatif=cfg.whatif)
        except AnalysisError:  # too little in the alert's window: let triage find it
            report = triage(capture, cfg.slos, whatif=cfg.whatif)
        write_report(report, folder / "report.json", "json")
        write_report(report, folder / "report.html", "html")
        link = (
            f"{cfg.report_base_url.rstrip('/')}/{folder.name}/report.html"
            if cfg.report_base_url
            else str(folder / "report.html")
        )
        message = notify.triage_message(incident.title, report, link)
    except TailtriageError as exc:
        error = str(exc)
        message = notify.failure_message(incident.title, error)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.txt").write_text(message.text + "\n")
    notify_error = None
    if cfg.notify_url:
        try:
            notify.post(cfg.notify_url, message)
        except BackendError as exc:
            notify_error = str(exc)
    return IncidentOutcome(incident, folder, message, error, notify_error)


def incidents_from_webhook(body: bytes) -> list[Incident]:
    """The firing alerts of an Alertmanager notification, as incidents."""
    out = []
    for alert in parse_webhook(body):
        if alert.status != "firing":
            continue
        title = alert.name or "alert"
        if alert.summary:
            title = f"{title}: {alert.summary}"
        out.append(
            Incident(alert.key, title, alert.starts_at, alert.label("namespace"), "alertmanager")
        )
    return out


class IncidentQueue:
    """Bounded queue of incidents, de-duplicated against the log and against those pending."""

    def __init__(self, log: IncidentLog, limit: int = MAX_PENDING) -> None:
        self.log = log
        self.queue: asyncio.Queue[Incident] = asyncio.Queue(limit)
        self.pending: set[str] = set()
        #: an incident is being triaged (a stopping watcher lets it finish)
        self.busy = False

    def offer(self, incident: Incident) -> bool:
        """False when the queue is full (the sender should retry); True when queued or
        already known (a re-notification)."""
        if incident.key in self.log or incident.key in self.pending:
            return True
        try:
            self.queue.put_nowait(incident)
        except asyncio.QueueFull:
            return False
        self.pending.add(incident.key)
        return True


def alertmanager_app(queue: IncidentQueue) -> web.Application:
    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        try:
            incidents = incidents_from_webhook(body)
        except TailtriageError as exc:
            return web.Response(status=400, text=str(exc))
        if not all(queue.offer(i) for i in incidents):
            return web.Response(status=503, text="too many incidents pending; retry")
        return web.Response(text="ok")

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_post("/{tail:.*}", receive)
    return app


async def work(
    queue: IncidentQueue,
    cfg: WatchConfig,
    report: Callable[[IncidentOutcome], None],
    max_incidents: int | None,
) -> None:
    """Triage queued incidents one at a time (off the event loop) until ``max_incidents``."""
    loop = asyncio.get_running_loop()
    done = 0
    while max_incidents is None or done < max_incidents:
        incident = await queue.queue.get()
        queue.busy = True
        try:
            outcome = await loop.run_in_executor(None, handle_incident, incident, cfg)
        finally:
            queue.busy = False
        queue.log.add(incident.key, outcome.folder)
        queue.pending.discard(incident.key)
        report(outcome)
        done += 1


@dataclass
class BurnWatcher:
    """Evaluates every SLO's burn rate; one incident per breach, until it recovers."""

    cfg: WatchConfig
    open: dict[str, str] = field(default_factory=dict)  # SLO text -> key of its incident
    notes: list[str] = field(default_factory=list)

    def evaluate(self, at: float) -> list[Incident]:
        from tailtriage.collect.burn_rate import PAGE_WINDOWS, evaluate

        if self.cfg.prometheus is None:
            raise BackendError("burn-rate evaluation needs --prometheus")
        out = []
        for slo in self.cfg.slos:
            ev = evaluate(
                self.cfg.prometheus, slo, at, namespace=self.cfg.namespace, timeout=self.cfg.timeout
            )
            if ev.note and ev.note not in self.notes:
                self.notes.append(ev.note)
            name = str(slo)
            if not ev.breached:
                self.open.pop(name, None)
                continue
            if name in self.open:
                continue  # the same incident, still burning: no second triage
            key = f"burn:{name}@{at:.0f}"
            self.open[name] = key
            worst = max((b for _, b in ev.burn if b is not None), default=0.0)
            title = f"{name} burning {worst:.1f}x its error budget"
            # the incident is the long window of the pair that pages: the budget burned there
            rates = dict(ev.burn)
            long_s = min(
                w.long_s
                for w in PAGE_WINDOWS
                if (rates.get(w.long_s) or 0.0) > w.factor
                and (rates.get(w.short_s) or 0.0) > w.factor
            )
            out.append(Incident(key, title, at - long_s, self.cfg.namespace, "burn_rate"))
        return out
