"""What the loaded telemetry holds, measured once for every check (pure: Capture in, Facts out).

The per-span questions (which spans are the engine's, which gateway spans carry Envoy's upstream
timing events, which service names are unset) are one SQL pass over the capture's tables, the
same SQL the rest of tailtriage runs on DuckDB; the checks then only compare numbers."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Final

from tailtriage.analyses.results import SloSpec
from tailtriage.model import Capture
from tailtriage.store import DuckDBStore

#: Envoy's verbose span events that split proxy time from upstream time (section 4.1)
UPSTREAM_EVENTS: Final = (
    "first_upstream_tx_byte_sent",
    "first_upstream_rx_byte_received",
    "first_downstream_tx_byte_sent",
)
#: NGINX has no upstream span; `otel_span_attr upstream.header_time` carries the upstream TTFB
NGINX_TIMING_ATTRIBUTES: Final = ("upstream.header_time", "upstream.response_time")
#: the attributes the checks read: JSON paths, extracted in one parse per span
ATTRIBUTE_PATHS: Final = (
    '$."gen_ai.latency.e2e"',
    '$."gen_ai.latency.time_to_first_token"',
    '$."gen_ai.latency.time_in_queue"',
    "$.component",
    "$.upstream_cluster",
    '$."istio.mesh_id"',
    *(f'$."tailtriage.events".{e}' for e in UPSTREAM_EVENTS),
    *(f'$."{a}"' for a in NGINX_TIMING_ATTRIBUTES),
)


def _has(path: str) -> str:
    """SQL: the span's attribute at ``path`` (one of ATTRIBUTE_PATHS) is present."""
    return f"(x[{ATTRIBUTE_PATHS.index(path) + 1}] IS NOT NULL)"


def _service(regex: str) -> str:
    return f"regexp_matches(coalesce(service, ''), '{regex}')"


#: one row per examined span, classified (telemetry-conventions sections 1.1, 2, 4)
_CLASSIFY: Final = f"""
    -- spans only an inference engine writes
    (name IN ('llm_request', 'llm_core') OR name LIKE 'vllm.request.%'
     OR {_has('$."gen_ai.latency.e2e"')} OR {_has('$."gen_ai.latency.time_to_first_token"')}
     OR {_service("(?i)(vllm|sglang|dynamo|trtllm|tgi|triton)")}) AS is_engine,
    {_has('$."gen_ai.latency.time_in_queue"')} AS phased,
    {_has('$."gen_ai.latency.time_to_first_token"')} AS has_ttft,
    -- Envoy (and so Istio): the `component=proxy` tag or an upstream cluster
    (x[{ATTRIBUTE_PATHS.index("$.component") + 1}]::VARCHAR = '"proxy"'
     OR {_has("$.upstream_cluster")} OR {_service("(?i)(envoy|istio)")}) AS is_envoy,
    ({" OR ".join(_has(f'$."tailtriage.events".{e}') for e in UPSTREAM_EVENTS)}) AS timed,
    {_has('$."tailtriage.events".first_downstream_tx_byte_sent')} AS first_byte,
    {_service("(?i)nginx")} AS is_nginx,
    ({" OR ".join(_has(f'$."{a}"') for a in NGINX_TIMING_ATTRIBUTES)}) AS nginx_timed,
    (name IN ('throttler_try', 'queue_wait', 'activator_proxy', 'queue_proxy')
     OR {_service("(?i)(activator|queue-proxy)")}) AS is_knative,
    ({_has('$."istio.mesh_id"')} OR {_service("(?i)istio")}) AS is_istio
"""
EDGE_STAGES: Final = ("client", "ingress", "gateway_queue", "pending")
#: stages only engine spans give (decode is also derived at the edge, after the first byte)
ENGINE_STAGES: Final = ("engine_queue", "prefill")
#: span attributes are read from at most this many traces (chosen by a hash of the trace id):
#: a share measured on 20,000 traces is within +-1 % at 95 % confidence, far finer than the
#: checks' 10 % thresholds, and the JSON scan stays near a second at any capture size
MAX_TRACES_EXAMINED: Final = 20_000
#: changes of a busy counter needed before their spacing stands for the scrape interval
MIN_CHANGES: Final = 8
#: counters of finished requests, one per engine (telemetry-conventions 1.2, 2); first found wins
REQUEST_COUNTERS: Final = (
    "vllm:e2e_request_latency_seconds_count",
    "vllm:request_success_total",
    "sglang:e2e_request_latency_seconds_count",
    "sglang:num_requests_total",
    "dynamo_frontend_requests_total",
    "trtllm_e2e_request_latency_seconds_count",
    "tgi_request_count",
)


@dataclass(frozen=True)
class SkewedService:
    """A service whose spans were shifted to repair clock skew."""

    service: str
    spans: int
    max_shift_s: float
    pods: tuple[str, ...]


@dataclass(frozen=True)
class TraceFacts:
    spans: int = 0
    requests: int = 0
    #: False when only requests and stages came back (ClickHouse push-down): no span attributes
    spans_loaded: bool = False
    #: traces whose spans were examined; every span count below is within them
    traces_examined: int = 0
    unknown_service_spans: int = 0
    unknown_service_names: tuple[str, ...] = ()
    engine_spans: int = 0
    engine_phase_spans: int = 0  # engine spans carrying gen_ai.latency.time_in_queue
    engine_ttft_spans: int = 0  # engine spans carrying gen_ai.latency.time_to_first_token
    engine_orphans: int = 0  # engine spans whose parent span is not in the capture
    envoy_traces: int = 0
    envoy_timed_traces: int = 0  # traces whose Envoy spans carry upstream timing events
    edge_first_byte_traces: int = 0  # traces with first_downstream_tx_byte_sent
    nginx_spans: int = 0
    nginx_timed_spans: int = 0
    knative_spans: int = 0
    istio: bool = False
    #: requests having at least one row of each stage
    stage_requests: Mapping[str, int] = field(default_factory=dict)
    engine_only_requests: int = 0  # engine stages, no edge stage: a second trace per request
    edge_only_requests: int = 0
    token_times: int = 0
    skew: tuple[SkewedService, ...] = ()
    skew_adjusted_spans: int = 0


@dataclass(frozen=True)
class MetricFacts:
    names: frozenset[str] = frozenset()
    #: requests the engines counted over the traced time range, and the counter it came from
    counted_requests: float | None = None
    counted_from: str | None = None
    counted_range: tuple[float, float] | None = None
    traced_in_range: int = 0
    #: median seconds between two samples of one engine series (else of any series)
    scrape_interval_s: float | None = None
    scrape_interval_of: str | None = None
    #: a Deployment's replica count changed during the capture (kube-state-metrics)
    replicas_changed: bool = False

    def any_prefix(self, *prefixes: str) -> bool:
        return any(n.startswith(prefixes) for n in self.names)


@dataclass(frozen=True)
class Facts:
    """Everything the checks read."""

    slos: tuple[SloSpec, ...]
    incident: tuple[float, float] | None
    traces: TraceFacts
    metrics: MetricFacts
    event_kinds: Mapping[str, int]
    #: event kinds inside the capture's time range (pods created before it do not count)
    events_in_range: Mapping[str, int] = field(default_factory=dict)

    @property
    def engine(self) -> str | None:
        """The engine the telemetry comes from: vllm, sglang, dynamo (None: cannot tell)."""
        for prefix, name in (("vllm:", "vllm"), ("sglang:", "sglang"), ("dynamo_", "dynamo")):
            if self.metrics.any_prefix(prefix):
                return name
        return "vllm" if self.traces.engine_phase_spans else None

    @property
    def gateway(self) -> str | None:
        """The gateway the telemetry comes from: istio, envoy, nginx, knative (None: none)."""
        t = self.traces
        if t.istio:
            return "istio"
        if t.envoy_traces:
            return "envoy"
        if t.nginx_spans:
            return "nginx"
        return "knative" if t.knative_spans else None


def build_facts(
    capture: Capture, slos: Sequence[SloSpec], incident: tuple[float, float] | None
) -> Facts:
    """Measure ``capture`` once for the checks."""
    with DuckDBStore(capture) as store:
        traces = _trace_facts(capture, store)
        metrics = _metric_facts(capture, store)
    kinds: dict[str, int] = {}
    for k in capture.events["kind"].to_pylist():
        kinds[k] = kinds.get(k, 0) + 1
    span = capture.time_range
    in_range: dict[str, int] = {}
    if span is not None:
        ev = capture.events
        for k, t in zip(ev["kind"].to_pylist(), ev["time"].to_pylist(), strict=True):
            if span[0] <= t <= span[1]:
                in_range[k] = in_range.get(k, 0) + 1
    return Facts(tuple(slos), incident, traces, metrics, kinds, in_range)


def _one(store: DuckDBStore, sql: str) -> dict[str, object]:
    row = store.query(sql).to_pylist()
    return row[0] if row else {}


def _int(v: object) -> int:
    return int(v) if isinstance(v, int | float) else 0


def _trace_facts(capture: Capture, store: DuckDBStore) -> TraceFacts:
    stage_rows = store.query(
        "SELECT stage, count(DISTINCT request_id) AS n FROM stages GROUP BY stage"
    ).to_pylist()
    edge = ", ".join(f"'{s}'" for s in EDGE_STAGES)
    engine = ", ".join(f"'{s}'" for s in ENGINE_STAGES)
    split = _one(
        store,
        f"""WITH r AS (SELECT request_id, bool_or(stage IN ({edge})) AS edge,
                       bool_or(stage IN ({engine})) AS engine FROM stages GROUP BY request_id)
            SELECT count(*) FILTER (WHERE engine AND NOT edge) AS engine_only,
                   count(*) FILTER (WHERE edge AND NOT engine) AS edge_only FROM r""",
    )
    base = TraceFacts(
        requests=capture.requests.num_rows,
        stage_requests={str(r["stage"]): int(r["n"]) for r in stage_rows},
        engine_only_requests=_int(split.get("engine_only")),
        edge_only_requests=_int(split.get("edge_only")),
        token_times=capture.token_times.num_rows,
    )
    if capture.spans.num_rows == 0:
        return base
    traces = _int(_one(store, "SELECT count(DISTINCT trace_id) AS n FROM spans").get("n"))
    every = max(1, math.ceil(traces / MAX_TRACES_EXAMINED))
    paths = ", ".join("'" + p.replace("'", "''") + "'" for p in ATTRIBUTE_PATHS)
    store.query(
        f"""CREATE OR REPLACE TEMP TABLE doctor_spans AS
            WITH s AS (SELECT trace_id, span_id, parent_id, name, service,
                              json_extract(attributes, [{paths}]) AS x
                       FROM spans WHERE hash(trace_id) % {every} = 0)
            SELECT trace_id, span_id, parent_id, service, {_CLASSIFY} FROM s"""
    )
    row = _one(
        store,
        """SELECT count(*) AS spans, count(DISTINCT trace_id) AS traces,
          count(*) FILTER (WHERE service IS NULL OR service LIKE 'unknown_service%') AS unknown,
          list(DISTINCT service) FILTER (WHERE service LIKE 'unknown_service%') AS unknown_names,
          count(*) FILTER (WHERE is_engine) AS engine,
          count(*) FILTER (WHERE is_engine AND phased) AS phased,
          count(*) FILTER (WHERE is_engine AND has_ttft) AS ttft,
          count(DISTINCT trace_id) FILTER (WHERE is_envoy) AS envoy,
          count(DISTINCT trace_id) FILTER (WHERE is_envoy AND timed) AS envoy_timed,
          count(DISTINCT trace_id) FILTER (WHERE first_byte) AS edge_first_byte,
          count(*) FILTER (WHERE is_nginx) AS nginx,
          count(*) FILTER (WHERE is_nginx AND nginx_timed) AS nginx_timed,
          count(*) FILTER (WHERE is_knative) AS knative,
          bool_or(is_istio) AS istio
        FROM doctor_spans""",
    )
    orphans = _one(
        store,
        """SELECT count(*) AS n FROM doctor_spans s WHERE is_engine AND s.parent_id IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM doctor_spans p WHERE p.trace_id = s.trace_id
                            AND p.span_id = s.parent_id)""",
    )
    names = row.get("unknown_names")
    return TraceFacts(
        spans=_int(row.get("spans")),
        requests=base.requests,
        spans_loaded=True,
        traces_examined=_int(row.get("traces")),
        unknown_service_spans=_int(row.get("unknown")),
        unknown_service_names=tuple(sorted(str(n) for n in names))
        if isinstance(names, list)
        else (),
        engine_spans=_int(row.get("engine")),
        engine_phase_spans=_int(row.get("phased")),
        engine_ttft_spans=_int(row.get("ttft")),
        engine_orphans=_int(orphans.get("n")),
        envoy_traces=_int(row.get("envoy")),
        envoy_timed_traces=_int(row.get("envoy_timed")),
        edge_first_byte_traces=_int(row.get("edge_first_byte")),
        nginx_spans=_int(row.get("nginx")),
        nginx_timed_spans=_int(row.get("nginx_timed")),
        knative_spans=_int(row.get("knative")),
        istio=bool(row.get("istio")),
        stage_requests=base.stage_requests,
        engine_only_requests=base.engine_only_requests,
        edge_only_requests=base.edge_only_requests,
        token_times=base.token_times,
        skew=_skew(capture, store),
        skew_adjusted_spans=int(capture.metadata.quality.get("spans.clock_skew_adjusted", 0)),
    )


def _skew(capture: Capture, store: DuckDBStore) -> tuple[SkewedService, ...]:
    """Clock repairs (derive.derive keeps each shifted span in metadata), per service, with
    the pods whose spans were shifted."""
    by_service: dict[str, list[tuple[str, str, float]]] = {}
    for a in capture.metadata.clock_adjustments:
        by_service.setdefault(a.service or "?", []).append((a.trace_id, a.span_id, a.delta))
    out = []
    for service, adj in sorted(by_service.items()):
        ids = ", ".join(f"'{s}'" for _, s, _ in adj if s.isalnum())
        pods: list[str] = []
        if ids:
            rows = store.query(
                "SELECT DISTINCT json_extract_string(attributes, '$.\"k8s.pod.name\"') AS pod "
                f"FROM spans WHERE span_id IN ({ids}) ORDER BY pod"
            ).to_pylist()
            pods = [str(r["pod"]) for r in rows if r["pod"]]
        shift = max(abs(d) for _, _, d in adj)
        out.append(SkewedService(service, len(adj), shift, tuple(pods)))
    return tuple(out)


def _metric_facts(capture: Capture, store: DuckDBStore) -> MetricFacts:
    if capture.series.num_rows == 0:
        return MetricFacts()
    names = frozenset(
        str(r["metric"]) for r in store.query("SELECT DISTINCT metric FROM series").to_pylist()
    )
    interval, of = _scrape_interval(store, names)
    counter = next((m for m in REQUEST_COUNTERS if m in names), None)
    counted: float | None = None
    rng: tuple[float, float] | None = None
    traced = 0
    span = capture.time_range if capture.requests.num_rows else None
    if counter is not None and span is not None:
        rng, counted = _counter_increase(store, counter, span)
        if rng is not None:
            traced = _int(
                _one(
                    store,
                    (
                        f"SELECT count(*) AS n FROM requests WHERE arrival >= {rng[0]!r} "
                        f"AND arrival <= {rng[1]!r}"
                    ),
                ).get("n")
            )
    changed = _int(
        _one(
            store,
            "SELECT count(*) AS n FROM (SELECT labels FROM series WHERE metric IN "
            "('kube_deployment_spec_replicas', 'kube_deployment_status_replicas') "
            "GROUP BY metric, labels HAVING count(DISTINCT value) > 1)",
        ).get("n")
    )
    return MetricFacts(names, counted, counter, rng, traced, interval, of, changed > 0)


def _scrape_interval(store: DuckDBStore, names: frozenset[str]) -> tuple[float | None, str | None]:
    """Seconds between two scrapes.  A query_range export (and a live read) repeats the last
    scraped value at every step, so the spacing of samples is the query's step, not the scrape:
    the spacing of *changes* of the engine's busy counters is the scrape (its lower quartile, as
    idle stretches leave longer gaps).  Without such counters, the spacing of samples."""
    engine = sorted(n for n in names if n.startswith(("vllm:", "sglang:", "dynamo_")))
    counters = [n for n in engine if n.endswith(("_count", "_total", "_sum"))]
    if counters:
        listed = _sql_list(counters)
        row = _one(
            store,
            f"""WITH c AS (SELECT metric, labels, time, value,
                           lag(value) OVER (PARTITION BY metric, labels ORDER BY time) AS prev
                           FROM series WHERE metric IN ({listed})),
                 changed AS (SELECT metric, labels, time FROM c WHERE value <> prev),
                 d AS (SELECT time - lag(time) OVER (PARTITION BY metric, labels ORDER BY time)
                       AS dt FROM changed)
                SELECT quantile_cont(dt, 0.25) AS dt, count(dt) AS n FROM d WHERE dt > 0""",
        )
        dt = row.get("dt")
        if _int(row.get("n")) >= MIN_CHANGES and isinstance(dt, int | float):
            return float(dt), "engine counters"
    chosen = engine or sorted(names)
    if not chosen:
        return None, None
    row = _one(
        store,
        f"""WITH d AS (SELECT time - lag(time) OVER (PARTITION BY metric, labels ORDER BY time)
                       AS dt FROM series WHERE metric IN ({_sql_list(chosen)}))
            SELECT median(dt) AS dt FROM d WHERE dt > 0""",
    )
    dt = row.get("dt")
    if isinstance(dt, int | float) and math.isfinite(dt):
        return float(dt), "engine metrics" if engine else "all metrics"
    return None, None


def _sql_list(names: Sequence[str]) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


def _counter_increase(
    store: DuckDBStore, metric: str, span: tuple[float, float]
) -> tuple[tuple[float, float] | None, float | None]:
    """Increase of ``metric`` summed over its series, over the part of ``span`` it covers
    (counter resets handled as Prometheus' ``increase`` does, without extrapolation)."""
    rows = store.query(
        "SELECT labels, time, value FROM series WHERE metric = ? ORDER BY labels, time", [metric]
    ).to_pylist()
    by: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        labels = {k: v for k, v in json.loads(str(r["labels"])).items() if k != "le"}
        by.setdefault(json.dumps(labels, sort_keys=True), []).append(
            (float(r["time"]), float(r["value"]))
        )
    lo = max(span[0], min(t for pts in by.values() for t, _ in pts))
    hi = min(span[1], max(t for pts in by.values() for t, _ in pts))
    if hi <= lo:
        return None, None
    total = 0.0
    for pts in by.values():
        inside = [v for t, v in pts if lo <= t <= hi]
        before = [v for t, v in pts if t < lo]
        seq = ([before[-1]] if before else []) + inside
        for a, b in pairwise(seq):
            total += b - a if b >= a else b
    return (lo, hi), total
