"""Wiring: the only package (with ``cli``) that sees every stage of the pipeline.

* ``load``        a Capture from whatever PATH or URL the user gave; requests derived once
* ``analyze``     Capture -> Report of kind "analyze": the tail analysis
* ``triage``      Capture -> Report of kind "triage": analyze, diagnose, remediate
* ``compare``     two captures or windows -> Report of kind "compare"
* ``clickhouse``  analyze / triage / ingest / export over ClickHouse ``otel_traces``
* ``doctor``      Capture -> DoctorResult: the telemetry gaps that block triage
* ``watch``       ``tailtriage watch``: from an SLO breach to a posted triage
* ``notify``      a triage's short summary for a Slack-compatible webhook
* ``demo``        the worked example of design section 1, end to end
"""
