"""Command line: `tailtriage ...` (design section 3.4).

* ``_app``        the typer application and the error boundary (exception -> exit code)
* ``_options``    the options commands share: ``--slo``, ``--incident``, ``--baseline``,
                  ``--json`` and their parsers
* ``commands``    imports every ``cmd_*`` module once, in ``--help`` order (add one line there)

One module per command, each ``cmd_<name>.py``:

* ``cmd_triage``           ingest, analyze, diagnose and remediate in one command
* ``cmd_analyze``          where the tail time goes: SLO status, percentiles, stages
* ``cmd_compare``          two captures or windows: which SLO and stage changed, and is it real
* ``cmd_whatif``           replay the calibrated simulator with ``--set`` changes
* ``cmd_doctor``           which telemetry is missing for triage, and the fix
* ``cmd_ingest``           read telemetry into a saved capture
* ``cmd_render``           render a saved report or capture again
* ``cmd_collect``          gather an incident bundle from the live sources
* ``cmd_receive``          an OTLP/HTTP receiver streaming spans into a capture
* ``cmd_watch``            triage every SLO incident as it happens
* ``cmd_export``           a bundle's spans into a ClickHouse ``otel_traces`` table
* ``cmd_export_workload``  the incident's arrival schedule, for a load generator to replay
* ``cmd_simulate``         run a scenario; save its capture, bundle and summary
* ``cmd_demo``             the worked example end to end
* ``cmd_bench``            ``bench`` (the load generator) and ``serve-sim`` (simulated engines)
* ``cmd_quantgate``        the accuracy gate for a quantized endpoint
* ``cmd_advise``           rank the parallelism layouts of a GPU budget
* ``cmd_instrument``       the configs that make a serving stack triage-ready
* ``cmd_exporter``         a Prometheus exporter of per-stage latency fed by a capture
* ``cmd_dashboards``       Grafana dashboards and Prometheus rules over the exporter's series
"""

from tailtriage.cli._app import app, main

__all__ = ["app", "main"]
