"""The canonical model: the Capture and the shared vocabulary."""

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
