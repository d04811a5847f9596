"""Live telemetry: gather an incident bundle from running systems, or receive spans as they
are exported.  Above ``sources`` (whose readers, Prometheus client and redaction it reuses),
below ``pipeline`` (whose ``watch`` loop calls it).  See docs/collect.md.

``bundle.collect_bundle(request, out)`` runs a whole ``tailtriage collect``; its parts:

* ``bundle``        the collect request, and the run that writes the bundle folder
* ``kubernetes``    pods, events, workloads of a window through the official client
* ``prometheus``    ``query_range`` responses for the metric catalog, namespace-filtered
* ``traces``        the window's slowest traces from Tempo or Jaeger query APIs
* ``clickhouse_traces``  the window's traces from a ClickHouse ``otel_traces`` table, as OTLP
* ``manifest``      ``manifest.json``: asked, came back, failed and why, redacted
* ``_http``         JSON GETs with timeouts and one-line errors (Tempo, Jaeger)

and for ``receive`` / ``watch``:

* ``spool``         a bounded queue of span batches and the thread that writes them
* ``receiver``      the OTLP/HTTP receiver in front of the spool
* ``alertmanager``  Alertmanager's webhook payload (version 4) as frozen alerts
* ``burn_rate``     multi-window SLO burn rates from the engines' histograms
"""
