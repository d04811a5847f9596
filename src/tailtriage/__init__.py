"""tailtriage: find why an LLM inference API breaches its latency SLO, prove it, fix it.

The public API is small; everything not listed in ``__all__`` is private."""

from tailtriage.errors import TailtriageError
from tailtriage.model import Capture
from tailtriage.report import Report

__version__ = "0.1.0"

__all__ = ["Capture", "Report", "TailtriageError", "__version__"]
