"""Sources: telemetry files and live backends read into a Capture's raw tables (``spans``,
``series``, ``events``), normalised, redacted, with bad records skipped and counted.

``bundle.read_bundle(folder)`` reads every file of an incident bundle, each through the
:class:`base.Source` whose ``sniff`` claims it (a registry: one ``register`` call per format).

Readers, one per format:

* ``otlp_json``      OTLP/JSON traces (Collector file exporter lines, single documents);
                     ``otlp_halves`` reads a large file's two halves in two processes
* ``otlp_proto``     OTLP protobuf traces
* ``jaeger``         Jaeger UI / query API JSON;  ``jaeger_domain`` its protobuf-JSON form
* ``zipkin``         Zipkin v2 JSON
* ``otlp_metrics``   OTLP/JSON metrics
* ``exposition``     Prometheus text exposition and OpenMetrics snapshots
* ``prometheus_api`` saved Prometheus HTTP API responses
* ``kubernetes``     ``kubectl get events`` / ``get pods`` JSON
* ``vllm_run``       vLLM per-request timelines (benchmark runs)
* ``capture_file``   a saved capture (``tailtriage ingest -o``)

Live readers: ``prometheus_live`` (the catalog's metrics over the HTTP API).  The ClickHouse
``otel_traces`` backend is a Store and lives in :mod:`tailtriage.store`.

Shared by the readers:

* ``spans``          span normalisation (ids, kinds, statuses) and the column accumulator
* ``redact``         the one secret rule and the redaction every reader stores values through
* ``_safety``        defences against hostile or damaged input (sizes, depth, positions)
* ``_series``        helpers of the metric readers
* ``plausible``      impossible timestamps set aside;  ``events_merge`` one Kubernetes fact once

Turning spans into requests and stages is :mod:`tailtriage.derive`, one layer up; the
DuckDB/ClickHouse stores the analyses query are :mod:`tailtriage.store`; the metric catalog and
the engines' phase histograms (pure data the analyses read too) are in :mod:`tailtriage.model`.
"""
