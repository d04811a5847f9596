"""tailtriage: find why an LLM inference API breaches its latency SLO, prove it, fix it.

The public API is small; everything not listed in ``__all__`` is private.  Names are loaded
on first use (PEP 562), so ``import tailtriage`` stays cheap and has no side effects::

    from tailtriage import load_capture, triage
    capture = load_capture("bundle/")
    report = triage(capture, "p95 ttft < 500ms")

The packages, one pipeline stage each; imports point one way, down this list (the
import-linter contracts in ``pyproject.toml``):

* ``cli``          the ``tailtriage`` command line: one ``cmd_<name>`` module per command
* ``pipeline``     the wiring: load, analyze, triage, compare, doctor, watch, demo
* ``collect``      live telemetry: incident bundles from running systems, the OTLP receiver
* ``renderers``    a Report to text: terminal, JSON, self-contained HTML
* ``report``       the Report every renderer reads, and its JSON form (module)
* ``doctor``       which telemetry is missing for triage, and the fix
* ``instrument``   the configs that make a serving stack triage-ready
* ``remediation``  actions per finding, predicted on the calibrated simulator
* ``advise``       the parallelism layout to run a model with
* ``exporter``     a Prometheus exporter of per-stage latency and its dashboards
* ``quantgate``    the accuracy gate for a quantized endpoint
* ``diagnosis``    rules from analysis results to ranked, evidence-backed findings
* ``loadgen``      the load generator and the simulated servers (``serve-sim``)
* ``simulator``    the serving-stack simulator that emits a Capture
* ``analyses``     pure functions from a Store to frozen results: percentiles, decomposition
* ``sources``      telemetry formats read into a Capture
* ``model``        the Capture, its schemas, the Store and the shared vocabulary
* ``outputs``      every file written goes through here: outputs never destroy inputs (module)
* ``errors``       the one exception tree and its exit codes (module)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Capture": "tailtriage.model",
    "Report": "tailtriage.report",
    "SloSpec": "tailtriage.analyses.results",
    "TailtriageError": "tailtriage.errors",
    "analyze": "tailtriage.pipeline.analyze",
    "apply_overrides": "tailtriage.simulator",
    "compare": "tailtriage.pipeline.compare",
    "critical_path": "tailtriage.derive.critical_path",
    "load_capture": "tailtriage.store.input",
    "parse_slos": "tailtriage.analyses.slo",
    "read_prometheus": "tailtriage.sources.prometheus_live",
    "render": "tailtriage.renderers",
    "run_load": "tailtriage.loadgen",
    "simulate": "tailtriage.simulator",
    "triage": "tailtriage.pipeline.triage",
    "write_report": "tailtriage.renderers",
}

__all__ = [
    "Capture",
    "Report",
    "SloSpec",
    "TailtriageError",
    "__version__",
    "analyze",
    "apply_overrides",
    "compare",
    "critical_path",
    "load_capture",
    "parse_slos",
    "read_prometheus",
    "render",
    "run_load",
    "simulate",
    "triage",
    "write_report",
]

if TYPE_CHECKING:
    from tailtriage.analyses.results import SloSpec
    from tailtriage.analyses.slo import parse_slos
    from tailtriage.derive.critical_path import critical_path
    from tailtriage.errors import TailtriageError
    from tailtriage.loadgen import run_load
    from tailtriage.model import Capture
    from tailtriage.pipeline.analyze import analyze
    from tailtriage.pipeline.compare import compare
    from tailtriage.pipeline.triage import triage
    from tailtriage.renderers import render, write_report
    from tailtriage.report import Report
    from tailtriage.simulator import apply_overrides, simulate
    from tailtriage.sources.prometheus_live import read_prometheus
    from tailtriage.store.input import load_capture


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tailtriage' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
