"""Sampling check: are enough requests traced for the SLO's percentile?

The percentile needs a minimum number of requests before its order-statistic confidence interval
exists (``analyses.quantiles.min_count``: 72 for p95, 368 for p99).  Incidents are found in
30 s bins (``analyses.windows.DEFAULT_BIN``), so every bin needs that many traced requests.  The
engines' own request counters say how many requests there were, so the kept fraction and the
fraction the percentile needs are both known."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tailtriage.analyses.quantiles import min_count
from tailtriage.analyses.windows import DEFAULT_BIN
from tailtriage.doctor.check import register
from tailtriage.doctor.facts import Facts
from tailtriage.doctor.fixes import fix
from tailtriage.doctor.gap import Gap
from tailtriage.instrument import files
from tailtriage.model.vocabulary import STAGES

#: a traced/counted ratio above this is full tracing (window edges, errors, retries)
FULLY_TRACED: Final = 0.9


@register("sampling", group="sampling")
def sampling(facts: Facts) -> Iterator[Gap]:
    m = facts.metrics
    if m.counted_requests is None or m.counted_range is None or m.counted_requests <= 0:
        return
    kept = m.traced_in_range / m.counted_requests
    if kept >= FULLY_TRACED or not facts.slos:
        return
    p = max(s.percentile for s in facts.slos)
    need = min_count(p)
    seconds = m.counted_range[1] - m.counted_range[0]
    per_bin = m.counted_requests / seconds * DEFAULT_BIN if seconds > 0 else 0.0
    needed = need / per_bin if per_bin > 0 else 1.0
    if kept >= needed:
        return
    rate = m.counted_requests / seconds if seconds > 0 else 0.0
    yield Gap(
        check="sampling",
        what=(
            f"traces are sampled too thinly for p{p:g}: {m.traced_in_range} of "
            f"{m.counted_requests:.0f} requests traced ({kept:.1%}); p{p:g} needs {need} "
            f"requests per {DEFAULT_BIN:g} s bin, at {rate:.1f} req/s a ratio of at least "
            f"{min(needed, 1.0):.0%}"
        ),
        # every stage's share of the tail, so every stage the traces show
        undecidable=tuple(s for s in STAGES if facts.traces.stage_requests.get(s)),
        fix=fix(
            facts,
            files.COLLECTOR,
            "sample by tail, not by head: keep every slow or "
            "failed request and a fraction of the rest",
        ),
        cost=(
            "the Collector holds each trace for its decision wait (memory ~ spans/s x "
            "wait); storage grows with the kept fraction"
        ),
        metrics=frozenset(s.metric for s in facts.slos),
        evidence=f"request count from {m.counted_from}",
    )
