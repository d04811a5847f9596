"""Stores: where the SQL scans run, and the one way in from a PATH or URL.

Analyses, diagnosis and the pipeline send SQL over the Capture's logical tables (``requests``,
``stages``, ``token_times``, ``spans``, ``series``, ``events``) to a :class:`Store` and get small
Arrow tables back.  ``input.open_input(path_or_url, since, until)`` picks the backend; its parts:

* ``base``                 the ``Store`` protocol (SQL) and ``InputStore`` (what the pipeline
                           reads of an opened input), ``DuckDBStore`` (embedded, over a
                           Capture) and the portable SQL ``literal``
* ``dialect``              the one SQL dialect layer (DuckDB, ClickHouse spellings)
* ``input``                ``open_input`` and ``load_capture``: files, bundles, saved captures,
                           live Prometheus, ``clickhouse://`` / ``chdb://`` URLs
* ``clickhouse``           ``ClickHouseStore``: ``otel_traces`` with the logical tables as views
* ``clickhouse_url``       ``clickhouse://`` / ``chdb://`` URL parsing and the password
* ``clickhouse_sql``       span -> request derivation (stage rules, critical path) as SQL
* ``clickhouse_plausible`` the time plausibility checks as SQL
* ``clickhouse_export``    the sink: spans of a bundle into an ``otel_traces`` table
"""

from tailtriage.store.base import DuckDBStore, InputStore, Store, opened

__all__ = ["DuckDBStore", "InputStore", "Store", "opened"]
