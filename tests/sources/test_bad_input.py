"""Bad input (issue 2, "Must hold"): each case is a one-line error naming file and position,
or is skipped and counted; mutated OTLP documents never crash and never lose request time."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_derive import check_sums
from trace_builders import Sp, otlp_doc, sid, tid, vllm_trace, write_jsonl

from tailtriage.errors import InputError, ParseError
from tailtriage.store.input import load_capture


def lines(*docs: Any) -> bytes:
    return b"".join((d if isinstance(d, bytes) else orjson.dumps(d)) + b"\n" for d in docs)


def good(i: int) -> dict[str, Any]:
    return otlp_doc(vllm_trace(i, float(i)))


def test_truncated_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    blob = lines(good(0), good(1))
    path = tmp_path / "t.jsonl"
    path.write_bytes(blob + orjson.dumps(good(2))[:-40])  # the Collector was killed mid-write
    cap = load_capture(path)
    assert cap.requests.num_rows == 2
    assert cap.metadata.quality["otlp.bad_lines"] == 1
    assert any(f"{path}:line 3:" in w for w in cap.metadata.warnings)


def test_broken_single_document_is_one_line_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(orjson.dumps(good(0), option=orjson.OPT_INDENT_2).decode()[:-30])
    with pytest.raises(ParseError) as err:
        load_capture(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:line ") and "column" in msg and "\n" not in msg


def test_wrong_types_and_missing_fields_are_skipped_with_position(tmp_path: Path) -> None:
    doc = good(0)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["startTimeUnixNano"] = True  # wrong type
    spans[1]["startTimeUnixNano"] = "soon"  # wrong value
    del spans[1]["spanId"]  # missing
    path = write_jsonl(tmp_path / "t.jsonl", [doc, good(1)])
    cap = load_capture(path)
    assert cap.metadata.quality["spans.invalid"] == 2
    assert cap.requests.num_rows == 2  # trace 0 keeps its engine spans; nothing lost
    assert any("line 1 resourceSpans[0].scopeSpans[0].spans[0]" in w for w in cap.metadata.warnings)
    check_sums(cap)


def test_negative_duration_is_skipped_and_counted(tmp_path: Path) -> None:
    spans = vllm_trace(0, 0.0)
    spans[1].end = spans[1].start - 0.5
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)]))
    assert cap.metadata.quality["spans.invalid"] == 1
    assert any("negative duration" in w for w in cap.metadata.warnings)
    check_sums(cap)


def test_orphans_duplicates_and_cycles_are_repaired_and_counted(tmp_path: Path) -> None:
    t = tid(5)
    spans = [
        Sp(
            t,
            sid(5, 1),
            sid(5, 2),
            "POST /v1/chat/completions",
            0.0,
            2.0,
            "SERVER",
            attrs={"http.route": "/v1/chat/completions"},
        ),
        Sp(t, sid(5, 2), sid(5, 1), "mystery", 0.5, 1.0),  # parent cycle with the first
        Sp(t, sid(5, 3), "00000000deadbeef", "other", 0.2, 0.3),  # orphan
    ]
    dup = copy.deepcopy(spans[2])
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc([*spans, dup])]))
    q = cap.metadata.quality
    assert q["spans.duplicate_id"] == 1 and q["spans.parent_cycle"] == 1 and q["spans.orphan"] == 1
    assert cap.spans.num_rows == 3
    check_sums(cap)


def test_non_utf8_bytes_keep_the_span(tmp_path: Path) -> None:
    raw = lines(good(0)).replace(b'"llama"', b'"ll\xffma"')
    path = tmp_path / "t.jsonl"
    path.write_bytes(raw)
    cap = load_capture(path)
    assert cap.requests["model"][0].as_py() == "ll\ufffdma"


def test_binary_garbage_is_unknown_format_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 10)
    with pytest.raises(InputError) as err:
        load_capture(path)
    assert str(path) in str(err.value)


def test_ten_megabyte_attribute_is_truncated_and_counted(tmp_path: Path) -> None:
    spans = vllm_trace(0, 0.0)
    spans[3].attrs = {**spans[3].attrs, "gen_ai.prompt": "x" * (10 * 1024 * 1024)}
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)]))
    assert cap.metadata.quality["attributes.truncated"] == 1
    assert max(len(a) for a in cap.spans["attributes"].to_pylist()) < 100_000
    assert cap.requests.num_rows == 1
    check_sums(cap)


def test_secrets_are_redacted_on_ingest(tmp_path: Path) -> None:
    spans = vllm_trace(0, 0.0)
    spans[0].attrs = {
        **spans[0].attrs,
        "http.request.header.authorization": "Bearer sk-live-123",
        "http.request.header.x-api-key": "abc",
        "Cookie": "session=42",
        "url.full": "https://bob:hunter2@api.example.com/v1/chat?api_key=sk-9&model=x",
    }
    path = write_jsonl(tmp_path / "t.jsonl", [otlp_doc(spans)])
    cap = load_capture(path)
    out = tmp_path / "c.duckdb"
    cap.save(out)
    blob = out.read_bytes() + "".join(cap.spans["attributes"].to_pylist()).encode()
    for secret in (b"sk-live-123", b"hunter2", b"sk-9", b"session=42", b'"abc"'):
        assert secret not in blob
    attrs = orjson.loads(
        cap.spans.filter(pa_eq(cap.spans["span_id"], sid(0, 1)))["attributes"][0].as_py()
    )
    assert attrs["http.request.header.authorization"] == "[REDACTED]"
    assert (
        attrs["url.full"] == "https://[REDACTED]@api.example.com/v1/chat?api_key=[REDACTED]&model=x"
    )


def pa_eq(col: Any, value: str) -> Any:
    import pyarrow.compute as pc

    return pc.equal(col, value)


# -- property: mutated OTLP documents ----------------------------------------------------------
_MUTATIONS = st.sampled_from(["delete", "null", "int", "string", "list", "negative", "huge"])


def mutate(doc: Any, path: list[Any], how: str) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if how == "delete" and isinstance(parent, dict):
        del parent[key]
    elif how == "null":
        parent[key] = None
    elif how == "int":
        parent[key] = 7
    elif how == "string":
        parent[key] = "zz"
    elif how == "list":
        parent[key] = []
    elif how == "negative":
        parent[key] = -1
    elif how == "huge":
        parent[key] = "9" * 40


def paths(node: Any, prefix: list[Any]) -> list[list[Any]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, [*prefix, k])
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, [*prefix, i])
    return out


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_mutated_documents_never_crash_nor_lose_time(tmp_path: Path, data: st.DataObject) -> None:
    doc = otlp_doc(vllm_trace(0, 0.0) + vllm_trace(1, 3.0))
    candidates = paths(doc, [])
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.sampled_from(candidates))
        # (the path may no longer exist after an earlier mutation)
        with contextlib.suppress(KeyError, IndexError, TypeError):
            mutate(doc, where, data.draw(_MUTATIONS))
        candidates = paths(doc, []) or candidates
    path = tmp_path / "m.jsonl"
    path.write_bytes(orjson.dumps(doc) + b"\n")
    try:
        cap = load_capture(path)
    except InputError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    check_sums(cap)


def test_ids_of_the_right_length_but_not_hex_are_skipped(tmp_path: Path) -> None:
    doc = good(0)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["traceId"] = "z" * 32
    spans[1]["parentSpanId"] = "0" * 16  # all-zero parent id: no parent
    cap = load_capture(write_jsonl(tmp_path / "t.jsonl", [doc]))
    assert cap.metadata.quality["spans.invalid"] == 1
    assert cap.spans.num_rows == 3
    assert cap.metadata.quality.get("spans.orphan", 0) == 0


def test_span_without_end_time_ends_with_its_children(tmp_path: Path) -> None:
    """A root exported without endTimeUnixNano must not swallow its children's time."""
    doc = otlp_doc(vllm_trace(0, 0.0))
    root = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    del root["endTimeUnixNano"]
    path = tmp_path / "m.jsonl"
    path.write_bytes(orjson.dumps(doc) + b"\n")
    cap = load_capture(path)
    (req,) = cap.requests.to_pylist()
    assert req["e2e"] == pytest.approx(1.572, abs=1e-6)
    assert cap.metadata.quality["spans.missing_end"] == 1
    check_sums(cap)
