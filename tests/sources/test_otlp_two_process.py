"""Large OTLP/JSON-lines files are read by two processes (one half each).  That fast path must
give exactly the Capture of the one-process exact pass: same spans in the same order, same
attributes JSON (secrets redacted alike), same requests, stages, counts and warnings; and any
unusual input (a broken line, an invalid span) must fall back to the exact pass, so errors keep
naming file and line.  Likewise derive's two-thread stages must equal its one-thread pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import orjson
import pytest

from support import DATA, ROOT
from tailtriage.model import Capture
from tailtriage.sources import otlp_halves, otlp_json
from tailtriage.sources.base import ReadOptions
from tailtriage.store.input import load_capture


def _bench_generate(path: Path, n_spans: int) -> None:
    spec = importlib.util.spec_from_file_location("bench_ingest", ROOT / "bench" / "ingest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.generate(path, n_spans)


class _Spy:
    """Records whether the two-process read produced the Capture (or fell back)."""

    def __init__(self) -> None:
        self.results: list[bool] = []
        self.real = otlp_halves.read_two_halves

    def __call__(self, *args: Any) -> tuple[Capture | None, int]:
        cap, reported = self.real(*args)
        self.results.append(cap is not None)
        return cap, reported


def _both(
    path: Path, monkeypatch: pytest.MonkeyPatch, derive: bool = True
) -> tuple[Capture, Capture, _Spy]:
    spy = _Spy()
    with monkeypatch.context() as m:
        m.setattr(otlp_halves, "PARALLEL_MIN_BYTES", 0)
        m.setattr(otlp_halves, "read_two_halves", spy)
        m.delenv("TAILTRIAGE_INGEST_PROCESSES", raising=False)
        fast = (
            load_capture(path) if derive else otlp_json.OtlpJsonSource().read(path, ReadOptions())
        )
    with monkeypatch.context() as m:
        m.setenv("TAILTRIAGE_INGEST_PROCESSES", "1")
        exact = (
            load_capture(path) if derive else otlp_json.OtlpJsonSource().read(path, ReadOptions())
        )
    return fast, exact, spy


def _assert_same(a: Capture, b: Capture) -> None:
    assert a.spans.equals(b.spans)
    assert a.requests.equals(b.requests)
    assert a.stages.equals(b.stages)
    assert a.metadata == b.metadata


def test_bench_file_two_processes_equal_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bench.otlp.jsonl"
    _bench_generate(path, 6000)  # 47 lines of 128 requests
    fast, exact, spy = _both(path, monkeypatch)
    assert spy.results == [True]  # the two-process path produced it
    assert fast.spans.num_rows == 6000
    assert fast.requests.num_rows == 1500
    assert fast.metadata.provenance[0].records == 6000
    _assert_same(fast, exact)


def test_real_trace_file_two_processes_equal_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = orjson.loads((DATA / "otlp" / "trace.json").read_bytes())
    path = tmp_path / "trace.otlp.jsonl"
    path.write_bytes(b"".join(orjson.dumps(doc) + b"\n" for _ in range(6)))
    fast, exact, spy = _both(path, monkeypatch)
    assert spy.results == [True]
    assert fast.metadata.quality.get("spans.duplicate_id", 0) > 0  # the same spans 6 times
    _assert_same(fast, exact)


def _span(i: int, attrs: dict[str, str]) -> dict[str, Any]:
    return {
        "traceId": f"{i + 1:032x}",
        "spanId": f"{i + 1:016x}",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": str(1_767_225_600_000_000_000 + i * 1000),
        "endTimeUnixNano": str(1_767_225_600_000_000_000 + i * 1000 + 500),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
    }


def _line(i: int, attrs: dict[str, str]) -> bytes:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [_span(i, attrs)]}]}]}
    return orjson.dumps(doc) + b"\n"


def test_secrets_in_the_second_half_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [_line(i, {"http.route": "/v1/chat/completions"}) for i in range(10)]
    lines.append(
        _line(10, {"authorization": "Bearer sk-live-1", "url": "https://u:pw9@h/x?api_key=k9"})
    )
    path = tmp_path / "secrets.otlp.jsonl"
    path.write_bytes(b"".join(lines))
    fast, exact, spy = _both(path, monkeypatch, derive=False)
    assert spy.results == [True]
    _assert_same(fast, exact)
    attrs = orjson.loads(fast.spans["attributes"][10].as_py())
    assert attrs["authorization"] == "[REDACTED]"
    assert "pw9" not in attrs["url"] and "k9" not in attrs["url"]


@pytest.mark.parametrize("where", ["first half", "second half"])
def test_broken_lines_are_counted_with_whole_file_line_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    lines = [_line(i, {"http.route": "/v1/chat/completions"}) for i in range(12)]
    bad = 2 if where == "first half" else 9
    lines[bad] = lines[bad][:40] + b"\n"  # a truncated line
    lines[bad + 1] = lines[bad + 1].replace(b'"spanId":"', b'"spanId":"zz', 1)  # not hex
    lines[-1] = lines[-1][:50]  # the Collector killed mid-write: truncated last line
    path = tmp_path / "broken.otlp.jsonl"
    path.write_bytes(b"".join(lines))
    seen: list[int] = []
    once: list[int] = []
    spy = _Spy()
    with monkeypatch.context() as m:
        m.setattr(otlp_halves, "PARALLEL_MIN_BYTES", 0)
        m.setattr(otlp_halves, "read_two_halves", spy)
        m.delenv("TAILTRIAGE_INGEST_PROCESSES", raising=False)
        fast = otlp_json.OtlpJsonSource().read(path, ReadOptions(progress=seen.append))
    with monkeypatch.context() as m:
        m.setenv("TAILTRIAGE_INGEST_PROCESSES", "1")
        exact = otlp_json.OtlpJsonSource().read(path, ReadOptions(progress=once.append))
    assert spy.results == [True]  # handled by the two processes
    _assert_same(fast, exact)
    assert fast.metadata.quality == {"otlp.bad_lines": 2, "spans.invalid": 1}
    assert any(f"broken.otlp.jsonl:line {bad + 1}:" in w for w in fast.metadata.warnings)
    assert any(f"broken.otlp.jsonl:line {bad + 2} " in w for w in fast.metadata.warnings)
    assert any("broken.otlp.jsonl:line 12:" in w for w in fast.metadata.warnings)
    assert sum(seen) == sum(once) > 0  # progress: the good lines' bytes, once


def test_warnings_kept_are_the_first_of_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = [_line(i, {"http.route": "/v1/chat/completions"}) for i in range(40)]
    lines = [ln if i % 4 != 1 else ln[:30] + b"\n" for i, ln in enumerate(good)]  # 10 broken
    lines += [ln[:30] + b"\n" for ln in good[:20]] + good[:5]  # 20 more at the end
    path = tmp_path / "many.otlp.jsonl"
    path.write_bytes(b"".join(lines))
    fast, exact, spy = _both(path, monkeypatch, derive=False)
    assert spy.results == [True]
    _assert_same(fast, exact)
    assert fast.metadata.quality["otlp.bad_lines"] == 30
    assert len(fast.metadata.warnings) == 20


@pytest.mark.parametrize("bad", [3, 10])
def test_non_hex_ids_of_the_right_length_are_named_in_either_half(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: int
) -> None:
    """Such ids leave the typed path: the careful one skips the span and names its line, so
    either half gives the one-pass count and warning (line numbers of the whole file)."""
    lines = [_line(i, {"http.route": "/v1/chat/completions"}) for i in range(12)]
    lines[bad] = lines[bad].replace(
        f'"spanId":"{bad + 1:016x}"'.encode(), b'"spanId":"g' + b"1" * 15 + b'"'
    )
    path = tmp_path / "nonhex.otlp.jsonl"
    path.write_bytes(b"".join(lines))
    fast, exact, spy = _both(path, monkeypatch, derive=False)
    assert spy.results == [True]  # no need for the exact pass
    _assert_same(fast, exact)
    assert fast.metadata.quality == {"spans.invalid": 1}
    assert fast.metadata.warnings[0].startswith(f"{path}:line {bad + 1} resourceSpans[0]")
    assert fast.spans.num_rows == 11


def _staged(path: Path, **settings: int) -> tuple[Capture, list[int]]:
    """``load_capture(path)`` with two cores and derive's stage ``settings`` patched, and the
    first request of each block the stages were taken in."""
    from tailtriage.derive import derive

    starts: list[int] = []
    real = derive._part

    def part(req: Any, which: slice) -> Any:
        starts.append(which.start)
        return real(req, which)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(derive, "_cores", lambda: 2)
        m.setattr(derive, "_part", part)
        for name, value in settings.items():
            m.setattr(derive, name, value)
        return load_capture(path), starts


def test_stages_in_two_threads_equal_one_pass(tmp_path: Path) -> None:
    """derive takes the stages of large captures in two halves of the requests, one thread
    each: the rows must be those of one pass, in the same order."""
    path = tmp_path / "bench.otlp.jsonl"
    _bench_generate(path, 2000)
    split, halves = _staged(path, PARALLEL_MIN_REQUESTS=2)
    assert halves == [0, 250]  # 500 requests taken in two halves
    one = load_capture(path)
    _assert_same(split, one)
    assert split.stages.num_rows > 2 * split.requests.num_rows


def test_stages_in_many_blocks_equal_one_pass(tmp_path: Path) -> None:
    """The stage computation in blocks (ten of 50 requests, five per thread) gives the rows
    of one pass, in the same order."""
    path = tmp_path / "bench.otlp.jsonl"
    _bench_generate(path, 2000)
    blocks, starts = _staged(path, PARALLEL_MIN_REQUESTS=2, STAGE_BLOCK_REQUESTS=60)
    assert starts == list(range(0, 500, 50))
    one, _ = _staged(path, PARALLEL_MIN_REQUESTS=10**9, STAGE_BLOCK_REQUESTS=10**9)
    _assert_same(blocks, one)
    assert blocks.stages.equals(one.stages)
