"""Render the instrument files from the templates shipped in ``templates/`` (string.Template:
``${name}`` placeholders, ``$$`` for a literal dollar) and the rule builders."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Final

from tailtriage.analyses.results import SloSpec
from tailtriage.errors import ConfigError, InputError
from tailtriage.instrument import files
from tailtriage.instrument.engines import ENGINE_METRICS
from tailtriage.instrument.rules import alert_rules, recording_rules
from tailtriage.remediation.configs import Target, hpa_v2, keda_scaled_object

#: waiting requests per pod the autoscalers hold: a few queued requests keep the batch full
#: without letting the queue, and so TTFT, grow (design 1: "scale on GPU queue depth")
QUEUE_TARGET: Final = 5.0
#: TTFT a trace is kept above when no TTFT SLO is given (design 1's worked example: 500 ms)
DEFAULT_TTFT_S: Final = 0.5
#: without an e2e SLO, requests longer than this are kept whatever their TTFT: they hold a batch
#: slot for their whole generation and shape everyone else's ITL
LONG_REQUEST_S: Final = 30.0
#: the share of healthy (fast, successful) traces kept as the baseline
BASELINE_PERCENT: Final = 10
#: Prometheus scrape interval: rate() needs 4 scrapes in a window, so 15 s resolves 1 minute
SCRAPE_INTERVAL_S: Final = 15
#: the port each engine serves /metrics on (vLLM and Dynamo's frontend 8000, SGLang 30000)
ENGINE_PORTS: Final = {"vllm": 8000, "sglang": 30000, "dynamo": 8000}
#: decision wait: longer than the slowest streamed request, so its whole trace is judged
DECISION_WAIT_S: Final = 60


@dataclass(frozen=True)
class InstrumentOptions:
    gateway: str = "istio"
    engine: str = "vllm"
    namespace: str = "default"
    exporter: str = "file"
    slos: tuple[SloSpec, ...] = ()
    deployment: str | None = None  # the engine Deployment (default: the engine's name)

    def __post_init__(self) -> None:
        for value, known, what in (
            (self.gateway, files.GATEWAYS, "--gateway"),
            (self.engine, files.ENGINES, "--engine"),
            (self.exporter, files.EXPORTERS, "--exporter"),
        ):
            if value not in known:
                raise ConfigError(f"{what} {value!r}: expected one of {', '.join(known)}")
        if not self.namespace.replace("-", "").isalnum():
            raise ConfigError(f"--namespace {self.namespace!r} is not a Kubernetes name")


@dataclass(frozen=True)
class RenderedFile:
    name: str
    text: str


def _template(name: str) -> Template:
    return Template(resources.files(__package__).joinpath("templates", name).read_text("utf-8"))


def render_all(opts: InstrumentOptions) -> tuple[RenderedFile, ...]:
    """Every file ``tailtriage instrument`` writes, in the order to apply them."""
    deployment = opts.deployment or opts.engine
    collector = f"otel-collector.{opts.namespace}.svc"
    ttft = min((s.threshold for s in opts.slos if s.metric == "ttft"), default=DEFAULT_TTFT_S)
    e2e = min((s.threshold for s in opts.slos if s.metric == "e2e"), default=LONG_REQUEST_S)
    values = {
        "namespace": opts.namespace,
        "deployment": deployment,
        "engine": opts.engine,
        "collector_host": collector,
        "decision_wait": str(DECISION_WAIT_S),
        "ttft_threshold_s": f"{ttft:g}",
        "latency_threshold_ms": f"{e2e * 1000:g}",
        "baseline_percent": str(BASELINE_PERCENT),
        "scrape_interval": str(SCRAPE_INTERVAL_S),
        "recording_rules": files.RECORDING_RULES,
        "alert_rules": files.ALERT_RULES,
        "engine_port": str(ENGINE_PORTS[opts.engine]),
    }
    exporter = _template(f"exporter-{opts.exporter}.yaml").substitute(values).rstrip("\n")
    values["exporter_block"] = exporter
    values["exporter_name"] = exporter.strip().split(":", 1)[0]
    metrics = ENGINE_METRICS[opts.engine]
    target = Target(deployment=deployment, namespace=opts.namespace)
    return (
        RenderedFile(files.COLLECTOR, _template("otel-collector.yaml").substitute(values)),
        RenderedFile(
            files.gateway_file(opts.gateway),
            _template(files.gateway_file(opts.gateway)).substitute(values),
        ),
        RenderedFile(
            files.engine_file(opts.engine),
            _template(files.engine_file(opts.engine)).substitute(values),
        ),
        RenderedFile(files.PROMETHEUS, _template("prometheus.yaml").substitute(values)),
        RenderedFile(files.RECORDING_RULES, recording_rules(metrics)),
        RenderedFile(files.ALERT_RULES, alert_rules(metrics, opts.slos)),
        RenderedFile(
            files.HPA,
            _scaling_header("HPA (autoscaling/v2) via prometheus-adapter")
            + hpa_v2(target, metrics.queue_gauge, QUEUE_TARGET),
        ),
        RenderedFile(
            files.KEDA,
            _scaling_header("KEDA ScaledObject (instead of the HPA)")
            + keda_scaled_object(target, metrics.queue_gauge, QUEUE_TARGET),
        ),
    )


def _scaling_header(what: str) -> str:
    return (
        f"# {what}: scale the engine on its queue, not on CPU.\n"
        "# Why: an LLM engine's CPU stays flat while requests pile up in its queue; the queue\n"
        "# depth rises the moment capacity runs short, so replicas come before TTFT breaches.\n"
    )


def write_all(rendered: Sequence[RenderedFile], out: Path) -> tuple[Path, ...]:
    """Write the files into ``out`` (created); an existing file is replaced."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for f in rendered:
            p = out / f.name
            p.write_text(f.text, encoding="utf-8")
            paths.append(p)
    except OSError as exc:
        raise InputError(
            f"cannot write the instrument files: {exc.strerror}", path=str(out)
        ) from exc
    return tuple(paths)


def with_defaults(opts: InstrumentOptions) -> InstrumentOptions:
    """``opts`` with the default SLOs when none were given."""
    if opts.slos:
        return opts
    from tailtriage.analyses.slo import parse_slos

    return dataclasses.replace(opts, slos=parse_slos(DEFAULT_SLOS))


#: SLOs the alert rules cover when none are given
DEFAULT_SLOS: Final = "p95 ttft < 500ms, p95 itl < 50ms"
