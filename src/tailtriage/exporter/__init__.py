"""A Prometheus exporter of per-stage latency, and the Grafana dashboards and rules that read it.

Queueing and execution become separate series: every stage's duration is a histogram sample
labelled with the stage and its kind (``queue`` or ``execution``), with the request's trace id
as an OpenMetrics exemplar, so a slow bucket links to the trace that fell in it.

* ``observations``  what the exporter is fed: :class:`StageObservation` records, from a capture
                    (:func:`capture_observations`) or any :class:`ObservationSource` (the hook
                    for a live OTLP receiver)
* ``metrics``       the histograms (``prometheus_client``) and how an observation lands in them
* ``server``        the loopback HTTP endpoint and the replay of a capture in (scaled) time
* ``dashboards``    Grafana dashboard JSON, recording rules and alert rules over those series
"""
