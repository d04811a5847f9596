"""The facts the rules reason over, read once from the capture.

Every scan over requests, stages or series is SQL run by the :class:`~tailtriage.model.Store`
(DuckDB by default); Python only sees per-window aggregates, the few hundred points of a gauge
and the event list.  Nothing here reads ``Metadata.extra`` or file names: the rules must work on
telemetry exported by real systems."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import orjson

from tailtriage.analyses.engine_metrics import token_means
from tailtriage.diagnosis import thresholds as T
from tailtriage.model import metric_catalog as M
from tailtriage.store import Store
from tailtriage.store.dialect import dialect_of

#: label keys that name the replica a series belongs to, most specific first
_REPLICA_LABELS = ("pod", "exported_pod", "instance", "replica", "engine")


@dataclass(frozen=True)
class GaugeStats:
    """A gauge signal over one window, summed (queues) or averaged (ratios) across replicas."""

    metric: str
    mean: float
    max: float
    first: float
    last: float
    slope: float  # units per second, least squares over the window
    samples: int
    per_replica_mean: Mapping[str, float] = field(default_factory=dict)
    per_replica_max: Mapping[str, float] = field(default_factory=dict)
    #: samples per replica: a replica that joined or left mid-window has fewer
    per_replica_samples: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplicaStats:
    requests: int
    ttft_mean: float | None  # a signal for imbalance only, never an SLO status
    #: first and last arrival it served in the window: how long it took traffic
    first: float | None = None
    last: float | None = None


@dataclass(frozen=True)
class WindowSignals:
    start: float
    end: float
    requests: int = 0
    arrival_rps: float = 0.0
    completion_rps: float = 0.0
    output_tokens_per_s: float = 0.0
    prompt_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    #: the typical prompt: a long-prompt minority moves the mean, a shift of the mix the median
    prompt_tokens_median: float | None = None
    gauges: Mapping[str, GaugeStats] = field(default_factory=dict)
    #: counter signal -> increase over the window
    counters: Mapping[str, float] = field(default_factory=dict)
    replicas: Mapping[str, ReplicaStats] = field(default_factory=dict)
    #: mean KV-cache usage over the scrapes at which that replica had requests waiting (None:
    #: fewer than MIN_JOINT_SAMPLES such scrapes): whether the queue met a full cache, which
    #: a fleet mean diluted by idle or newly started replicas does not say
    kv_when_waiting: float | None = None

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)

    def gauge(self, signal: str) -> GaugeStats | None:
        return self.gauges.get(signal)

    def rate(self, signal: str) -> float | None:
        v = self.counters.get(signal)
        return None if v is None else v / self.seconds


@dataclass(frozen=True)
class EventRecord:
    time: float
    kind: str
    object_name: str | None
    reason: str | None
    message: str | None
    duration: float | None
    replicas: int | None  # for rescale events


@dataclass(frozen=True)
class Interference:
    """Decode slowdown of requests whose decode overlapped a long prompt's prefill on the
    same replica (computed from stage spans, so it works without token times)."""

    long_prompt_tokens: float  # threshold used for "long"
    overlapped: int  # decoding requests that overlapped at least one long prefill
    clean: int
    tpot_ratio: float  # mean TPOT overlapped / mean TPOT clean
    tail_lift: float  # share overlapped among the slowest 5 % TPOT / share overall


@dataclass(frozen=True)
class Signals:
    incident: WindowSignals
    baseline: WindowSignals | None
    events: tuple[EventRecord, ...] = ()
    metric_names: frozenset[str] = frozenset()
    interference: Interference | None = None
    has_token_times: bool = False
    has_stages: bool = False
    #: metrics the HPA scales on (kube-state-metrics target metric labels, rescale reasons)
    hpa_metrics: tuple[str, ...] = ()
    #: pods created around the incident: (pod, created, seconds until it served a first token)
    startups: tuple[tuple[str, float, float], ...] = ()
    #: GPUs per replica (distinct DCGM ``gpu`` labels per pod): the tensor/pipeline degree
    gpus_per_replica: int | None = None

    def events_of(self, *kinds: str, lead: float = T.EVENT_LEAD_S) -> tuple[EventRecord, ...]:
        """Events of ``kinds`` from ``lead`` seconds before the incident to its end."""
        lo, hi = self.incident.start - lead, self.incident.end
        return tuple(e for e in self.events if e.kind in kinds and lo <= e.time <= hi)


# -- reading ------------------------------------------------------------------------------


def gather(
    store: Store,
    incident: tuple[float, float],
    baseline: tuple[float, float] | None,
) -> Signals:
    """Read every signal the rules use for the incident (and baseline) window."""
    names = frozenset(
        str(r) for r in store.query("SELECT DISTINCT metric FROM series").column(0).to_pylist()
    )
    inc = _window(store, incident, names)
    base = _window(store, baseline, names) if baseline else None
    counts = store.query(
        "SELECT (SELECT count(*) FROM token_times) AS tt, (SELECT count(*) FROM stages) AS st"
    ).to_pylist()[0]
    return Signals(
        incident=inc,
        baseline=base,
        events=_events(store),
        metric_names=names,
        interference=_interference(store, incident),
        has_token_times=bool(counts["tt"]),
        has_stages=bool(counts["st"]),
        hpa_metrics=_hpa_metrics(store, names),
        startups=_startups(store, incident[0] - T.EVENT_LEAD_S, incident[1]),
        gpus_per_replica=_gpus_per_replica(store, names),
    )


def _gpus_per_replica(store: Store, names: frozenset[str]) -> int | None:
    metric = M.resolve("gpu_busy", names) or M.resolve("gpu_dram", names)
    if metric is None:
        return None
    gpus: dict[str, set[str]] = {}
    for labels in (
        store.query("SELECT DISTINCT labels FROM series WHERE metric = ?", [metric])
        .column(0)
        .to_pylist()
    ):
        try:
            d = orjson.loads(labels or "{}")
        except orjson.JSONDecodeError:
            continue
        if isinstance(d, dict) and "gpu" in d:
            pod = str(d.get("pod") or d.get("exported_pod") or d.get("Hostname") or "")
            gpus.setdefault(pod, set()).add(str(d["gpu"]))
    return max((len(v) for v in gpus.values()), default=0) or None


def _startups(store: Store, lo: float, hi: float) -> tuple[tuple[str, float, float], ...]:
    """Start-up of each pod created in [lo, hi]: creation (``SuccessfulCreate``) to its first
    token served.  Works when the pod is gone from ``kubectl get pods`` at export time."""
    created: dict[str, float] = {}
    for r in store.query(
        "SELECT time, object_kind, object_name, attributes FROM events "
        "WHERE kind = 'pod_created' AND time >= ? AND time <= ?",
        [lo, hi],
    ).to_pylist():
        try:
            attrs = orjson.loads(r["attributes"] or "{}")
        except orjson.JSONDecodeError:
            attrs = {}
        pod = attrs.get("pod") if isinstance(attrs, dict) else None
        pod = pod or (r["object_name"] if r["object_kind"] == "Pod" else None)
        if pod:
            created[str(pod)] = min(float(r["time"]), created.get(str(pod), float("inf")))
    if not created:
        return ()
    served = {
        str(r["replica"]): float(r["t"])
        for r in store.query(
            "SELECT replica, min(first_token) AS t FROM requests "
            "WHERE replica IS NOT NULL AND first_token IS NOT NULL GROUP BY replica"
        ).to_pylist()
    }
    return tuple(
        (pod, t, served[pod] - t)
        for pod, t in sorted(created.items(), key=lambda kv: kv[1])
        if pod in served and served[pod] >= t
    )


_RESCALE_REASON = re.compile(r"reason:\s*(.+?)\s+(?:above|below) target", re.IGNORECASE)


def _hpa_metrics(store: Store, names: frozenset[str]) -> tuple[str, ...]:
    """What the HPA scales on: target-metric labels, else the reason of its rescale events."""
    found: list[str] = []
    metric = M.resolve("hpa_target_metric", names)
    if metric is not None:
        for labels in (
            store.query("SELECT DISTINCT labels FROM series WHERE metric = ?", [metric])
            .column(0)
            .to_pylist()
        ):
            try:
                d = orjson.loads(labels or "{}")
            except orjson.JSONDecodeError:
                continue
            name = d.get("metric_name") if isinstance(d, dict) else None
            if name and name not in found:
                found.append(str(name))
    if found:
        return tuple(found)
    for msg in (
        store.query(
            "SELECT DISTINCT message FROM events WHERE kind = 'hpa_rescale' AND message IS NOT NULL"
        )
        .column(0)
        .to_pylist()
    ):
        m = _RESCALE_REASON.search(str(msg))
        if m and "all metrics" not in m.group(1).lower():
            name = m.group(1).strip()
            if name not in found:
                found.append(name)
    return tuple(found)


def _window(store: Store, win: tuple[float, float], names: frozenset[str]) -> WindowSignals:
    lo, hi = win
    span = max(hi - lo, 1e-9)
    row = store.query(
        """SELECT count(*) AS n,
                  count(finish) FILTER (WHERE finish >= ? AND finish < ?) AS done,
                  sum(output_tokens) AS out_tok,
                  avg(prompt_tokens) AS p_mean, avg(output_tokens) AS o_mean,
                  median(prompt_tokens) AS p_median
           FROM requests WHERE arrival >= ? AND arrival < ?""",
        [lo, hi, lo, hi],
    ).to_pylist()[0]
    done = store.query(
        "SELECT count(*) AS n FROM requests WHERE finish >= ? AND finish < ? AND status = 'ok'",
        [lo, hi],
    ).to_pylist()[0]["n"]
    p_mean, o_mean = _f(row["p_mean"]), _f(row["o_mean"])
    p_median = _f(row["p_median"]) if row["n"] else None
    if not row["n"]:  # no request spans: the engines' per-request token histograms
        means = token_means(store, win)
        p_mean, o_mean = means.get("prompt"), means.get("output")
        p_median = means.get("prompt_median")
    gauges: dict[str, GaugeStats] = {}
    counters: dict[str, float] = {}
    scraped: dict[str, tuple[str, list[dict[str, object]]]] = {}  # gauge signal -> its rows
    for signal in M.SIGNAL_METRICS:
        metric = M.resolve(signal, names)
        if metric is None:
            continue
        if signal in M.COUNTER_SIGNALS:
            counters[signal] = _increase(store, metric, lo, hi)
        else:
            scraped[signal] = (metric, _rows(store, metric, lo, hi))
            g = _gauge(signal, metric, scraped[signal][1])
            if g is not None:
                gauges[signal] = g
    return WindowSignals(
        start=lo,
        end=hi,
        kv_when_waiting=_kv_when_waiting(scraped),
        requests=int(row["n"] or 0),
        arrival_rps=float(row["n"] or 0) / span,
        completion_rps=float(done or 0) / span,
        output_tokens_per_s=float(row["out_tok"] or 0) / span,
        prompt_tokens_mean=p_mean,
        output_tokens_mean=o_mean,
        prompt_tokens_median=p_median,
        gauges=gauges,
        counters=counters,
        replicas=_replicas(store, lo, hi),
    )


def _f(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def replica_of(labels: str) -> str:
    """The replica (pod) a series' labels name, most specific label first; '' if none."""
    try:
        d = orjson.loads(labels) if labels else {}
    except orjson.JSONDecodeError:
        return ""
    for key in _REPLICA_LABELS:
        if key in d:
            return str(d[key])
    return ""


def _rows(store: Store, metric: str, lo: float, hi: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = store.query(
        "SELECT labels, time, value FROM series WHERE metric = ? AND time >= ? AND time <= ? "
        "ORDER BY time",
        [metric, lo, hi],
    ).to_pylist()
    return rows


def _gauge(signal: str, metric: str, rows: list[dict[str, object]]) -> GaugeStats | None:
    if not rows:
        return None
    scale = 0.01 if metric in M.PERCENT_METRICS else 1.0
    # Queue lengths and replica counts add up across replicas; ratios (KV usage, GPU busy)
    # are per device, so the fleet view is their mean and the worst replica shows in max.
    additive = signal in ("queue_waiting", "running", "gateway_queue", "nvlink_bytes")
    by_time: dict[float, list[float]] = {}
    by_rep: dict[str, list[float]] = {}
    for r in rows:
        v = float(r["value"]) * scale  # type: ignore[arg-type]
        if not np.isfinite(v):
            continue
        by_time.setdefault(float(r["time"]), []).append(v)  # type: ignore[arg-type]
        by_rep.setdefault(replica_of(str(r["labels"] or "")), []).append(v)
    if not by_time:
        return None
    times = np.array(sorted(by_time))
    agg = np.array([sum(by_time[t]) if additive else float(np.mean(by_time[t])) for t in times])
    peak = float(agg.max()) if additive else max(max(v) for v in by_time.values())
    slope = (
        float(np.polyfit(times - times[0], agg, 1)[0]) if len(times) >= T.MIN_SLOPE_SAMPLES else 0.0
    )
    return GaugeStats(
        metric=metric,
        mean=float(agg.mean()),
        max=peak,
        first=float(agg[0]),
        last=float(agg[-1]),
        slope=slope,
        samples=len(times),
        per_replica_mean={k: float(np.mean(v)) for k, v in by_rep.items() if k},
        per_replica_max={k: float(np.max(v)) for k, v in by_rep.items() if k},
        per_replica_samples={k: len(v) for k, v in by_rep.items() if k},
    )


def _kv_when_waiting(scraped: Mapping[str, tuple[str, list[dict[str, object]]]]) -> float | None:
    """Mean KV usage at the (replica, scrape) samples with a request waiting there, from the
    window's rows of both gauges."""
    if "kv_usage" not in scraped or "queue_waiting" not in scraped:
        return None
    kv_metric, kv_rows = scraped["kv_usage"]
    scale = 0.01 if kv_metric in M.PERCENT_METRICS else 1.0

    def key(r: dict[str, object]) -> tuple[str, float]:
        return replica_of(str(r["labels"] or "")), float(r["time"])  # type: ignore[arg-type]

    waiting = {key(r): float(r["value"]) for r in scraped["queue_waiting"][1]}  # type: ignore[arg-type]
    joint = [float(r["value"]) * scale for r in kv_rows if waiting.get(key(r), 0.0) >= 1.0]  # type: ignore[arg-type]
    joint = [v for v in joint if np.isfinite(v)]
    return float(np.mean(joint)) if len(joint) >= T.MIN_JOINT_SAMPLES else None


def _increase(store: Store, metric: str, lo: float, hi: float) -> float:
    """Counter increase over the window, summed over series, tolerant of counter resets."""
    total = 0.0
    series: dict[str, list[float]] = {}
    for r in _rows(store, metric, lo, hi):
        series.setdefault(str(r["labels"]), []).append(float(r["value"]))  # type: ignore[arg-type]
    for values in series.values():
        arr = np.asarray(values)
        if arr.size < 2:
            continue
        d = np.diff(arr)
        # a drop is a reset: the new value is the increase since the restart
        total += float(np.where(d >= 0, d, arr[1:]).sum())
    return total


def _replicas(store: Store, lo: float, hi: float) -> dict[str, ReplicaStats]:
    rows = store.query(
        "SELECT replica, count(*) AS n, avg(ttft) AS t, min(arrival) AS a0, max(arrival) AS a1 "
        "FROM requests WHERE arrival >= ? AND arrival < ? AND replica IS NOT NULL "
        "GROUP BY replica",
        [lo, hi],
    ).to_pylist()
    return {
        str(r["replica"]): ReplicaStats(int(r["n"]), _f(r["t"]), _f(r["a0"]), _f(r["a1"]))
        for r in rows
    }


def _rescale_size(attributes: str | None) -> int | None:
    if not attributes:
        return None
    try:
        d = orjson.loads(attributes)
    except orjson.JSONDecodeError:
        return None
    v = d.get("replicas") if isinstance(d, dict) else None
    return int(v) if isinstance(v, int | float) else None


def _events(store: Store) -> tuple[EventRecord, ...]:
    rows = store.query(
        "SELECT time, kind, object_name, reason, message, duration, attributes FROM events "
        "ORDER BY time"
    ).to_pylist()
    return tuple(
        EventRecord(
            time=float(r["time"]),
            kind=str(r["kind"]),
            object_name=r["object_name"],
            reason=r["reason"],
            message=r["message"],
            duration=_f(r["duration"]),
            replicas=_rescale_size(r["attributes"]),
        )
        for r in rows
    )


#: How many prompts arrived in the window, and their upper median (the order statistic at
#: index n // 2 of the sorted prompts; ``2 rn - 2 in [n - 1, n]`` says ``rn = n // 2 + 1`` in
#: integer arithmetic both engines spell alike).
_PROMPTS_SQL = """
SELECT max(n) AS prompts, max(CASE WHEN 2 * rn - 2 BETWEEN n - 1 AND n THEN x END) AS median
FROM (
  SELECT prompt_tokens AS x, row_number() OVER (ORDER BY prompt_tokens) AS rn,
         count(*) OVER () AS n
  FROM requests
  WHERE arrival >= ? AND arrival < ? AND prompt_tokens IS NOT NULL
) AS p
"""

_LONG_SQL = """
SELECT count(*) AS long_prompts FROM requests
WHERE arrival >= ? AND arrival < ? AND prompt_tokens IS NOT NULL AND prompt_tokens >= ?
"""


def _overlap_sql(repeat_rows: str) -> str:
    """Decode requests of the window, overlapped or clean, as six aggregates.

    A decode window [ds, de] overlaps a long prompt's prefill [ps, pe] on the same replica iff
    ``ps < de and pe > ds``.  Instead of joining every decode with every long prefill of its
    replica (quadratic), each replica's intervals become a time-ordered event list with two
    running counts: long prefills started (S) and ended (E).  A decode overlaps one iff
    S(strictly before de) - E(at or before ds) > 0; at equal times ends sort before a ds
    query, which sorts before a de query, which sorts before starts.  (Exact when stage
    durations are non-negative, as derive and the simulator emit them.)  Each decode row is
    then reduced per request (any overlap, the smallest TPOT, as a request's decode rows were).
    The tail is every request at or above the p95 TPOT, the order statistic at index
    floor(0.95 n): those with more than 0.95 n TPOTs at or below theirs.  Without ties that is
    exactly the top n - floor(0.95 n); a tie at the cut is kept whole, not split arbitrarily."""
    return f"""
WITH r AS (
  SELECT request_id, replica, prompt_tokens, output_tokens FROM requests
  WHERE arrival >= ? AND arrival < ? AND replica IS NOT NULL
), iv AS (
  SELECT r.replica AS replica, r.request_id AS request_id,
         CASE WHEN s.stage = 'decode' THEN 1 ELSE 0 END AS is_decode,
         s.start AS lo, s.start + s.duration AS hi,
         CASE WHEN s.stage = 'decode' THEN s.duration / (r.output_tokens - 1) ELSE 0.0 END
           AS tpot
  FROM stages AS s JOIN r ON s.request_id = r.request_id
  WHERE (s.stage = 'prefill' AND r.prompt_tokens >= ?)
     OR (s.stage = 'decode' AND r.output_tokens > 1)
), ev AS (
  SELECT replica, request_id, is_decode, lo, hi, tpot,
         CASE WHEN k = 0 THEN lo ELSE hi END AS t,
         CASE WHEN is_decode = 1 AND k = 0 THEN 1 WHEN is_decode = 1 THEN 2
              WHEN k = 0 THEN 3 ELSE 0 END AS ord
  FROM (SELECT *, {repeat_rows} AS k FROM iv) AS x
), run AS (
  SELECT request_id, is_decode, lo, hi, tpot, ord,
         sum(CASE WHEN is_decode = 0 AND ord = 3 THEN 1 ELSE 0 END) OVER w AS started,
         sum(CASE WHEN is_decode = 0 AND ord = 0 THEN 1 ELSE 0 END) OVER w AS ended
  FROM ev
  WINDOW w AS (PARTITION BY replica ORDER BY t, ord
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), dec AS (
  SELECT request_id, tpot AS d_tpot,
         sum(CASE WHEN ord = 2 THEN started ELSE 0 END)
           - sum(CASE WHEN ord = 1 THEN ended ELSE 0 END) AS n_over
  FROM run WHERE is_decode = 1
  GROUP BY request_id, lo, hi, tpot
), req AS (
  SELECT request_id, min(d_tpot) AS r_tpot,
         CASE WHEN max(n_over) > 0 THEN 1 ELSE 0 END AS hit
  FROM dec GROUP BY request_id
), ranked AS (
  SELECT r_tpot, hit, count(*) OVER () AS n,
         count(*) OVER (ORDER BY r_tpot RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
           AS at_or_below
  FROM req
)
SELECT count(*) AS decoding, sum(hit) AS overlapped,
       avg(CASE WHEN hit = 1 THEN r_tpot END) AS tpot_hit,
       avg(CASE WHEN hit = 0 THEN r_tpot END) AS tpot_clean,
       sum(CASE WHEN at_or_below > 0.95 * n THEN 1 ELSE 0 END) AS tail,
       sum(CASE WHEN at_or_below > 0.95 * n THEN hit ELSE 0 END) AS tail_overlapped
FROM ranked
"""


def _interference(store: Store, win: tuple[float, float]) -> Interference | None:
    """Only aggregates come back: the prompt count and median, the long-prompt count, and the
    overlap statistics, each one row of SQL (run inside ClickHouse for a ClickHouse store)."""
    lo, hi = win
    prompts = store.query(_PROMPTS_SQL, [lo, hi]).to_pylist()[0]
    n = int(prompts["prompts"] or 0)
    if n < T.MIN_INTERFERENCE_REQUESTS or prompts["median"] is None:
        return None
    # "long" = much longer than the typical prompt; a homogeneous workload has none, and a
    # handful is not enough to tell interference from noise
    threshold = max(T.LONG_PROMPT_MEDIANS * float(prompts["median"]), T.LONG_PROMPT_MIN_TOKENS)
    n_long = int(store.query(_LONG_SQL, [lo, hi, threshold]).to_pylist()[0]["long_prompts"] or 0)
    if n_long < max(T.MIN_LONG_PROMPTS, int(T.MIN_LONG_PROMPT_SHARE * n)):
        return None
    sql = _overlap_sql(dialect_of(store).repeat_rows("2"))
    row = store.query(sql, [lo, hi, threshold]).to_pylist()[0]
    total, hit = int(row["decoding"] or 0), int(row["overlapped"] or 0)
    if (
        total < T.MIN_INTERFERENCE_REQUESTS
        or hit < T.MIN_INTERFERENCE_GROUP
        or total - hit < T.MIN_INTERFERENCE_GROUP
    ):
        return None
    overall = hit / total
    tail_share = int(row["tail_overlapped"] or 0) / max(int(row["tail"] or 0), 1)
    return Interference(
        long_prompt_tokens=threshold,
        overlapped=hit,
        clean=total - hit,
        tpot_ratio=float(row["tpot_hit"]) / max(float(row["tpot_clean"]), 1e-12),
        tail_lift=tail_share / overall,
    )
