"""A simulator bundle as real exports come: spans sent twice (collector retries, and copies
that differ) and one vLLM pod whose clock runs ahead.  Exported with ``tailtriage export
--clickhouse chdb://...`` and read back, it gives the answers file ingest gives: the same
per-request rows and stages, percentiles and decompositions, and the same repair counts."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_clickhouse_parity import SLO, _same, _scenario, _windows
from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from tailtriage.cli._app import app
from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze
from tailtriage.simulator.bundle import write_bundle
from tailtriage.store.input import load_capture, open_input

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: the vLLM pod whose clock is off, and by how much (nanoseconds)
AHEAD_NS = 250_000_000
REPAIRS = ("spans.duplicate_id", "spans.orphan", "spans.clock_skew_adjusted")


def _attrs(resource: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in resource.get("attributes", [])}


def _shift(span: dict[str, Any], ns: int) -> None:
    for k in ("startTimeUnixNano", "endTimeUnixNano"):
        span[k] = str(int(span[k]) + ns)
    for ev in span.get("events", []):
        ev["timeUnixNano"] = str(int(ev["timeUnixNano"]) + ns)


def mutate(src: Path, dst: Path) -> dict[str, int]:
    """``src`` bundle copied to ``dst`` with its traces damaged; returns what was done."""
    shutil.copytree(src, dst)
    path = dst / "traces.otlp.jsonl"
    docs = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    pods = sorted(
        {
            _attrs(rs["resource"]).get("k8s.pod.name", "")
            for d in docs
            for rs in d["resourceSpans"]
            if _attrs(rs["resource"]).get("service.name") == "vllm"
        }
    )
    skewed_pod, shifted, retried, changed = pods[0], 0, 0, 0
    for d in docs:
        for rs in d["resourceSpans"]:
            if _attrs(rs["resource"]).get("k8s.pod.name") == skewed_pod:
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        _shift(sp, AHEAD_NS)
                        shifted += 1
    # a collector retry: the first batch of resource spans sent again, unchanged
    retry = orjson.loads(orjson.dumps(docs[0]))
    retried = sum(len(ss["spans"]) for rs in retry["resourceSpans"] for ss in rs["scopeSpans"])
    # copies that differ, sent BEFORE the originals: a later end, an error status
    first = [orjson.loads(orjson.dumps(rs)) for rs in docs[-1]["resourceSpans"] if rs["scopeSpans"]]
    for rs in first:
        for ss in rs["scopeSpans"]:
            ss["spans"] = ss["spans"][:20]
            for k, sp in enumerate(ss["spans"]):
                if k % 2:
                    sp["endTimeUnixNano"] = str(int(sp["endTimeUnixNano"]) + 3_000_000)
                else:
                    sp["status"] = {"code": 2}
                changed += 1
    docs = [{"resourceSpans": first}, *docs, retry]
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))
    return {"shifted": shifted, "copies": retried + changed}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Capture, dict[str, int]]:
    from tailtriage.simulator.simulation import run

    base = tmp_path_factory.mktemp("bundle")
    sim = run(_scenario(), seed=11).capture
    assert sim is not None
    write_bundle(sim, base / "clean")
    done = mutate(base / "clean", base / "damaged")
    return base / "damaged", sim, done


@pytest.fixture(scope="module")
def url(
    damaged: tuple[Path, Capture, dict[str, int]], tmp_path_factory: pytest.TempPathFactory
) -> str:
    folder = tmp_path_factory.mktemp("ch")
    url = f"chdb://{folder}?table=otel_traces"
    res = CliRunner().invoke(app, ["export", str(damaged[0]), "--clickhouse", url])
    assert res.exit_code == 0, res.output
    return url


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return bool(a == b)


@pytest.mark.slow
def test_per_request_rows_and_repair_counts_match_file_ingest(
    damaged: tuple[Path, Capture, dict[str, int]], url: str
) -> None:
    folder, _, done = damaged
    local = load_capture(folder / "traces.otlp.jsonl")
    remote = load_capture(url)
    q_local = {k: local.metadata.quality.get(k, 0) for k in REPAIRS}
    q_remote = {k: remote.metadata.quality.get(k, 0) for k in REPAIRS}
    assert q_local["spans.duplicate_id"] == done["copies"]
    # the pod's spans under another host's span move; those under their own pod inherit it
    assert 0 < q_local["spans.clock_skew_adjusted"] <= done["shifted"]
    assert q_remote == q_local
    assert len(remote.metadata.clock_adjustments) == len(local.metadata.clock_adjustments)
    want = {r["request_id"]: r for r in local.requests.to_pylist()}
    got = {r["request_id"]: r for r in remote.requests.to_pylist()}
    assert got.keys() == want.keys()
    for rid, w in want.items():
        for field, v in w.items():
            if field != "source":
                assert _equal(v, got[rid][field]), (rid, field, v, got[rid][field])
    key = ("request_id", "stage")
    ws = {tuple(r[k] for k in key): r for r in local.stages.to_pylist()}
    gs = {tuple(r[k] for k in key): r for r in remote.stages.to_pylist()}
    assert gs == ws


@pytest.mark.slow
def test_percentiles_and_decompositions_match_file_ingest(
    damaged: tuple[Path, Capture, dict[str, int]], url: str
) -> None:
    folder, sim, _ = damaged
    baseline, incident = _windows(sim)
    local = analyze(
        load_capture(folder / "traces.otlp.jsonl"), SLO, incident=incident, baseline=baseline
    )
    with open_input(url) as store:
        remote = analyze(store, SLO, incident=incident, baseline=baseline)
    _same(local, remote)
    for k in REPAIRS:
        assert remote.data_quality.counts.get(k, 0) == local.data_quality.counts.get(k, 0), k
    assert remote.data_quality.clock_adjustments == local.data_quality.clock_adjustments
    assert remote.data_quality.counts.get("spans.clock_skew_adjusted", 0) > 0
    # the counts come from the damage: the clean bundle has nothing to repair
    clean = analyze(load_capture(folder.parent / "clean" / "traces.otlp.jsonl"), SLO)
    assert not any(clean.data_quality.counts.get(k, 0) for k in REPAIRS)
