"""The prefill-interference signal is computed in SQL (running counts over each replica's
interval events, aggregates only) and gives the same numbers on DuckDB and on the ClickHouse
engine (chDB, in-process): on a hand-made capture with known overlaps and boundary cases, and
on the prefill_interference scenario's bundle derived inside ClickHouse from its spans."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tailtriage.diagnosis.signals import Interference, gather
from tailtriage.model import Capture
from tailtriage.model import schema as S
from tailtriage.store import DuckDBStore, Store
from tailtriage.store.clickhouse import bind

#: the two engines order float additions differently (avg), so means agree to the last bits only
EXACT = 1e-12


class _ChdbCaptureStore:
    """A Capture's tables as chDB Memory tables (the ClickHouse engine, no server)."""

    dialect = "clickhouse"

    def __init__(self, capture: Capture) -> None:
        from chdb import session

        s: Any = session.Session()  # type: ignore[no-untyped-call]
        self._session = s
        for name in S.TABLES:
            tab = capture.table(name)  # noqa: F841  (read by name through Python())
            # chDB keeps one engine per process: an earlier store may have left its tables
            s.query(f"DROP TABLE IF EXISTS `{name}`")
            s.query(f"CREATE TABLE `{name}` ENGINE = Memory AS SELECT * FROM Python(tab)")

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        out: pa.Table = self._session.query(bind(sql, params), "ArrowTable")
        return out

    def close(self) -> None:
        for name in S.TABLES:
            self._session.query(f"DROP TABLE IF EXISTS `{name}`")
        self._session.close()


def _hand_made(slow_clean: frozenset[int] = frozenset()) -> Capture:
    """101 decoding requests, 5 long prompts (5000 tokens; the other 100 prompts have 100, so
    "long" is >= 1024).  Decode i on replica a runs [10 i, 10 i + 5].  Long prefills:

    - a [12, 31]: overlaps decodes 1, 2 (inside it) and 3
    - a [45, 50]: starts exactly at decode 4's end and ends exactly at decode 5's start: none
    - b [60, 100]: decodes 6-9 are on replica a: none; the one decode on b, [70, 75]: overlaps
    - a [200.5, 200.6]: inside decode 20
    - a [300, 321]: starts with decode 30, overlaps 31 and 32

    Overlapped decodes output 11 tokens (TPOT 5 s / 10 = 0.5 s), clean ones 51 (0.1 s) except
    those in ``slow_clean`` (11 tokens, as slow as the overlapped)."""
    hits = {1, 2, 3, 20, 30, 31, 32}
    req: dict[str, list[Any]] = {
        k: [] for k in ("request_id", "arrival", "replica", "prompt_tokens", "output_tokens")
    }
    stages: dict[str, list[Any]] = {k: [] for k in ("request_id", "stage", "start", "duration")}

    def add(
        rid: str, replica: str, prompt: int, out: int, stage: str, lo: float, hi: float
    ) -> None:
        for k, v in zip(req, (rid, lo - 0.5, replica, prompt, out), strict=True):
            req[k].append(v)
        for k, v in zip(stages, (rid, stage, lo, hi - lo), strict=True):
            stages[k].append(v)

    for i in range(100):
        out = 11 if i in hits or i in slow_clean else 51
        add(f"d{i}", "a", 100, out, "decode", 10.0 * i, 10.0 * i + 5)
    add("b0", "b", 100, 11, "decode", 70.0, 75.0)
    long_prefills = [
        ("a", 12.0, 31.0),
        ("a", 45.0, 50.0),
        ("b", 60.0, 100.0),
        ("a", 200.5, 200.6),
        ("a", 300.0, 321.0),
    ]
    for j, (replica, lo, hi) in enumerate(long_prefills):
        add(f"long{j}", replica, 5000, 1, "prefill", lo, hi)
    n = len(req["request_id"])
    return Capture(
        requests=S.make_table(S.REQUESTS, {**req, "status": ["ok"] * n}),
        stages=S.make_table(S.STAGES, stages),
    )


def _stores(capture: Capture) -> Iterator[tuple[str, Store]]:
    with DuckDBStore(capture) as duck:
        yield "duckdb", duck
    chdb = _ChdbCaptureStore(capture)
    try:
        yield "chdb", chdb
    finally:
        chdb.close()


def _interference(store: Store, window: tuple[float, float]) -> Interference | None:
    return gather(store, window, None).interference


def test_overlaps_are_counted_per_replica_with_touching_intervals_apart() -> None:
    cap = _hand_made()
    for engine, store in _stores(cap):
        got = _interference(store, (-10.0, 2000.0))
        assert got is not None, engine
        assert (got.long_prompt_tokens, got.overlapped, got.clean) == (1024.0, 8, 93), engine
        assert got.tpot_ratio == pytest.approx(5.0, rel=1e-9), engine
        # the 6 slowest (above 0.95 x 101 = 95.95) are all overlapped: share 1 vs 8 / 101
        assert got.tail_lift == pytest.approx(101 / 8, rel=1e-12), engine


def test_a_tie_at_the_p95_is_kept_whole() -> None:
    # 91 clean at 0.1 s, then 10 at 0.5 s (8 overlapped, 2 clean): the p95 (index 95) is 0.5 s
    # and all 10 are at or above it, whatever order an engine gives the tied rows
    cap = _hand_made(slow_clean=frozenset({50, 60}))
    for engine, store in _stores(cap):
        got = _interference(store, (-10.0, 2000.0))
        assert got is not None, engine
        assert (got.overlapped, got.clean) == (8, 93), engine
        assert got.tpot_ratio == pytest.approx(0.5 / (10.1 / 93), rel=1e-9), engine
        assert got.tail_lift == pytest.approx((8 / 10) / (8 / 101), rel=1e-12), engine


def test_too_few_prompts_or_decodes_give_no_signal() -> None:
    cap = _hand_made()
    for engine, store in _stores(cap):
        # decodes 0-29 and b0: fewer than 50 prompts arrive in [-10, 299)
        assert _interference(store, (-10.0, 299.0)) is None, engine
        # no long prompt arrives in [320, 2000): too few to tell interference from noise
        assert _interference(store, (320.0, 2000.0)) is None, engine


def _same(a: Interference | None, b: Interference | None) -> None:
    if a is None or b is None:
        assert a is b
        return
    assert (a.long_prompt_tokens, a.overlapped, a.clean) == (
        b.long_prompt_tokens,
        b.overlapped,
        b.clean,
    )
    assert b.tpot_ratio == pytest.approx(a.tpot_ratio, rel=EXACT)
    assert b.tail_lift == pytest.approx(a.tail_lift, rel=EXACT)


@pytest.fixture(scope="module")
def interference_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Capture, str]:
    from tailtriage.simulator import resolve_scenario, simulate
    from tailtriage.simulator.bundle import write_bundle
    from tailtriage.store.clickhouse_export import export_bundle
    from tailtriage.store.input import load_capture

    folder = tmp_path_factory.mktemp("prefill_interference")
    write_bundle(simulate(resolve_scenario("prefill_interference")), folder)
    url = f"chdb://{tmp_path_factory.mktemp('ch')}?table=otel_traces"
    assert export_bundle(folder / "traces.otlp.jsonl", url) > 0
    return folder, load_capture(folder / "traces.otlp.jsonl"), url


@pytest.mark.slow
def test_duckdb_and_clickhouse_agree_on_the_scenario(
    interference_bundle: tuple[Path, Capture, str],
) -> None:
    """The bundle read from its OTLP file into DuckDB, and its spans exported to otel_traces and
    derived inside ClickHouse: the same interference aggregates, in and out of the incident."""
    from tailtriage.store.clickhouse import open_store

    _, cap, url = interference_bundle
    lo, hi = cap.time_range or (0.0, 0.0)
    # the whole run, the healthy phase (no long prompts: no signal), the incident
    windows = [(lo, hi + 1.0), (lo, lo + 240.0), (lo + 240.0, hi + 1.0)]
    with DuckDBStore(cap) as duck:
        local = [_interference(duck, w) for w in windows]
    with open_store(url) as ch:
        remote = [_interference(ch, w) for w in windows]
    for a, b in zip(local, remote, strict=True):
        _same(a, b)
    # the signal is there: overlapped decodes are slower than clean ones and crowd the tail
    assert local[1] is None
    incident = local[2]
    assert incident is not None and incident.tpot_ratio > 1.2 and incident.overlapped > 100


@pytest.mark.slow
def test_triage_from_clickhouse_names_prefill_interference_like_duckdb(
    interference_bundle: tuple[Path, Capture, str],
) -> None:
    """The ClickHouse triage of the scenario ranks prefill interference first, as the local one
    does (before the signal was SQL aggregates, ClickHouse's LEFT JOIN defaults counted every
    decode as overlapped and the signal was lost there).  The SLO is 1.5x the healthy p95 TPOT."""
    from tailtriage.pipeline.triage import triage
    from tailtriage.store.input import open_input

    _, cap, url = interference_bundle
    slo = "p95 tpot < 13.3ms"
    local = [f.category for f in triage(cap, slo, whatif=False).findings]
    with open_input(url) as store:
        remote = [f.category for f in triage(store, slo, whatif=False).findings]
    assert local[:1] == ["prefill_interference"], local
    assert remote == local
