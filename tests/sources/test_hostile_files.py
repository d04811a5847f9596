"""A bundle never fails because of one file, and damaged input is read as far as it is whole
(issue 21): deep chains, huge integers, a failing reader, BOMs, invalid UTF-8 at its real
position, one bad intValue, truncated protobuf streams, and errors printed as plain text."""

from __future__ import annotations

import base64
import gzip
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from trace_builders import Sp, otlp_doc, sid, tid, vllm_trace, write_jsonl

from tailtriage.cli._app import main
from tailtriage.derive.skew import MAX_DEPTH, break_cycles
from tailtriage.errors import InputError, ParseError
from tailtriage.sources import base
from tailtriage.store.input import load_capture


def chain(depth: int, trace: int = 99) -> list[Sp]:
    """One trace: a root and ``depth`` descendants, each the only child of the one before."""
    spans = [Sp(tid(trace), sid(trace, 1), None, "root", 0.0, depth + 2.0, "SERVER")]
    for k in range(2, depth + 2):
        spans.append(Sp(tid(trace), sid(trace, k), sid(trace, k - 1), f"s{k}", k * 0.5, k + 1.0))
    return spans


def test_a_4100_deep_chain_is_cut_and_the_rest_of_the_bundle_triaged(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "deep.jsonl", [otlp_doc(chain(4100))])
    write_jsonl(tmp_path / "good.jsonl", [otlp_doc(vllm_trace(i, float(i))) for i in range(3)])
    cap = load_capture(tmp_path)
    assert cap.requests.num_rows == 3
    assert cap.metadata.quality["spans.parent_cycle"] >= 1
    assert cap.metadata.skipped_files == ()


@pytest.mark.parametrize(("depth", "cuts"), [(MAX_DEPTH, 0), (MAX_DEPTH + 1, 1)])
def test_the_depth_limit_holds_exactly(depth: int, cuts: int) -> None:
    parent = np.arange(-1, depth, dtype=np.int64)  # span k's parent is k - 1: depth `depth`
    start = np.arange(depth + 1, dtype=np.float64)
    _, n = break_cycles(parent, start)
    assert n == cuts


def test_a_huge_integer_in_a_kubectl_event_keeps_the_file(tmp_path: Path) -> None:
    def event(name: str, message: str) -> dict[str, Any]:
        return {
            "kind": "Event",
            "reason": "SuccessfulRescale",
            "message": message,
            "involvedObject": {"kind": "HorizontalPodAutoscaler", "name": name},
            "lastTimestamp": "2024-06-01T10:00:00Z",
        }

    doc = {
        "kind": "List",
        "items": [
            event("a", "New size: 99999999999999999999999; reason: cpu"),
            event("b", "New size: 4; reason: cpu"),
        ],
    }
    path = tmp_path / "events.json"
    path.write_bytes(orjson.dumps(doc))
    cap = load_capture(path)
    assert cap.events.num_rows == 2
    attrs = [orjson.loads(a) for a in cap.events["attributes"].to_pylist()]
    assert {a["replicas"] for a in attrs} == {"99999999999999999999999", 4}


def test_a_reader_that_fails_unexpectedly_costs_only_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zipkin = base.get("zipkin")

    def broken(path: Path, options: base.ReadOptions) -> Any:
        raise ZeroDivisionError("a bug in a reader")

    monkeypatch.setattr(type(zipkin), "read", lambda self, p, o: broken(p, o))
    (tmp_path / "z.json").write_text('[{"traceId": "1", "id": "2", "timestamp": 1}]')
    write_jsonl(tmp_path / "good.jsonl", [otlp_doc(vllm_trace(0, 0.0))])
    cap = load_capture(tmp_path)
    assert cap.requests.num_rows == 1
    (skipped,) = cap.metadata.skipped_files
    assert skipped.path == str(tmp_path / "z.json")
    assert "zipkin reader failed" in skipped.reason and "ZeroDivisionError" in skipped.reason


def test_a_syntax_error_is_reported_at_its_real_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "jaeger.json"
    path.write_bytes(b'{"data": [\n  {"traceID": "1",\n   "spans": [x]}]}')
    with pytest.raises(ParseError) as err:
        load_capture(path)
    assert err.value.position == "line 3, column 14"


def test_invalid_utf8_is_counted_at_its_real_position(tmp_path: Path) -> None:
    span = {
        "traceId": "ab" * 8,
        "id": "cd" * 8,
        "name": "NAME",
        "timestamp": 1_717_236_000_000_000,
        "duration": 1000,
        "localEndpoint": {"serviceName": "svc"},
    }
    text = orjson.dumps([span, span | {"id": "ef" * 8}], option=orjson.OPT_INDENT_2)
    bad = text.replace(b"NAME", b"N\xffME", 1)
    path = tmp_path / "zipkin.json"
    path.write_bytes(bad)
    cap = load_capture(path)
    assert cap.spans.num_rows == 2
    assert cap.metadata.quality["input.invalid_utf8"] == 1
    line = bad[: bad.index(b"\xff")].count(b"\n") + 1
    assert any(f":line {line}, column " in w for w in cap.metadata.warnings)


def test_a_bom_costs_no_line_of_otlp_json_lines(tmp_path: Path) -> None:
    docs = [otlp_doc(vllm_trace(i, float(i))) for i in range(3)]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(orjson.dumps(d) + b"\n" for d in docs))
    cap = load_capture(path)
    assert cap.requests.num_rows == 3
    assert "otlp.bad_lines" not in cap.metadata.quality


def test_one_bad_int_value_keeps_the_span(tmp_path: Path) -> None:
    doc = otlp_doc(vllm_trace(0, 0.0))
    span = doc["resourceSpans"][-1]["scopeSpans"][0]["spans"][-1]
    span["attributes"].append({"key": "gen_ai.usage.input_tokens", "value": {"intValue": "many"}})
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [doc]))
    assert cap.spans.num_rows == 4 and cap.requests.num_rows == 1
    assert "spans.invalid" not in cap.metadata.quality


def proto(doc: dict[str, Any]) -> bytes:
    """The OTLP/JSON document as protobuf (the JSON mapping of protobuf wants base64 ids)."""
    for rs in doc["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId", "parentSpanId"):
                if key in sp:
                    sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    return ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()


def test_a_truncated_last_protobuf_message_keeps_the_complete_ones(tmp_path: Path) -> None:
    blobs = [proto(otlp_doc(vllm_trace(i, float(i)))) for i in range(3)]
    framed = b"".join(len(b).to_bytes(4, "big") + b for b in blobs)
    path = tmp_path / "t.pb"
    path.write_bytes(framed[:-25])  # the Collector was killed in the last message
    cap = load_capture(path)
    assert cap.requests.num_rows == 2
    assert cap.metadata.quality["otlp.bad_messages"] == 1


def _main(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: Any) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["tailtriage", *argv])
    with pytest.raises(SystemExit) as ei:
        main()
    return int(ei.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["ingest", "{dir}/traces[backup].json"], 3, "traces[backup].json"),
        (["ingest", "--prometheus", "prometheus:9090"], 2, "prometheus:9090"),
        (["ingest", "--prometheus", "http://127.0.0.1:99999"], 2, "99999"),
        (["analyze", "{dir}/traces[backup].json", "--slo", "p95 ttft < 1e400ms"], 2, "1e400"),
        (["render", "{dir}/report.json"], 3, "malformed report"),
    ],
)
def test_errors_are_one_plain_text_line_with_the_documented_code(
    args: list[str], code: int, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:  # fmt: skip
    (tmp_path / "traces[backup].json").write_text('{"resourceSpans": [')
    (tmp_path / "report.json").write_text('{"schema_version": 1, "slos": "x"}')
    monkeypatch.chdir(tmp_path)
    got, err = _main([a.format(dir=tmp_path) for a in args], monkeypatch, capsys)
    assert got == code, err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_compressed_inputs_are_read_transparently_under_their_own_name(
    tmp_path: Path, kind: str
) -> None:
    from backports import zstd

    raw = b"".join(orjson.dumps(otlp_doc(vllm_trace(i, float(i)))) + b"\n" for i in range(3))
    raw += b'{"resourceSpans": [tr'  # a cut last line, counted under the compressed name
    packed = gzip.compress(raw) if kind == "gzip" else zstd.compress(raw)
    path = tmp_path / f"traces.jsonl.{'gz' if kind == 'gzip' else 'zst'}"
    path.write_bytes(packed)
    cap = load_capture(tmp_path)
    assert cap.requests.num_rows == 3 and cap.metadata.skipped_files == ()
    assert {p.path for p in cap.metadata.provenance} == {str(path)}
    assert set(cap.spans["source"].to_pylist()) == {str(path)}
    assert any(w.startswith(f"{path}:line 4") for w in cap.metadata.warnings)


def test_a_corrupt_compressed_file_is_skipped_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 20)
    write_jsonl(tmp_path / "good.jsonl", [otlp_doc(vllm_trace(0, 0.0))])
    cap = load_capture(tmp_path)
    (skipped,) = cap.metadata.skipped_files
    assert skipped.path == str(tmp_path / "bad.json.gz") and "gzip" in skipped.reason
    assert cap.requests.num_rows == 1


def test_a_capture_whose_header_checksum_looks_like_gzip_is_not_unzipped(
    tmp_path: Path,
) -> None:
    # a saved capture's first 8 bytes are DuckDB's header checksum, random per file: one in
    # 65,536 begins 1f 8b. Its own magic at bytes 8-12 sends it to the capture reader, whose
    # error (this one is no real database) is about the capture, not a corrupt gzip stream
    path = tmp_path / "before.duckdb"
    path.write_bytes(b"\x1f\x8b" + b"\x00" * 6 + b"DUCK" + b"\x00" * 4084)
    with pytest.raises(InputError) as err:
        load_capture(path)
    assert "gzip" not in str(err.value) and "capture" in str(err.value)


def test_a_pipe_is_read_as_what_it_delivers(tmp_path: Path) -> None:
    fifo = tmp_path / "traces"
    os.mkfifo(fifo)
    blob = gzip.compress(orjson.dumps(otlp_doc(vllm_trace(0, 0.0))) + b"\n")

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(blob)

    writer = threading.Thread(target=feed)
    writer.start()
    cap = load_capture(fifo)  # like tailtriage ingest <(cat traces.jsonl.gz)
    writer.join(timeout=10)
    assert cap.requests.num_rows == 1


def test_invalid_utf8_in_otlp_json_lines_is_counted_at_its_line(tmp_path: Path) -> None:
    lines = [orjson.dumps(otlp_doc(vllm_trace(i, float(i)))) for i in range(3)]
    lines[1] = lines[1].replace(b"vllm-0", b"vllm-\xff", 1)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    cap = load_capture(path)
    assert cap.requests.num_rows == 3
    assert cap.metadata.quality["input.invalid_utf8"] == 1
    column = lines[1].index(b"\xff") + 1
    assert any(f":line 2, column {column}: 1 invalid UTF-8" in w for w in cap.metadata.warnings)
