"""``--since 30m`` and an absolute ``--until`` mean the same on both stores (issue 20).

The ClickHouse store keeps the spans of [since, until); the embedded store reads a live
Prometheus over [since, until].  Both get the times through ``open_input``, which resolves a
duration ago against the clock once (the ClickHouse path used to be handed ``"30m"`` raw and
refused it).  A URL input also gets the whole triage: its report carries the timings and the
signals summary that the local one has."""

from __future__ import annotations

import subprocess
import sys
import time
import types
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from trace_builders import T0, otlp_doc, vllm_trace, write_jsonl
from typer.testing import CliRunner

import tailtriage.cli.commands  # noqa: F401  (registers the commands)
from tailtriage.cli._app import app
from tailtriage.model import Capture
from tailtriage.store.clickhouse_export import export_bundle

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: whole seconds, so that the RFC 3339 --until below is this exact number
NOW = float(int(time.time()))
UNTIL = NOW - 600.0  # ten minutes ago
#: (trace_builders count from T0) requests four hours ago (before --since), 20..13 minutes ago
#: (kept), and in the last five minutes (after --until)
OLD = [vllm_trace(i, NOW - T0 - 4 * 3600.0 + i) for i in range(12)]
KEPT = [vllm_trace(100 + i, NOW - T0 - 1200.0 + 60.0 * i) for i in range(8)]
LATE = [vllm_trace(200 + i, NOW - T0 - 300.0 + 10.0 * i) for i in range(4)]
SLO = "p95 ttft < 500ms"


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("since")
    return write_jsonl(folder / "t.jsonl", [otlp_doc(s) for s in (*OLD, *KEPT, *LATE)])


@pytest.fixture(scope="module")
def chdb_url(traces: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"chdb://{tmp_path_factory.mktemp('ch')}?table=otel_traces"
    assert export_bundle(traces, url) > 0
    return url


@pytest.mark.parametrize("command", ["analyze", "triage"])
def test_clickhouse_keeps_the_spans_of_since_a_duration_until_an_instant(
    command: str, chdb_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    # 1h30m, not 30m: the slack keeps the oldest kept request in on a slow machine
    args = [command, chdb_url, "--slo", SLO, "--since", "1h30m", "--until", _rfc3339(UNTIL)]
    args += ["--json", str(out)] + (["--no-whatif"] if command == "triage" else [])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    report = orjson.loads(out.read_bytes())
    # neither the two-hour-old requests (before --since) nor the latest (after --until)
    assert report["data_quality"]["requests"] == len(KEPT)


def test_clickhouse_triage_has_the_timings_and_signals_of_the_local_one(
    chdb_url: str, traces: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    for name, path in (("ch", chdb_url), ("local", str(traces))):
        args = ["triage", path, "--slo", SLO, "--no-whatif", "--json", str(tmp_path / name)]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
    ch, local = (orjson.loads((tmp_path / n).read_bytes())["extra"] for n in ("ch", "local"))
    assert set(ch["triage"]) == set(local["triage"]) == {"timings", "signals", "whatif"}
    assert set(ch["triage"]["timings"]) == set(local["triage"]["timings"])
    assert ch["triage"]["signals"]["incident_arrival_rps"] == pytest.approx(
        local["triage"]["signals"]["incident_arrival_rps"]
    )


def test_embedded_store_reads_prometheus_over_since_30m_until_an_instant(
    traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[float, float]] = []

    def fake(url: str, start: float, end: float, step: float = 15.0) -> Capture:
        calls.append((start, end))
        return Capture()

    module = types.ModuleType("tailtriage.sources.prometheus_live")
    module.read_prometheus = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tailtriage.sources.prometheus_live", module)
    args = ["triage", str(traces), "--prometheus", "http://127.0.0.1:9", "--no-whatif"]
    # the instant is taken now, not at import: a long suite run must not push "30m ago" past it
    until = float(int(time.time())) - 600.0
    args += ["--since", "30m", "--until", _rfc3339(until), "--json", str(tmp_path / "r.json")]
    before = time.time()
    res = CliRunner().invoke(app, args)
    after = time.time()
    assert res.exit_code == 0, res.output
    [(start, end)] = calls
    assert end == until
    assert before - 1800.0 <= start <= after - 1800.0


@pytest.mark.parametrize("where", ["chdb", "file"])
def test_a_bad_since_is_one_line_naming_the_value(where: str, traces: Path, tmp_path: Path) -> None:
    path = f"chdb://{tmp_path}?table=otel_traces" if where == "chdb" else str(traces)
    res = subprocess.run(
        [sys.executable, "-m", "tailtriage", "triage", path, "--since", "half an hour"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr  # ConfigError
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--since" in lines[0] and "'half an hour'" in lines[0], lines
