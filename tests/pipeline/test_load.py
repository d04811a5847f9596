"""load_capture: bundle folders, single files, saved captures, live Prometheus (lazily)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from tailtriage.errors import ConfigError, InputError
from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S
from tailtriage.store.input import load_capture

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources"))
from trace_builders import otlp_doc, vllm_trace, write_jsonl


def test_bundle_sniffs_every_file_and_skips_unknown_ones(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "gateway-and-engine.log", [otlp_doc(vllm_trace(0, 0.0))])  # odd name
    sub = tmp_path / "more"
    sub.mkdir()
    write_jsonl(sub / "x.json", [otlp_doc(vllm_trace(1, 5.0))])
    (tmp_path / "notes.txt").write_text("the pager went off at 3am\n")
    (tmp_path / "broken.json").write_bytes(b'{"resourceSpans": [')
    cap = load_capture(tmp_path)
    assert cap.requests.num_rows == 2
    skipped = {Path(s.path).name: s.reason for s in cap.metadata.skipped_files}
    assert set(skipped) == {"notes.txt", "broken.json"}
    assert "unknown format" in skipped["notes.txt"]
    assert "invalid JSON" in skipped["broken.json"]
    assert {p.format for p in cap.metadata.provenance} == {"otlp_json"}


def test_a_trace_split_over_two_files_is_joined(tmp_path: Path) -> None:
    spans = vllm_trace(0, 0.0)
    write_jsonl(tmp_path / "gateway.jsonl", [otlp_doc(spans[:2])])
    write_jsonl(tmp_path / "engine.jsonl", [otlp_doc(spans[2:])])
    cap = load_capture(tmp_path)
    assert cap.requests.num_rows == 1 and cap.spans.num_rows == 4
    stages = {r["stage"] for r in cap.stages.to_pylist()}
    assert {"ingress", "api_server", "engine_queue", "prefill", "decode"} <= stages


def test_saved_capture_round_trips(tmp_path: Path) -> None:
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(vllm_trace(0, 0.0))]))
    cap.save(tmp_path / "c.duckdb")
    again = load_capture(tmp_path / "c.duckdb")
    assert again.requests.equals(cap.requests) and again.spans.num_rows == cap.spans.num_rows


def test_capture_without_spans_is_left_alone(tmp_path: Path) -> None:
    reqs = make_table(
        S.REQUESTS, {"request_id": ["a"], "arrival": [1_700_000_000.0], "status": ["ok"]}
    )
    Capture(requests=reqs).save(tmp_path / "c.duckdb")
    assert load_capture(tmp_path / "c.duckdb").requests.equals(reqs)


def test_missing_path_and_nothing_to_load(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_capture(tmp_path / "nope")
    assert "nope" in str(err.value)
    with pytest.raises(ConfigError):
        load_capture(None)


def test_live_prometheus_is_read_lazily_over_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, float, float]] = []

    def fake(url: str, start: float, end: float, step: float = 15.0) -> Capture:
        calls.append((url, start, end))
        return Capture()

    module = types.ModuleType("tailtriage.sources.prometheus_live")
    module.read_prometheus = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tailtriage.sources.prometheus_live", module)
    path = write_jsonl(tmp_path / "t.jsonl", [otlp_doc(vllm_trace(0, 0.0))])
    cap = load_capture(
        path, prometheus="http://127.0.0.1:9090", since="100", until="1970-01-01T00:10:00Z"
    )
    assert calls == [("http://127.0.0.1:9090", 100.0, 600.0)]
    assert cap.requests.num_rows == 1
    with pytest.raises(ConfigError):
        load_capture(None, prometheus="http://x", since="700", until="600")
