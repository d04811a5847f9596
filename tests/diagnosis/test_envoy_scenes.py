"""Queueing inside Envoy at an upstream pool limit is a gateway queue, not network
(issue 14, repair 5)."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from diagnosis.scenes import BASELINE, INCIDENT, context, decomposition, gauge, slo
from diagnosis.stack import DEPLOYMENT, FLEET_HASH, NAMESPACE, fleet_requests, pods
from tailtriage.diagnosis import diagnose
from tailtriage.diagnosis.context import DiagnosisContext
from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S
from tailtriage.sources.spans import EVENTS_KEY

FLEET = pods(FLEET_HASH, 3, seed=4)
BASE = {"ingress": 0.03, "api_server": 0.01, "engine_queue": 0.02, "prefill": 0.15}
INC = {**BASE, "ingress": 0.45}
ROUTE = f"{DEPLOYMENT}.{NAMESPACE}.svc.cluster.local:8000/*"


def _gateway_spans(
    arrival: np.ndarray,
    ingress: np.ndarray,
    pool_wait: np.ndarray,
    uo: int,
    *,
    verbose: bool = True,
) -> pa.Table:
    """One istio-ingressgateway SERVER span per request, with Envoy's verbose events as the
    OTLP source stores them (offsets from the span start), and ``uo`` overflowed requests
    (503, response flag UO) in the incident; ``verbose=False``: without the events (Envoy's
    default tracing config)."""
    n = len(arrival)
    rng = np.random.default_rng(0)
    over = np.sort(rng.uniform(*INCIDENT, uo))
    rows = []
    for i in range(n + uo):
        ok = i < n
        start = float(arrival[i]) if ok else float(over[i - n])
        attrs = {
            "component": "proxy",
            "http.method": "POST",
            "http.url": "https://llm.example.com/v1/chat/completions",
            "http.status_code": "200" if ok else "503",
            "response_flags": "-" if ok else "UO",
            "upstream_cluster": f"outbound|8000||{DEPLOYMENT}.{NAMESPACE}.svc.cluster.local",
            "istio.canonical_service": "istio-ingressgateway",
        }
        if verbose:
            attrs[EVENTS_KEY] = {
                "last_downstream_rx_byte_received": 0.0004,
                "first_upstream_tx_byte_sent": 0.0004 + float(pool_wait[i]) if ok else 0.0,
            }
        end = start + (float(ingress[i]) + 3.0 if ok else 0.001)
        rows.append((f"{i:032x}", f"{i:016x}", start, end, orjson.dumps(attrs).decode()))
    return make_table(
        S.SPANS,
        {
            "trace_id": [r[0] for r in rows],
            "span_id": [r[1] for r in rows],
            "parent_id": [None] * len(rows),
            "name": [ROUTE] * len(rows),
            "kind": ["SERVER"] * len(rows),
            "service": ["istio-ingressgateway.istio-system"] * len(rows),
            "start": [r[2] for r in rows],
            "end": [r[3] for r in rows],
            "status": ["unset"] * len(rows),
            "attributes": [r[4] for r in rows],
        },
    )


def _fleet() -> Capture:
    """The fleet's requests, their ingress grown in the incident (``INC``)."""
    return fleet_requests(
        FLEET,
        per_window=900,
        baseline_stages={**BASE, "decode": 3.0},
        incident_stages={**INC, "decode": 3.0},
        seed=41,
    )


def _scene(*, pool_limited: bool) -> DiagnosisContext:
    cap = _fleet()
    req = cap.requests.to_pydict()
    arrival = np.asarray(req["arrival"])
    ing = cap.stages.filter(pc.equal(cap.stages["stage"], "ingress")).to_pydict()
    ingress = np.asarray(ing["duration"])
    in_inc = arrival >= INCIDENT[0]
    # at the pool limit the growth is the wait for a connection; on a slow network it is
    # after the first byte went upstream (transfer, TLS to the upstream)
    wait = np.where(in_inc, ingress - 0.02, 0.001) if pool_limited else np.full(len(arrival), 0.001)
    spans = _gateway_spans(arrival, ingress, wait, uo=40 if pool_limited else 0)
    cap = cap.replace(spans=spans)
    return context(cap, [slo("ttft", 0.5, 0.9)], decomposition(INC, BASE))


def test_waiting_for_an_upstream_connection_is_a_gateway_queue() -> None:
    findings = diagnose(_scene(pool_limited=True))
    cats = [f.category for f in findings]
    assert cats[0] == "gateway_queue", cats
    ev = {e.signal: e.value for e in findings[0].evidence}
    assert ev["response_flags=UO"] == 40
    net = [f for f in findings if f.category == "ingress_network"]
    assert all(f.confidence < findings[0].confidence for f in net)


def test_slow_transfer_without_a_pool_limit_stays_ingress_network() -> None:
    cats = [f.category for f in diagnose(_scene(pool_limited=False))]
    assert cats[0] == "ingress_network", cats
    assert "gateway_queue" not in cats


def _tail_only(cap: Capture) -> Capture:
    """The incident's ingress growth on a twentieth of its requests, the rest at baseline."""
    req = cap.requests.to_pydict()
    arrival = dict(zip(req["request_id"], req["arrival"], strict=True))
    rng = np.random.default_rng(7)
    st = cap.stages.to_pydict()
    for i, (rid, stage) in enumerate(zip(st["request_id"], st["stage"], strict=True)):
        if stage == "ingress" and arrival[rid] >= INCIDENT[0] and rng.random() >= 0.05:
            st["duration"][i] = BASE["ingress"]
    return cap.replace(stages=make_table(S.STAGES, st))


def _pending_scene(
    *, pending_in_incident: float, spike_in_baseline: bool = False, spike_at: int | None = None
) -> DiagnosisContext:
    """The gateway spans carry no verbose events; Envoy's pending-queue gauge and its
    upstream request counter (3 req/s, Prometheus every 15 s) are all there is.  With
    ``spike_at``, the incident's scrapes read 0 but the ``spike_at``-th, which reads one
    request (``pending_in_incident`` is then unused); ``spike_in_baseline``: one baseline scrape
    reads one request too, and only a twentieth of the incident's requests wait (the tail):
    a one-request queue now and then is consistent with a mean wait of ~20 ms."""
    cap = _fleet() if spike_at is None else _tail_only(_fleet())
    arrival = np.asarray(cap.requests["arrival"])
    ing = cap.stages.filter(pc.equal(cap.stages["stage"], "ingress"))
    ingress = np.asarray(ing["duration"])
    spans = _gateway_spans(arrival, ingress, np.zeros(len(arrival)), uo=0, verbose=False)
    times = np.arange(BASELINE[0], INCIDENT[1], 15.0)
    labels = {"cluster_name": f"outbound|8000||{DEPLOYMENT}.{NAMESPACE}.svc.cluster.local"}
    pending = [pending_in_incident if t >= INCIDENT[0] else 0.0 for t in times]
    if spike_at is not None:
        pending = [0.0] * len(times)
        first = int(np.searchsorted(times, INCIDENT[0]))
        pending[first + spike_at] = 1.0
        if spike_in_baseline:
            pending[first // 2] = 1.0
    served = 3.0 * (times - times[0])
    rows = [
        *gauge("envoy_cluster_upstream_rq_pending_active", pending, labels=labels),
        *gauge("envoy_cluster_upstream_rq_total", served, labels=labels),
    ]
    return context(
        cap.replace(spans=spans),
        [slo("ttft", 0.5, 0.9)],
        decomposition(INC, BASE),
        series_rows=rows,
    )


def test_without_span_events_littles_law_finds_the_pool_wait() -> None:
    # 1.26 requests pending at 3 req/s: a 0.42 s mean wait, the whole ingress growth
    findings = diagnose(_pending_scene(pending_in_incident=1.26))
    assert findings[0].category == "gateway_queue", [f.category for f in findings]
    ev = {e.signal: e for e in findings[0].evidence}
    assert 380 < float(ev["envoy.pool_wait_growth_ms"].value or 0) < 460
    assert "Little" in ev["envoy.pool_wait_growth_ms"].detail
    # the breakdown reads the ingress growth that is pool wait as gateway_queue
    (move,) = findings[0].moves
    assert (move.source, move.target) == ("ingress", "gateway_queue")
    assert 0.3 < move.seconds <= INC["ingress"] - BASE["ingress"] + 1e-9


def test_an_idle_pending_queue_leaves_the_time_to_the_network() -> None:
    # a tenth of a request pending (below Envoy's one-request minimum): not a pool limit
    cats = [f.category for f in diagnose(_pending_scene(pending_in_incident=0.1))]
    assert cats[0] == "ingress_network", cats
    assert "gateway_queue" not in cats


def test_a_pending_request_scraped_only_in_the_incident_is_a_pool_limit() -> None:
    # a few hundred ms of pool wait at a few req/s is a fraction of a request on average:
    # a 15 s scrape sees it now and then.  One pending request, never one in the baseline,
    # is the pool limiting - the Little's-law wait then says how much of the ingress growth
    findings = diagnose(_pending_scene(pending_in_incident=0.0, spike_at=3))
    assert findings[0].category == "gateway_queue", [f.category for f in findings]
    ev = {e.signal: e for e in findings[0].evidence}
    assert "none in the baseline" in ev["envoy.pending_appeared"].detail


def test_a_pending_request_in_the_baseline_too_is_no_new_limit() -> None:
    scene = _pending_scene(pending_in_incident=0.0, spike_at=3, spike_in_baseline=True)
    cats = [f.category for f in diagnose(scene)]
    assert cats[0] == "ingress_network", cats
    assert "gateway_queue" not in cats
