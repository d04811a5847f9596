"""The exporter's parts: observations from a capture, the histograms with exemplars, the
replay in scaled time, and the dashboards and rules (promtool and a real Prometheus check
them in tests/integration/test_exporter_prometheus.py)."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest
import yaml

from tailtriage.exporter.dashboards import dashboard_files
from tailtriage.exporter.metrics import STAGE_METRIC, StageMetrics
from tailtriage.exporter.observations import CaptureSource, capture_observations
from tailtriage.exporter.server import replay, serve
from tailtriage.model.capture import Capture


def test_observations_keep_the_exported_stages_in_end_order(capture: Capture) -> None:
    obs = capture_observations(capture)
    stages = {o.stage for o in obs}
    assert stages == {"gateway_queue", "engine_queue", "prefill", "decode", "ttft"}  # no client
    assert [o.time for o in obs] == sorted(o.time for o in obs)
    assert all(o.trace_id and len(o.trace_id) == 32 for o in obs)


def test_openmetrics_separates_queue_and_execution_with_trace_exemplars(
    capture: Capture,
) -> None:
    metrics = StageMetrics()
    filed = replay(metrics, CaptureSource(capture))
    assert filed == len(capture_observations(capture))
    text = metrics.openmetrics().decode()
    queue = f'{STAGE_METRIC}_count{{kind="queue",stage="engine_queue"}} 60.0'
    execution = f'{STAGE_METRIC}_count{{kind="execution",stage="decode"}} 60.0'
    assert queue in text and execution in text
    # engine queue 0.2 s: every sample in the 0.25 bucket, none in 0.1, with a trace exemplar
    lines = [line for line in text.splitlines() if 'stage="engine_queue"' in line]
    le01 = next(line for line in lines if 'le="0.1"' in line)
    le025 = next(line for line in lines if 'le="0.25"' in line)
    assert le01.split()[1] == "0.0" and le025.split(" # ")[0].endswith(" 60.0")
    assert '# {trace_id="' in le025
    assert text.rstrip().endswith("# EOF")


def test_replay_files_observations_when_their_scaled_time_comes(capture: Capture) -> None:
    now = [0.0]
    stop = threading.Event()

    class Clock:
        def __call__(self) -> float:
            return now[0]

    def fake_wait(timeout: float | None = None) -> bool:  # time passes only while waiting
        now[0] += timeout or 0.0
        return stop.is_set()

    stop.wait = fake_wait  # type: ignore[method-assign]
    metrics = StageMetrics()
    filed = replay(metrics, CaptureSource(capture), speed=10.0, stop=stop, clock=Clock())
    assert filed == len(capture_observations(capture))
    obs = capture_observations(capture)
    span = obs[-1].time - obs[0].time
    assert now[0] == pytest.approx(span / 10.0, abs=0.5)  # ten times faster than it happened


def test_bad_replay_settings_are_config_errors(capture: Capture) -> None:
    from tailtriage.errors import ConfigError

    with pytest.raises(ConfigError, match="--speed"):
        replay(StageMetrics(), CaptureSource(capture), speed=-1.0)
    with pytest.raises(ConfigError, match="--loop"):
        replay(StageMetrics(), CaptureSource(capture), loop=True)


def test_loopback_endpoint_serves_the_metrics(capture: Capture) -> None:
    metrics = StageMetrics()
    replay(metrics, CaptureSource(capture))
    served = serve(metrics, 0)
    try:
        req = urllib.request.Request(
            f"http://127.0.0.1:{served.port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            body = r.read().decode()
            assert "openmetrics" in r.headers["Content-Type"]
        assert '# {trace_id="' in body
    finally:
        served.shutdown()


def test_dashboards_and_rules_are_well_formed() -> None:
    files = dashboard_files(0.5).files
    board = json.loads(files["tailtriage-queue-vs-execution.json"])
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert any("kind" in e for e in exprs) and any("horizontalpodautoscaler" in e for e in exprs)
    rules = yaml.safe_load(files["tailtriage-rules.yml"])
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert alerts["TailtriageTTFTSLOBreach"]["expr"].endswith("> 0.5")
