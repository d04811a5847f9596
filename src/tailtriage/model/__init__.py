"""The canonical model: the Capture and the shared vocabulary.

* ``capture``     the Capture: every table known about a stack over a time range, persisted
                  as a DuckDB file
* ``schema``      the Arrow schemas of the Capture's tables (seconds and tokens)
* ``store``       where the SQL scans run: the Store protocol and DuckDBStore
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
from tailtriage.model.store import DuckDBStore, Store
from tailtriage.model.vocabulary import ACTIONS, CATEGORIES, METRICS, STAGES

__all__ = [
    "ACTIONS",
    "CATEGORIES",
    "METRICS",
    "SCHEMA_VERSION",
    "STAGES",
    "Capture",
    "ClockAdjustment",
    "DuckDBStore",
    "FileProvenance",
    "Metadata",
    "SkippedFile",
    "Store",
    "concat",
    "is_capture_file",
    "make_table",
]
