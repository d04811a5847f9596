"""The rollout analysis on real-format files: a simulated rolling update written as an
incident bundle (``kubectl get pods/events -o json``, Prometheus ``query_range`` responses of
kube-state-metrics, OTLP traces), read back through the sources, and checked against what the
simulator did (its own events); and real kubectl output of a deployment that did not roll."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import ROOT
from tailtriage.analyses.pods import pod_lives
from tailtriage.analyses.rollout import WARMUP_BIN_S, analyze_rollout
from tailtriage.diagnosis.thresholds import WARMUP_SLOWDOWN
from tailtriage.model import Capture
from tailtriage.remediation.calibrate.rollout import fit_rollouts
from tailtriage.simulator import resolve_scenario, simulate
from tailtriage.simulator.bundle import write_bundle
from tailtriage.simulator.config import ScenarioConfig, apply_overrides
from tailtriage.store import DuckDBStore
from tailtriage.store.input import load_capture

ROLL_AT_S = 40.0


def small_rollout(surge: int, unavailable: int) -> ScenarioConfig:
    """The built-in rollout scenario, short and light enough for a unit test (a low
    per-pod concurrency limit, so that losing one replica of three queues requests)."""
    return apply_overrides(
        resolve_scenario("rollout"),
        {
            "workload.0.duration_s": ROLL_AT_S,
            "workload.1.duration_s": 110.0,
            "workload.0.arrivals.rate": 8.0,
            "workload.1.arrivals.rate": 8.0,
            "rollouts.0.at_s": ROLL_AT_S,
            "rollouts.0.max_surge": surge,
            "rollouts.0.max_unavailable": unavailable,
            "pods.warmup_s": 10.0,
            "gateway.concurrency_limit": 10,
        },
    )


@pytest.fixture(scope="module", params=[(0, 1), (1, 0)], ids=["unavailable-first", "surge"])
def rolled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ScenarioConfig, Capture, Capture]:
    """(scenario, the simulator's own capture, the bundle read back from its files)."""
    cfg = small_rollout(*request.param)
    truth = simulate(cfg)
    out = tmp_path_factory.mktemp("rollout")
    write_bundle(truth, out)
    return cfg, truth, load_capture(out)


def _sim_pods(truth: Capture) -> dict[str, dict[str, float]]:
    """What the simulator did to each pod (its own event rows)."""
    out: dict[str, dict[str, float]] = {}
    for r in truth.events.to_pylist():
        if r["object_kind"] == "Pod" and r["kind"] in ("pod_ready", "pod_killing"):
            out.setdefault(r["object_name"], {})[r["kind"]] = r["time"]
    return out


def test_versions_and_strategy_match_what_the_simulator_did(
    rolled: tuple[ScenarioConfig, Capture, Capture],
) -> None:
    cfg, truth, bundle = rolled
    with DuckDBStore(bundle) as store:
        found = analyze_rollout(store)
    assert found is not None
    sim = _sim_pods(truth)
    killed = {p for p, k in sim.items() if "pod_killing" in k}
    started = {p for p, k in sim.items() if "pod_killing" not in k and "pod_ready" in k}
    # the old version is the one whose pods were stopped, the new one the pods started
    assert {p.pod for p in found.pods if p.version in found.old} == killed
    assert {p.pod for p in found.new_pods} == started
    assert all(p.startswith(found.new + "-") for p in started)
    r = cfg.rollouts[0]
    assert (found.max_surge, found.max_unavailable) == (r.max_surge, r.max_unavailable)
    assert found.start == pytest.approx(cfg.start_unix_s + ROLL_AT_S, abs=1.0)
    # kube-state-metrics: the ready count fell by maxUnavailable, never below it
    assert found.dip is not None and found.dip.source == "kube_deployment_status_replicas_ready"
    assert found.dip.desired == cfg.pods.initial_replicas
    assert found.dip.lost == r.max_unavailable
    assert (found.dip.seconds_below > 0) == (r.max_unavailable > 0)


def test_latency_by_version_covers_every_request_once(
    rolled: tuple[ScenarioConfig, Capture, Capture],
) -> None:
    _, _, bundle = rolled
    with DuckDBStore(bundle) as store:
        found = analyze_rollout(store)
        ok = store.query(
            "SELECT count(*) AS n FROM requests WHERE status = 'ok' AND replica IS NOT NULL"
        ).to_pylist()[0]["n"]
    assert found is not None
    assert sum(v.requests for v in found.versions) == ok
    assert [v.version for v in found.versions if v.new] == [found.new]
    for v in found.versions:
        assert v.ttft_p50 is not None and v.ttft_p95 is not None
        assert v.ttft_p50 <= v.ttft_p95


def test_weight_loading_and_ready_times_come_from_the_pods(
    rolled: tuple[ScenarioConfig, Capture, Capture],
) -> None:
    cfg, truth, bundle = rolled
    sim = _sim_pods(truth)
    with DuckDBStore(bundle) as store:
        found = analyze_rollout(store)
    assert found is not None
    for p in found.new_pods:  # kubectl times have whole seconds
        assert p.ready == pytest.approx(sim[p.pod]["pod_ready"], abs=1.0)
    assert found.weight_load_s is not None
    # every new pod's warm-up window is measured against its own later requests
    assert {w.pod for w in found.warmups} <= {p.pod for p in found.new_pods}
    assert all(w.requests + w.steady_requests > 0 for w in found.warmups)
    doc = found.to_dict()
    json.dumps(doc)  # JSON-ready
    assert doc["capacity_dip"]["lost"] == cfg.rollouts[0].max_unavailable


def test_calibration_replays_the_rollout_it_sees(
    rolled: tuple[ScenarioConfig, Capture, Capture],
) -> None:
    cfg, _, bundle = rolled
    t0 = cfg.start_unix_s
    rollouts, warm, part = fit_rollouts(bundle, t0)
    r = cfg.rollouts[0]
    assert len(rollouts) == 1, part
    assert rollouts[0].at_s == pytest.approx(ROLL_AT_S, abs=1.0)
    assert (rollouts[0].max_surge, rollouts[0].max_unavailable) == (
        r.max_surge,
        r.max_unavailable,
    )
    assert warm is None, part  # its new pods serve at full speed once Ready


def test_calibration_fits_the_new_pods_warm_up(tmp_path: Path) -> None:
    """New pods 4x slower for 20 s after Ready: the fit, from the bundle's files, finds a
    warm-up that long to within one 10 s slice, and slower than the 1.5x that counts."""
    warm_s = 20.0
    cfg = apply_overrides(
        small_rollout(1, 0), {"pods.ready_warmup_s": warm_s, "pods.ready_warmup_factor": 4.0}
    )
    write_bundle(simulate(cfg), tmp_path)
    _, warm, part = fit_rollouts(load_capture(tmp_path), cfg.start_unix_s)
    assert warm is not None, part
    assert abs(warm.seconds - warm_s) <= WARMUP_BIN_S
    assert warm.factor >= WARMUP_SLOWDOWN
    assert part["ready_warmup"]["pods"] == warm.pods >= 1


def test_real_kubectl_output_of_a_deployment_that_did_not_roll(tmp_path: Path) -> None:
    """Real ``kubectl get pods``/``events`` of one ReplicaSet: pods known, no rollout."""
    folder = tmp_path / "k8s"
    folder.mkdir()
    for name in ("pods.json", "events_core_v1.json"):
        (folder / name).write_bytes((ROOT / "tests/data/kubernetes" / name).read_bytes())
    cap = load_capture(folder)
    with DuckDBStore(cap) as store:
        lives = pod_lives(store)
        assert lives and {p.version for p in lives} == {"vllm-llama-7d9f8b6c5d"}
        assert analyze_rollout(store) is None
    assert fit_rollouts(cap, 0.0)[0] == ()


def test_pods_named_without_their_replicaset_are_owned_by_its_created_pod_events() -> None:
    """A Knative revision's pods (``vllm-00001-deployment-<10 chars>``) carry no ReplicaSet in
    their names; the ReplicaSet controller's ``Created pod`` events, reported on the
    ReplicaSet, say which one owns them.  An autoscaler adding pods to the one ReplicaSet,
    beside pods that served from before the capture, is no rolling update (read as one
    before, the calibration replayed a rollout that stopped five of eight pods: +234 %)."""
    from tailtriage.model import make_table
    from tailtriage.model import schema as S

    rs = "vllm-82nflhfstc"
    old = [f"vllm-00001-deployment-82nfl{s}" for s in ("j29xq", "4l7c2")]
    new = [f"vllm-00001-deployment-82nfl{s}" for s in ("k5r7d", "8zjjv")]
    rows = [(100.0 + i, "pod_created", "ReplicaSet", rs, {"pod": p}) for i, p in enumerate(new)]
    rows += [(160.0 + i, "pod_ready", "Pod", p, {"pod": p}) for i, p in enumerate(new)]
    events = make_table(
        S.EVENTS,
        {
            "time": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "object_kind": [r[2] for r in rows],
            "object_name": [r[3] for r in rows],
            "attributes": [json.dumps(r[4]) for r in rows],
        },
    )
    served = old + new
    requests = make_table(
        S.REQUESTS,
        {
            "request_id": [f"r{i}" for i in range(len(served))],
            "arrival": [200.0 + i for i in range(len(served))],
            "status": ["ok"] * len(served),
            "replica": served,
        },
    )
    with DuckDBStore(Capture(requests=requests, events=events)) as store:
        assert {p.version for p in pod_lives(store)} == {rs}
        assert analyze_rollout(store) is None
