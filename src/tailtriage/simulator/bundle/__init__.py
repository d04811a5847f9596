"""Write a simulated Capture as an incident bundle in the formats real systems export.

An SRE's incident bundle holds what the stack's own telemetry wrote: OTLP/JSON traces from the
OpenTelemetry Collector's file exporter, Prometheus ``query_range`` answers, and ``kubectl get
events|pods -o json``.  The simulator knows its ground truth (the stage of every interval, the
scenario, the root cause); none of it may leak into the bundle, or a diagnosis that passes on a
simulated bundle would prove nothing.  So every stage is expressed the way the real component
reports it (telemetry-conventions.md sections 1.1, 3, 4, 5):

* ``ingress``       -> Istio ingress gateway SERVER span, self time before its ``router <cluster>
  egress`` CLIENT span (Envoy verbose events carry the first byte sent downstream = TTFT);
* ``pending``       -> Knative activator ``throttler_try`` (waiting for a ready pod), followed by
  ``activator_proxy``;
* ``gateway_queue`` -> Knative queue-proxy ``queue_proxy`` with its child ``queue_wait``;
* ``api_server``    -> the vLLM frontend's FastAPI SERVER span ``POST /v1/chat/completions``,
  self time before vLLM's ``llm_request``;
* ``engine_queue``, ``prefill``, ``decode`` -> ``llm_request`` and its ``gen_ai.latency.*``
  attributes (vLLM V1 creates no child spans for them).

:func:`write_bundle` writes the folder; one module per format:

* ``traces``      OTLP/JSON lines, as the Collector's file exporter writes them
* ``prometheus``  ``/api/v1/query_range`` answers, one file per metric family
* ``kubernetes``  ``kubectl get events|pods -o json`` documents
* ``_common``     ids, OTLP attribute encoding, RFC 3339 times, the deployment's names
"""

from __future__ import annotations

from pathlib import Path

from tailtriage.model import Capture
from tailtriage.outputs import ensure_folder
from tailtriage.simulator.bundle.kubernetes import write_events, write_pods
from tailtriage.simulator.bundle.prometheus import write_series
from tailtriage.simulator.bundle.traces import write_traces

__all__ = ["write_bundle"]


def write_bundle(capture: Capture, out_dir: str | Path) -> list[Path]:
    """Write ``capture`` as an incident bundle in ``out_dir``; return the files written.

    Files: ``traces.otlp.jsonl`` (Collector file exporter, one ExportTraceServiceRequest per
    line), ``prometheus-<metric>.json`` (``/api/v1/query_range`` answers, one per metric
    family), ``kubectl-events.json`` and ``kubectl-pods.json``.  Nothing written names a
    stage, a scenario or a root cause."""
    out = Path(out_dir)
    ensure_folder(out)
    paths: list[Path] = []
    if capture.requests.num_rows:
        traces = out / "traces.otlp.jsonl"
        write_traces(capture, traces)
        paths.append(traces)
    if capture.series.num_rows:
        paths.extend(write_series(capture, out))
    events = write_events(capture, out / "kubectl-events.json")
    if events is not None:
        paths.append(events)
    if capture.events.num_rows or capture.requests.num_rows:
        paths.append(write_pods(capture, out / "kubectl-pods.json"))
    return paths
