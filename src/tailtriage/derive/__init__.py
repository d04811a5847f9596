"""Derivation: the ``spans`` table the readers of :mod:`tailtriage.sources` parsed becomes the
``requests`` and ``stages`` tables the analyses read.

``derive.derive(capture, rules)`` does it all (dedup, clock-skew repair, critical path, rows);
its parts:

* ``rules``         stage-mapping rules as data (``stage_rules.yaml``, plus a user file),
                    compiled to one SQL ``CASE``
* ``_spantable``    the normalised span table (one DuckDB query) and the graph the walks use
* ``skew``          span trees as index arrays; Jaeger's clock-skew adjustment, vectorised
* ``critical_path`` Jaeger UI's critical path: the exact per-trace walk and its vector parts
* ``_rows``         the ``requests`` and ``stages`` rows from the critical-path sections

Imports point down only: ``sources`` (the span conventions), ``model``, ``errors``.  The
ClickHouse store runs the same rules and semantics as SQL inside the database.
"""

from tailtriage.derive._spantable import POOL_WAIT_LABEL

__all__ = ["POOL_WAIT_LABEL"]
