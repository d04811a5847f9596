"""Is the time in Envoy a queue for an upstream connection, or network?

With an upstream connection-pool limit (Istio ``DestinationRule`` ``connectionPool.tcp.
maxConnections`` / ``http.http1MaxPendingRequests``) a request waits inside Envoy between
receiving its last byte and sending its first byte upstream, and the requests that overflow
the pending queue fail with response flag ``UO``.  From the gateway spans:

* **pool wait** = ``first_upstream_tx_byte_sent`` - ``last_downstream_rx_byte_received``
  (Envoy's verbose span events, seconds from the span start) on spans with no connect failure
  (``UF``) and no retry (``retry.count``), whose time is connect and resend, i.e. network;
* **limited** = some spans carry ``UO``, or Envoy's ``envoy_cluster_upstream_rq_pending_*``
  gauges show a pending queue: averaging a request, or present in the incident's scrapes and
  in none of the baseline's (a pool wait of a few hundred ms on a few requests per second is
  a queue of a fraction of a request, which a 30 s scrape catches now and then).

Without the verbose events (the default tracing config), the pool wait comes from Little's law
instead: the mean of Envoy's pending-queue gauge (summed over gateway pods) over the rate of
requests leaving it (``envoy_cluster_upstream_rq_total``, else the engines' finished-request
counter: every request that left the queue ends there), in each window.

The pool wait's growth over the mean ingress stage's growth is the share of the ingress time
that is a gateway queue - unless ``derive`` already cut the pool wait out of the ingress stage
into ``gateway_queue`` (stage rows named :data:`~tailtriage.derive.POOL_WAIT_LABEL`): then the
ingress stage holds no pool wait and none of it is moved again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from tailtriage.derive import POOL_WAIT_LABEL
from tailtriage.diagnosis import thresholds as T
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.sources.spans import EVENTS_KEY
from tailtriage.store.dialect import dialect_of

#: Envoy's pending-queue gauges (stats sink / Prometheus names)
PENDING_METRICS: Final = (
    "envoy_cluster_upstream_rq_pending_active",
    "envoy_cluster_upstream_rq_pending_overflow",
)


@dataclass(frozen=True)
class EnvoyPool:
    spans: int  # gateway spans with response flags in the incident
    overflows: int  # of them with UO (pending queue full)
    pending: float | None  # mean of Envoy's pending-queue gauge in the incident
    pool_wait_growth: float | None  # mean pool wait, incident - baseline (seconds)
    ingress_growth: float | None  # mean ingress stage, incident - baseline (seconds)
    #: where the pool wait comes from: Envoy's verbose span events, or Little's law on the
    #: pending gauge and the request rate
    wait_source: Literal["span_events", "littles_law"] = "span_events"
    #: largest scrape of the pending-queue gauge in the incident, and in the baseline
    pending_peak: float | None = None
    baseline_pending_peak: float | None = None

    @property
    def appeared(self) -> bool:
        """A pending queue scraped in the incident where the baseline never showed one."""
        return (
            self.pending_peak is not None
            and self.pending_peak >= T.ENVOY_PENDING_MIN
            and self.baseline_pending_peak is not None
            and self.baseline_pending_peak == 0.0
        )

    @property
    def limited(self) -> bool:
        return self.overflows > 0 or (self.pending or 0.0) >= T.ENVOY_PENDING_MIN or self.appeared

    @property
    def queue_fraction(self) -> float:
        """Share of the ingress stage's growth that is pool wait (0 without a limit)."""
        if not self.limited or not self.pool_wait_growth or not self.ingress_growth:
            return 0.0
        if self.ingress_growth <= 0:
            return 0.0
        return min(max(self.pool_wait_growth / self.ingress_growth, 0.0), 1.0)


def _flags_sql(flags: str) -> str:
    return f"""
SELECT count(*) AS n,
       sum(CASE WHEN {flags} LIKE '%UO%' THEN 1 ELSE 0 END) AS uo
FROM spans WHERE start >= ? AND start < ? AND {flags} IS NOT NULL
"""


#: DuckDB JSON paths to the verbose events (other stores: no pool-wait figure)
_EVENT = 'json_extract_string(attributes, \'$."{key}"."{event}"\')'


def _wait_sql() -> str:
    tx = _EVENT.format(key=EVENTS_KEY, event="first_upstream_tx_byte_sent")
    rx = _EVENT.format(key=EVENTS_KEY, event="last_downstream_rx_byte_received")
    return f"""
SELECT avg(CAST({tx} AS DOUBLE) - coalesce(CAST({rx} AS DOUBLE), 0.0)) AS w
FROM spans
WHERE start >= ? AND start < ? AND {tx} IS NOT NULL
  AND coalesce(json_extract_string(attributes, '$.response_flags'), '-') NOT LIKE '%UF%'
  AND coalesce(TRY_CAST(json_extract_string(attributes, '$."retry.count"') AS DOUBLE), 0) = 0
"""


#: the pending-queue gauge's mean and peak in a window
_PENDING_SQL = """
SELECT avg(value) AS v, max(value) AS m FROM series WHERE metric = ? AND time >= ? AND time < ?
"""

#: pool-wait rows derive already cut out of the ingress stage into gateway_queue
_SPLIT_SQL = """
SELECT count(*) AS n FROM stages WHERE span_name = ? AND start >= ? AND start < ?
"""

_INGRESS_SQL = """
SELECT sum(s.duration) / count(DISTINCT r.request_id) AS m
FROM requests AS r JOIN stages AS s ON s.request_id = r.request_id
WHERE r.arrival >= ? AND r.arrival < ? AND s.stage = 'ingress'
"""


def envoy_pool(ctx: DiagnosisContext) -> EnvoyPool:
    """The pool-limit evidence of the gateway spans and metrics (see module doc)."""
    if ctx.store is None:
        return EnvoyPool(0, 0, None, None, None)
    store, inc, base = ctx.store, ctx.windows.incident, ctx.windows.baseline
    d = dialect_of(store)
    flags = d.json_string("attributes", "response_flags")
    row = store.query(_flags_sql(flags), list(inc)).to_pylist()[0]
    pending = peak = base_peak = None
    for metric in PENDING_METRICS:
        if metric in ctx.signals.metric_names:
            got = store.query(_PENDING_SQL, [metric, *inc]).to_pylist()[0]
            pending, peak = _f(got["v"]), _f(got["m"])
            if base is not None:
                base_peak = _f(store.query(_PENDING_SQL, [metric, *base]).to_pylist()[0]["m"])
            break
    wait = ingress = None
    source: Literal["span_events", "littles_law"] = "span_events"
    split = store.query(_SPLIT_SQL, [POOL_WAIT_LABEL, *inc]).to_pylist()[0]["n"]
    if base is not None and not split:
        g = [store.query(_INGRESS_SQL, list(win)).to_pylist()[0]["m"] for win in (inc, base)]
        if None not in g:
            ingress = float(g[0]) - float(g[1])
        if d.name == "duckdb":
            w = [store.query(_wait_sql(), list(win)).to_pylist()[0]["w"] for win in (inc, base)]
            if None not in w:
                wait = float(w[0]) - float(w[1])
        if wait is None:
            wait = _littles_wait_growth(ctx)
            source = "littles_law"
    return EnvoyPool(
        int(row["n"] or 0), int(row["uo"] or 0), pending, wait, ingress, source, peak, base_peak
    )


def _f(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def _littles_wait_growth(ctx: DiagnosisContext) -> float | None:
    """Mean pool wait, incident - baseline, as W = L / lambda in each window: L the pending
    queue summed over the gateway pods, lambda the full-rate requests leaving it."""
    sig = ctx.signals
    waits = []
    for w in (sig.incident, sig.baseline):
        if w is None:
            return None
        queue = w.gauge("gateway_queue")
        rate = w.rate("requests_done")
        if queue is None or queue.metric != PENDING_METRICS[0] or not rate:
            return None
        waits.append(queue.mean / rate)
    return waits[0] - waits[1]
