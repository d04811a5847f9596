"""Does each request's time per output token track the batch it decoded in?

A memory-bound decode step re-reads the weights and every running sequence's KV cache, so its
length grows with the running batch: a request decoded beside 120 others gets its tokens slower
than one decoded beside 40 (issue 14, repair 7: "TPOT tracks batch size").  Prefill
interference stretches token gaps at the moments long prompts are prefilled, whatever the
batch.  The correlation is read per request: its TPOT against its own replica's running gauge
(``vllm:num_requests_running`` and its spellings, full rate whatever the trace sampling) over
its decode, across the baseline and the incident so the batch varies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.diagnosis.signals import replica_of
from tailtriage.model import metric_catalog as M

_REQUESTS_SQL = """
SELECT replica, first_token, finish, output_tokens FROM requests
WHERE arrival >= ? AND arrival < ? AND replica IS NOT NULL AND first_token IS NOT NULL
  AND finish > first_token AND output_tokens > 2 AND status = 'ok'
"""

_SERIES_SQL = """
SELECT labels, time, value FROM series WHERE metric = ? AND time >= ? AND time <= ? ORDER BY time
"""


@dataclass(frozen=True)
class BatchTpot:
    r: float  # Pearson correlation of per-request TPOT and the running batch it decoded in
    requests: int  # requests matched to a replica's gauge


def batch_tpot(ctx: DiagnosisContext) -> BatchTpot | None:
    """The correlation (see module doc); None without a store, a running gauge per replica,
    or enough matched requests."""
    if ctx.store is None:
        return None
    metric = M.resolve("running", ctx.signals.metric_names)
    if metric is None:
        return None
    base = ctx.windows.baseline
    lo = min(ctx.windows.incident[0], base[0]) if base else ctx.windows.incident[0]
    hi = ctx.windows.incident[1]
    by_pod: dict[str, list[tuple[float, float]]] = {}
    for row in ctx.store.query(_SERIES_SQL, [metric, lo, hi]).to_pylist():
        by_pod.setdefault(replica_of(str(row["labels"] or "")), []).append(
            (float(row["time"]), float(row["value"]))
        )
    series = {p: np.asarray(v) for p, v in by_pod.items() if p}
    batch, tpot = [], []
    for req in ctx.store.query(_REQUESTS_SQL, [lo, hi]).to_pylist():
        s = series.get(str(req["replica"]))
        if s is None:
            continue
        first, finish = float(req["first_token"]), float(req["finish"])
        inside = (s[:, 0] >= first) & (s[:, 0] <= finish)
        # the scrapes during its decode, else the one nearest its middle
        b = (
            s[inside, 1].mean()
            if inside.any()
            else s[np.abs(s[:, 0] - (first + finish) / 2).argmin(), 1]
        )
        if not np.isfinite(b):
            continue
        batch.append(b)
        tpot.append((finish - first) / (int(req["output_tokens"]) - 1))
    if len(batch) < T.MIN_CORRELATION_REQUESTS or np.std(batch) == 0 or np.std(tpot) == 0:
        return None
    return BatchTpot(float(np.corrcoef(batch, tpot)[0, 1]), len(batch))
