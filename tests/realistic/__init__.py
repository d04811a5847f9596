"""An independent generator of realistic incident bundles: the yardstick of the diagnosis
(issue 14), written from the real systems' documentation (``reference/telemetry-conventions.md``
for names and formats, ``reference/analysis-anchors.md`` for the performance model), sharing no
code with ``tailtriage.simulator``.

Importable by pytest (``tests/`` is on its path) and by ``bench/`` scripts (which put
``tests/`` on ``sys.path``)::

    from realistic import Case, corpus_cases, write_case

Package map (data flows top to bottom):

- ``spec``      the frozen specification of a stack and its incident; ``with_overrides``
- ``workload``  arrivals (Poisson, ramps, bursts, diurnal swing) and request lengths
- ``engine``    one vLLM-like replica: continuous batching, token budget, KV cache, roofline
- ``fleet``     gateway, Knative, API server, autoscaler, Deployment controller, pod start-up:
                one event loop -> a frozen ``Outcome``
- ``truth``     true stage times, p95s and the p95 breakdown, from every request
- ``write_otlp`` / ``write_prom`` / ``write_kube``  the files real systems write
- ``variants``  causes x platforms x seeds, domain randomisation, the held-out split
- ``corpus``    one case on disk: ``bundle/``, ``truth.json``, ``requests.npz`` (every request's truth), derived copies
"""

from realistic.corpus import DERIVED, after_fix, case_by_name, read_truth, write_case
from realistic.fleet import simulate
from realistic.outcome import Outcome
from realistic.spec import Spec, with_overrides
from realistic.variants import Case, build, corpus_cases, split_of

__all__ = [
    "DERIVED",
    "Case",
    "Outcome",
    "Spec",
    "after_fix",
    "build",
    "case_by_name",
    "corpus_cases",
    "read_truth",
    "simulate",
    "split_of",
    "with_overrides",
    "write_case",
]
