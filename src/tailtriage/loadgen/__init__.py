"""Load generator: drives an OpenAI-compatible endpoint and measures it from the client.

TTFT and per-gap ITL come from kernel receive stamps of each SSE event's bytes, taken before
any parsing; every request carries a W3C ``traceparent`` and ``X-Request-ID`` so server spans
join the client's.  See ``docs/loadgen.md``.

``run.run_load(config, out)`` runs a load; its parts:

* ``config``          the settings of one run and the request specs they imply
* ``workload``        prompt and output lengths, synthetic prompts, prompt files
* ``schedule``        when to send: open-loop arrival processes, closed loop
* ``replay_formats``  arrival schedules to replay, read and written in three formats
* ``request``         one request: its spec, its flight, its measured record
* ``clock``           monotonic clocks and the kernel's receive stamps
* ``http``            an HTTP/1.1 client connection that stamps every read
* ``pool``            keep-alive connections to one endpoint
* ``sse``             SSE events of one stream into token arrivals (after the request)
* ``runner``          one event loop's share of a run, and its self-checks
* ``run``             one loop or several worker processes; the run's outputs
* ``sink``            records to JSON lines while the run goes
* ``results``         records to a summary, a Capture and OTLP/JSON client spans
* ``search``          ``--find-max-rate``: the highest rate that meets every SLO
* ``evalset``         evaluation sets and how an answer is scored (``quantgate``)
* ``server``          the simulated engine servers of ``tailtriage serve-sim``
"""

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
