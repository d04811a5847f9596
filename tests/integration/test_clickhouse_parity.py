"""The same bundle loaded into ClickHouse (chDB, the real engine in-process, over the exporter's
DDL) and into DuckDB gives the same answers: exact percentiles, decompositions, per-replica
breakdowns; and the CLI path (export, then analyze/ingest from a chdb:// URL) works end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from support import refusing_port
from tailtriage.cli._app import app
from tailtriage.model import Capture
from tailtriage.pipeline.analyze import analyze
from tailtriage.pipeline.triage import triage
from tailtriage.report import Report
from tailtriage.simulator.bundle import write_bundle
from tailtriage.store.clickhouse_export import export_bundle
from tailtriage.store.input import load_capture, open_input

SLO = "p95 ttft < 400ms, p90 e2e < 8s"


def _scenario() -> Any:
    from tailtriage.simulator.config import (
        Arrivals,
        Dist,
        GpuConfig,
        Phase,
        PodsConfig,
        ScenarioConfig,
    )

    out = Dist("lognormal", median=40, sigma=0.5)
    return ScenarioConfig(
        gpu=GpuConfig(type="L40S"),
        pods=PodsConfig(initial_replicas=2),
        workload=(
            Phase(duration_s=30, arrivals=Arrivals(rate=4.0), output_tokens=out),
            Phase(name="incident", duration_s=30, arrivals=Arrivals(rate=24.0), output_tokens=out),
        ),
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Capture]:
    from tailtriage.simulator.simulation import run

    out = tmp_path_factory.mktemp("bundle")
    sim = run(_scenario(), seed=11).capture
    write_bundle(sim, out)
    return out, sim


@pytest.fixture(scope="module")
def chdb_url(bundle: tuple[Path, Capture], tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("ch")
    url = f"chdb://{folder}?table=otel_traces"
    n = export_bundle(bundle[0] / "traces.otlp.jsonl", url)
    assert n > 0
    return url


def _windows(sim: Capture) -> tuple[tuple[float, float], tuple[float, float]]:
    lo, hi = sim.time_range or (0.0, 0.0)
    return (lo, lo + 30.0), (lo + 30.0, hi + 1.0)


#: Both engines compute the exact type-7 quantile of the very same per-request values (which
#: are equal bit for bit, see tests/sources/test_clickhouse.py); only the last bit of the
#: interpolation's rounding differs (DuckDB and ClickHouse order its float operations
#: differently), hence a relative 1e-12 and not a statistical tolerance.
EXACT = 1e-12


def _close(x: float | None, y: float | None) -> bool:
    if x is None or y is None:
        return x is y
    return y == pytest.approx(x, rel=EXACT, abs=EXACT)


def _same(a: Report, b: Report) -> None:
    assert a.windows == b.windows
    for x, y in zip(a.slos, b.slos, strict=True):
        assert (x.count, x.breached) == (y.count, y.breached)
        assert _close(x.observed, y.observed)
        assert _close(x.ci_low, y.ci_low) and _close(x.ci_high, y.ci_high)
    assert a.percentiles.keys() == b.percentiles.keys()
    for metric, vals in a.percentiles.items():
        assert vals.keys() == b.percentiles[metric].keys()
        assert all(_close(v, b.percentiles[metric][k]) for k, v in vals.items()), metric
    assert a.stage_percentiles.keys() == b.stage_percentiles.keys()
    for stage, vals in a.stage_percentiles.items():
        for k, v in vals.items():
            assert _close(v, b.stage_percentiles[stage][k])
    da, db = a.decomposition, b.decomposition
    assert da is not None and db is not None
    assert (da.metric, da.percentile, da.band, da.count) == (
        db.metric,
        db.percentile,
        db.band,
        db.count,
    )
    assert _close(da.total, db.total)
    assert [s.stage for s in da.stages] == [s.stage for s in db.stages]
    for s, t in zip(da.stages, db.stages, strict=True):
        assert _close(s.seconds, t.seconds)
        assert (t.baseline_seconds is None) == (s.baseline_seconds is None)
        if s.baseline_seconds is not None:
            assert _close(s.baseline_seconds, t.baseline_seconds)
    breakdowns_a = a.to_dict()["extra"]["analysis"]["breakdowns"]
    breakdowns_b = b.to_dict()["extra"]["analysis"]["breakdowns"]
    assert breakdowns_a == breakdowns_b
    assert "replica" in breakdowns_a  # per-replica breakdown pushed down too


@pytest.mark.slow
def test_duckdb_and_clickhouse_give_the_same_analysis(
    bundle: tuple[Path, Capture], chdb_url: str
) -> None:
    folder, sim = bundle
    baseline, incident = _windows(sim)
    local = analyze(
        load_capture(folder / "traces.otlp.jsonl"), SLO, incident=incident, baseline=baseline
    )
    with open_input(chdb_url) as store:
        remote = analyze(store, SLO, incident=incident, baseline=baseline)
    _same(local, remote)
    # and with the windows detected rather than given
    with open_input(chdb_url) as store:
        _same(analyze(load_capture(folder / "traces.otlp.jsonl"), SLO), analyze(store, SLO))


@pytest.mark.slow
def test_since_until_restrict_the_requests(bundle: tuple[Path, Capture], chdb_url: str) -> None:
    folder, sim = bundle
    _, incident = _windows(sim)
    whole = load_capture(folder / "traces.otlp.jsonl")
    part = load_capture(chdb_url, since=incident[0], until=incident[1])
    arrivals = whole.requests["arrival"].to_pylist()
    want = sum(1 for a in arrivals if incident[0] <= a < incident[1])
    assert part.requests.num_rows == want
    assert part.spans.num_rows == 0  # spans stay in ClickHouse


@pytest.mark.slow
def test_triage_from_clickhouse_diagnoses_like_duckdb(
    bundle: tuple[Path, Capture], chdb_url: str
) -> None:

    folder, _ = bundle
    local = triage(load_capture(folder / "traces.otlp.jsonl"), SLO, whatif=False)
    with open_input(chdb_url) as store:
        remote = triage(store, SLO, whatif=False)
    assert [(f.category, f.stage) for f in remote.findings] == [
        (f.category, f.stage) for f in local.findings
    ]


@pytest.mark.slow
def test_cli_export_then_analyze_and_ingest(
    bundle: tuple[Path, Capture], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAILTRIAGE_CLICKHOUSE_PASSWORD", "never-printed")
    folder, _ = bundle
    url = f"chdb://{tmp_path / 'ch'}?table=otel_traces"
    runner = CliRunner()
    res = runner.invoke(app, ["export", str(folder), "--clickhouse", url, "--old-spelling"])
    assert res.exit_code == 0, res.output
    assert "exported" in res.output
    res = runner.invoke(app, ["analyze", url, "--slo", SLO, "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["ingest", url, "-o", str(tmp_path / "c.duckdb")])
    assert res.exit_code == 0, res.output
    cap = Capture.load(tmp_path / "c.duckdb")
    assert cap.requests.num_rows == load_capture(folder / "traces.otlp.jsonl").requests.num_rows
    for out in (tmp_path / "r.json").read_text(), res.output:
        assert "never-printed" not in out


@pytest.mark.slow
def test_unreachable_server_is_one_line_and_exit_4(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    with refusing_port() as port:
        env = dict(os.environ, TAILTRIAGE_CLICKHOUSE_PASSWORD="pw-not-to-show")
        url = f"clickhouse://reader@127.0.0.1:{port}/otel?table=otel_traces"
        res = subprocess.run(
            [sys.executable, "-m", "tailtriage", "triage", url, "--slo", "p95 ttft < 500ms"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert res.returncode == 4, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0]
    assert "Traceback" not in res.stderr and "pw-not-to-show" not in res.stderr + res.stdout


@pytest.mark.slow
def test_cli_analyze_and_triage_on_a_url_push_down(
    bundle: tuple[Path, Capture], chdb_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI runs URL inputs in ClickHouse: nothing per request is pulled through load_capture."""
    import orjson

    import tailtriage.store.input as load_module

    folder, _ = bundle
    local = CliRunner().invoke(
        app, ["analyze", str(folder), "--slo", SLO, "--json", str(tmp_path / "local.json")]
    )
    assert local.exit_code == 0, local.output

    def refuse(*args: object, **kwargs: object) -> Capture:
        raise AssertionError("a ClickHouse URL must not be loaded into a local capture")

    monkeypatch.setattr(load_module, "load_capture", refuse)
    runner = CliRunner()
    res = runner.invoke(
        app, ["analyze", chdb_url, "--slo", SLO, "--json", str(tmp_path / "a.json")]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app, ["triage", chdb_url, "--slo", SLO, "--no-whatif", "--json", str(tmp_path / "t.json")]
    )
    assert res.exit_code == 0, res.output
    want = orjson.loads((tmp_path / "local.json").read_bytes())["slos"][0]["observed_ms"]
    for name in ("a.json", "t.json"):
        got = orjson.loads((tmp_path / name).read_bytes())["slos"][0]["observed_ms"]
        assert got == pytest.approx(want, rel=1e-9)
