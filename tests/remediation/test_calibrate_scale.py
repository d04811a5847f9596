"""The step-time scale refinement: a roofline is scaled as a line is (every step ``factor``
times as long), never past the hardware's peak, and only where the replica count was fixed
or the autoscaler never acted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tailtriage.model import Capture
from tailtriage.model import schema as S
from tailtriage.model.schema import make_table
from tailtriage.remediation.calibrate import _scaled
from tailtriage.remediation.calibrate.parts import replicas_changed
from tailtriage.simulator.cluster import make_template
from tailtriage.simulator.config import GpuConfig, ScenarioConfig, StepTimeConfig


def _step(config: ScenarioConfig) -> float:
    model = make_template(config, 0, np.random.default_rng(0)).step_model
    return float(model.step_time(512, 32, 32 * 1500 + 512))


@pytest.mark.parametrize("factor", [0.8, 1.25])
def test_a_scaled_roofline_runs_every_step_factor_times_as_long(factor: float) -> None:
    cfg = ScenarioConfig(gpu=GpuConfig(type="H100"), step_time=StepTimeConfig(mfu=0.4, mbu=0.6))
    scaled = _scaled(cfg, factor)
    assert scaled is not None and scaled.step_time.mode == "roofline"
    assert _step(scaled) == pytest.approx(factor * _step(cfg), rel=1e-6)


def test_a_roofline_is_not_scaled_past_the_hardware() -> None:
    cfg = ScenarioConfig(gpu=GpuConfig(type="H100"), step_time=StepTimeConfig(mfu=0.6, mbu=0.9))
    assert _scaled(cfg, 0.85) is None  # the memory bandwidth would be 106 % used
    assert _scaled(cfg, 0.95) is not None


def _series(metric: str, values: list[float]) -> Capture:
    n = len(values)
    table = make_table(
        S.SERIES,
        {"metric": [metric] * n, "labels": [json.dumps({"horizontalpodautoscaler": "vllm"})] * n,
         "time": [15.0 * i for i in range(n)], "value": values},
    )  # fmt: skip
    return Capture(series=table)


def test_the_autoscaler_acted_when_it_rescaled_or_the_replica_count_moved() -> None:
    metric = "kube_horizontalpodautoscaler_status_current_replicas"
    assert not replicas_changed(_series(metric, [3.0] * 10))
    assert replicas_changed(_series(metric, [3.0] * 5 + [5.0] * 5))
    events = make_table(
        S.EVENTS,
        {"time": [10.0], "kind": ["hpa_rescale"], "object_kind": ["HorizontalPodAutoscaler"],
         "object_name": ["vllm"], "reason": ["SuccessfulRescale"],
         "message": ["New size: 4; reason: concurrency above target"]},
    )  # fmt: skip
    assert replicas_changed(Capture(events=events))
    assert not replicas_changed(Capture())
