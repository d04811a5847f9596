"""`collect --traces chdb://...`: the window's slowest traces of an ``otel_traces`` table (filled
by the project's exporter, as the Collector's ClickHouse exporter fills it) become a bundle
file that triages like the table itself."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from tests.sources.trace_builders import T0, Sp, otlp_doc, tid, vllm_trace, write_jsonl

from support import refusing_port
from tailtriage.collect.bundle import CollectRequest, collect_bundle
from tailtriage.collect.clickhouse_traces import FILE
from tailtriage.collect.traces import collect_traces
from tailtriage.pipeline.analyze import analyze
from tailtriage.sources.base import ReadOptions
from tailtriage.sources.bundle import read_file
from tailtriage.store.clickhouse import connect
from tailtriage.store.clickhouse_export import export_spans
from tailtriage.store.clickhouse_url import parse_url
from tailtriage.store.input import load_capture

pytest.importorskip("chdb", reason="pip install 'tailtriage[clickhouse]'")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: decode seconds of trace i (arrivals one minute apart): not ordered by time
DECODE = (0.4, 1.6, 0.2, 1.2, 0.8, 2.0, 0.6, 1.0)
SLO = "p95 ttft < 500ms"


def _spans() -> list[Sp]:
    spans: list[Sp] = []
    for i, decode in enumerate(DECODE):
        spans += vllm_trace(i, i * 60.0, queue=0.05 * (i + 1), decode=decode)
    return spans


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    """A chDB otel_traces table of :data:`DECODE`'s traces; the spans per trace."""
    folder = tmp_path_factory.mktemp("ch")
    raw = read_file(write_jsonl(folder / "t.jsonl", [otlp_doc(_spans())]), ReadOptions())
    url = f"chdb://{folder / 'db'}?table=otel_traces"
    engine = connect(parse_url(url))
    try:
        export_spans(engine, parse_url(url), raw.spans)
    finally:
        engine.close()
    return url, dict(Counter(raw.spans["trace_id"].to_pylist()))


def _lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / FILE).read_text().splitlines()]


def _trace_ids(doc: dict[str, object]) -> set[str]:
    return {
        sp["traceId"]
        for rs in doc["resourceSpans"]  # type: ignore[attr-defined]
        for ss in rs["scopeSpans"]
        for sp in ss["spans"]
    }


def test_collected_bundle_triages_like_the_table(
    tmp_path: Path, table: tuple[str, dict[str, int]]
) -> None:
    url, per_trace = table
    window = (T0 - 60, T0 + 3600)
    manifest = collect_bundle(CollectRequest(window=window, traces=url, timeout=10), tmp_path)
    (outcome,) = manifest.sources
    assert outcome.target.startswith("chdb://") and outcome.errors == ()
    assert outcome.records == len(DECODE) and outcome.files == (FILE,)
    bundle = load_capture(tmp_path)
    direct = load_capture(url)  # derived inside ClickHouse from the table's spans
    assert bundle.spans.num_rows == sum(per_trace.values())
    got = {r["request_id"]: r for r in bundle.requests.to_pylist()}
    want = {r["request_id"]: r for r in direct.requests.to_pylist()}
    assert len(got) == len(DECODE) and set(got) == set(want)
    for rid, row in want.items():
        for field in ("arrival", "first_token", "finish", "ttft", "e2e", "status", "replica"):
            assert got[rid][field] == row[field], (rid, field)
    ours, theirs = analyze(bundle, SLO).slos[0], analyze(direct, SLO).slos[0]
    assert (ours.observed, ours.count) == (theirs.observed, theirs.count)
    assert ours.observed is not None and ours.count == len(DECODE)


def test_only_traces_whose_root_starts_in_the_window_and_all_their_spans(
    tmp_path: Path, table: tuple[str, dict[str, int]]
) -> None:
    url, per_trace = table
    # roots at T0 + 120, 180, 240 s; the spans of the last start after the window ends
    outcome = collect_traces(url, tmp_path, (T0 + 100, T0 + 240.02), timeout=10)
    assert outcome.records == 3 and outcome.notes == ()
    docs = _lines(tmp_path)
    assert set().union(*map(_trace_ids, docs)) == {tid(2), tid(3), tid(4)}
    read = Counter(load_capture(tmp_path).spans["trace_id"].to_pylist())
    assert read == {tid(i): per_trace[tid(i)] for i in (2, 3, 4)}

    empty = collect_traces(url, tmp_path / "none", (T0 + 1000, T0 + 2000), timeout=10)
    assert (empty.records, empty.files, empty.errors) == (0, (), ())
    assert empty.notes == ("no traces in the window",)


def test_the_limit_keeps_the_slowest_roots_slowest_first(
    tmp_path: Path, table: tuple[str, dict[str, int]]
) -> None:
    url, _ = table
    outcome = collect_traces(url, tmp_path, (T0 - 60, T0 + 3600), timeout=10, max_traces=3)
    assert outcome.notes == (f"kept the 3 slowest of {len(DECODE)} traces",)
    # DECODE's three longest are traces 5 (2.0 s), 1 (1.6 s) and 3 (1.2 s)
    assert [_trace_ids(d) for d in _lines(tmp_path)] == [{tid(5)}, {tid(1)}, {tid(3)}]
    assert load_capture(tmp_path).requests.num_rows == 3


def test_a_missing_table_or_a_closed_port_is_one_error_line(
    tmp_path: Path, table: tuple[str, dict[str, int]]
) -> None:
    url, _ = table
    missing = collect_traces(
        url.replace("otel_traces", "nothing_here"), tmp_path / "a", (T0, T0 + 60), timeout=10
    )
    assert len(missing.errors) == 1 and "nothing_here" in missing.errors[0]
    assert missing.files == () and not (tmp_path / "a" / "traces").exists()

    pytest.importorskip("clickhouse_connect", reason="pip install 'tailtriage[clickhouse]'")
    with refusing_port() as port:
        closed = collect_traces(
            f"clickhouse://default@127.0.0.1:{port}/otel?table=otel_traces",
            tmp_path / "b",
            (T0, T0 + 60),
            timeout=2,
        )
    assert len(closed.errors) == 1 and f"127.0.0.1:{port}" in closed.errors[0]
    assert "\n" not in closed.errors[0] and closed.target.startswith("clickhouse://default@")


def test_a_malformed_url_is_an_error_line_not_a_crash(tmp_path: Path) -> None:
    bad = collect_traces("chdb:///?table=otel_traces", tmp_path, (T0, T0 + 60), timeout=1)
    assert bad.errors == ("chdb URL without a database folder: chdb:///path/to/dir",)
