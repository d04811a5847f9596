"""The canonical model: the Capture and the shared vocabulary.

* ``capture``     the Capture: every table known about a stack over a time range, persisted
                  as a DuckDB file
* ``schema``      the Arrow schemas of the Capture's tables (seconds and tokens)
* ``timeparse``   the one time grammar: unix seconds, RFC 3339, or a duration ago (``1h30m``)
* ``metric_catalog`` every exported spelling of each serving metric, across engines and versions
* ``engine_phases``  which engine histogram measures which latency or stage
* ``vocabulary``  stage names, root-cause categories, actions, metrics (a public contract)
"""

from tailtriage.model.capture import (
    Capture,
    ClockAdjustment,
    FileProvenance,
    Metadata,
    SkippedFile,
    concat,
    is_capture_file,
)
from tailtriage.model.schema import SCHEMA_VERSION, make_table
from tailtriage.model.vocabulary import ACTIONS, CATEGORIES, METRICS, STAGES

__all__ = [
    "ACTIONS",
    "CATEGORIES",
    "METRICS",
    "SCHEMA_VERSION",
    "STAGES",
    "Capture",
    "ClockAdjustment",
    "FileProvenance",
    "Metadata",
    "SkippedFile",
    "concat",
    "is_capture_file",
    "make_table",
]
