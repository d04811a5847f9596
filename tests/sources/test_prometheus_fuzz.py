"""Bad input never crashes the metric, Kubernetes and vLLM-run sources: mutated real files
either read (damaged records skipped and counted) or fail with a one-line InputError that
names the file."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailtriage.errors import InputError
from tailtriage.model import Capture
from tailtriage.sources import base
from tailtriage.sources.exposition import SOURCE as EXPOSITION
from tailtriage.sources.kubernetes import SOURCE as KUBERNETES
from tailtriage.sources.prometheus_api import SOURCE as PROM_API
from tailtriage.sources.vllm_run import META_SOURCE, REQUESTS_SOURCE, TIMESERIES_SOURCE

K8S = Path(__file__).resolve().parents[1] / "data" / "kubernetes"
SAMPLE_API = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {"metric": {"__name__": "vllm:num_requests_waiting", "pod": "a"},
             "values": [[1714564800, "1"], [1714564815, "NaN"]]},
        ],
    },
}  # fmt: skip
FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _check(source: Any, path: Path) -> None:
    try:
        cap = source.read(path, base.ReadOptions())
    except InputError as exc:
        msg = str(exc)
        assert str(path) in msg and "\n" not in msg.strip(), msg
        return
    assert isinstance(cap, Capture)


#: values of the wrong type (and a few hostile strings) planted into documents
WRONG = [None, True, 0, -1, 2**70, 1.5e308, "", "x", "NaN", "2024-13-45T99:00:00Z", [], [1, 2],
         {}, {"a": None}, "\u0000", "0" * 1000]  # fmt: skip


def _mutate(doc: Any, rnd: random.Random, rate: float, depth: int = 0) -> Any:
    """Replace some nodes of a JSON document with values of the wrong type."""
    if depth > 0 and rnd.random() < rate:
        return rnd.choice(WRONG)
    if isinstance(doc, dict):
        return {k: _mutate(v, rnd, rate, depth + 1) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_mutate(v, rnd, rate, depth + 1) for v in doc]
    return doc


@FUZZ
@given(seed=st.integers(0, 2**32), rate=st.sampled_from([0.01, 0.05, 0.2]))
@pytest.mark.parametrize(
    ("source", "fixture"),
    [
        (KUBERNETES, K8S / "events_core_v1.json"),
        (KUBERNETES, K8S / "events_k8s_io_v1.json"),
        (KUBERNETES, K8S / "pods.json"),
        (PROM_API, None),
    ],
)
def test_json_sources_survive_values_of_the_wrong_type(
    tmp_path: Path, source: Any, fixture: Path | None, seed: int, rate: float
) -> None:
    doc = json.loads(fixture.read_text()) if fixture else SAMPLE_API
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(_mutate(doc, random.Random(seed), rate)))
    _check(source, path)


def _sample_bytes(shared_data: Path, name: str) -> bytes:
    return (shared_data / name).read_bytes()


@FUZZ
@given(
    cut=st.integers(0, 4000),
    junk=st.binary(max_size=40),
    at=st.integers(0, 4000),
)
@pytest.mark.parametrize(
    ("source", "name"),
    [
        (EXPOSITION, "engines/vllm_metrics_sample.txt"),
        (EXPOSITION, "prometheus/1histogram.om.txt"),
        (REQUESTS_SOURCE, "vllm_runs/RTX4090_Llama-3.1-8B/requests.jsonl"),
        (TIMESERIES_SOURCE, "vllm_runs/RTX4090_Llama-3.1-8B/timeseries.csv"),
        (META_SOURCE, "vllm_runs/RTX4090_Llama-3.1-8B/meta.json"),
        (KUBERNETES, None),
        (PROM_API, None),
    ],
)
def test_truncated_and_corrupted_bytes(
    shared_data: Path, tmp_path: Path, source: Any, name: str | None, cut: int, junk: bytes, at: int
) -> None:
    raw = _sample_bytes(shared_data, name) if name else (
        (K8S / "pods.json").read_bytes() if source is KUBERNETES else json.dumps(SAMPLE_API).encode()
    )  # fmt: skip
    raw = raw[: max(1, len(raw) - cut)]
    at = min(at, len(raw))
    path = tmp_path / "damaged"
    path.write_bytes(raw[:at] + junk + raw[at:])
    _check(source, path)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode)))
def test_sniffers_never_raise(head: bytes) -> None:
    for source in (
        EXPOSITION,
        PROM_API,
        KUBERNETES,
        REQUESTS_SOURCE,
        TIMESERIES_SOURCE,
        META_SOURCE,
    ):
        assert source.sniff(head, Path("x")) in (True, False)
