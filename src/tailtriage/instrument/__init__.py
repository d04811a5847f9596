"""Instrument: the configs that make a serving stack triage-ready.

* ``files``      the names of the files ``tailtriage instrument`` writes (doctor points at them)
* ``engines``    per engine: the queue gauge an autoscaler reads, the phase histograms
* ``rules``      Prometheus recording rules (queueing vs execution) and burn-rate alerts
* ``render``     the files from the shipped ``templates/`` and the rule builders
"""
