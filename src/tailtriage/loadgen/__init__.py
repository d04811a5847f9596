"""Load generator: drives an OpenAI-compatible endpoint and measures it from the client.

TTFT and per-gap ITL come from kernel receive stamps of each SSE event's bytes, taken before
any parsing; every request carries a W3C ``traceparent`` and ``X-Request-ID`` so server spans
join the client's.  See ``docs/loadgen.md``."""

from tailtriage.loadgen.config import LoadConfig
from tailtriage.loadgen.request import RequestRecord
from tailtriage.loadgen.results import Summary, summarize, to_capture
from tailtriage.loadgen.run import RunResult, finalize, run_load
from tailtriage.loadgen.runner import Timeouts

__all__ = [
    "LoadConfig",
    "RequestRecord",
    "RunResult",
    "Summary",
    "Timeouts",
    "finalize",
    "run_load",
    "summarize",
    "to_capture",
]
