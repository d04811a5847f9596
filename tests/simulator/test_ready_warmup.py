"""The post-Ready warm-up (``pods.ready_warmup_s`` / ``ready_warmup_factor``) and the readiness
gate that hides it from traffic (``pods.ready_warmup_gated``), on a short rolling update."""

from __future__ import annotations

import statistics

import pytest

from analyses.test_rollout import small_rollout
from simulator.test_simulation import table_bytes
from tailtriage.analyses.pods import PodLife, pod_lives
from tailtriage.model import Capture
from tailtriage.simulator import apply_overrides, simulate
from tailtriage.store import DuckDBStore

WARM_S = 20.0
FACTOR = 4.0


def _new_pods(cap: Capture) -> list[PodLife]:
    with DuckDBStore(cap) as store:
        lives = pod_lives(store)
    first = min(lives, key=lambda p: p.created or 0.0).version
    return [p for p in lives if p.version != first and p.ready is not None]


def _prefill_ratio(cap: Capture, window_s: float) -> float:
    """Median prefill time of the new pods' requests arriving in the ``window_s`` after their
    Ready over the median of their later requests."""
    rows = cap.requests.select(["request_id", "replica", "arrival"]).to_pylist()
    prefill = {
        r["request_id"]: r["duration"]
        for r in cap.stages.select(["request_id", "stage", "duration"]).to_pylist()
        if r["stage"] == "prefill"
    }
    ready = {p.pod: p.ready for p in _new_pods(cap)}
    warm, later = [], []
    for r in rows:
        at = ready.get(r["replica"])
        if at is None or r["request_id"] not in prefill or r["arrival"] < at:
            continue
        (warm if r["arrival"] < at + window_s else later).append(prefill[r["request_id"]])
    return statistics.median(warm) / statistics.median(later)


@pytest.fixture(scope="module")
def base() -> Capture:
    return simulate(small_rollout(1, 0))


def test_defaults_are_the_full_speed_pod(base: Capture) -> None:
    cfg = small_rollout(1, 0)
    same = {"pods.ready_warmup_s": WARM_S, "pods.ready_warmup_factor": 1.0}
    assert table_bytes(simulate(apply_overrides(cfg, same))) == table_bytes(base)
    assert _prefill_ratio(base, WARM_S) < 1.5


def test_a_warm_up_slows_the_new_pods_right_after_ready(base: Capture) -> None:
    warm = {"pods.ready_warmup_s": WARM_S, "pods.ready_warmup_factor": FACTOR}
    cap = simulate(apply_overrides(small_rollout(1, 0), warm))
    assert _prefill_ratio(cap, WARM_S) > FACTOR / 2
    # the same pods, Ready at the same times: only their engine is slower
    assert [p.ready for p in _new_pods(cap)] == [p.ready for p in _new_pods(base)]


def test_the_gate_moves_ready_past_the_warm_up(base: Capture) -> None:
    gated = {
        "pods.ready_warmup_s": WARM_S,
        "pods.ready_warmup_factor": FACTOR,
        "pods.ready_warmup_gated": True,
    }
    cap = simulate(apply_overrides(small_rollout(1, 0), gated))
    loads = [p.load_s for p in _new_pods(cap)]
    before = [p.load_s or 0.0 for p in _new_pods(base)]
    assert loads  # each later one waits for the one before: fewer fit in the capture
    assert loads == pytest.approx([b + WARM_S for b in before[: len(loads)]], abs=0.01)
    assert _prefill_ratio(cap, WARM_S) < 1.5
