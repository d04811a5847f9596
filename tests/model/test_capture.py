"""Capture round-trips through DuckDB and keeps its schema."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailtriage.errors import InputError
from tailtriage.model import Capture, FileProvenance, Metadata, concat, make_table
from tailtriage.model import schema as S
from tailtriage.store import DuckDBStore


def _requests(rows: list[tuple[str, float, float]]) -> pa.Table:
    return make_table(
        S.REQUESTS,
        {
            "request_id": [r[0] for r in rows],
            "arrival": [r[1] for r in rows],
            "ttft": [r[2] for r in rows],
            "status": ["ok"] * len(rows),
        },
    )


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=8),
            st.floats(0, 2e9, allow_nan=False),
            st.floats(0, 100, allow_nan=False),
        ),
        max_size=20,
    )
)
def test_capture_round_trips_through_duckdb(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, float, float]]
) -> None:
    path = tmp_path_factory.mktemp("cap") / "c.duckdb"
    meta = Metadata(
        provenance=(FileProvenance("a.json", "otlp_json", 3, 1),), quality={"x": 2}, seed=7
    )
    cap = Capture(requests=_requests(rows), metadata=meta)
    cap.save(path)
    back = Capture.load(path)
    assert back.requests.to_pylist() == cap.requests.to_pylist()
    assert back.metadata == meta


def test_load_rejects_non_capture(tmp_path: pytest.TempPathFactory) -> None:
    p = tmp_path / "x.duckdb"  # type: ignore[operator]
    p.write_bytes(b"not a database at all")
    with pytest.raises(InputError) as ei:
        Capture.load(p)
    assert "x.duckdb" in str(ei.value)


def test_concat_merges_tables_and_quality_counts() -> None:
    a = Capture(
        requests=_requests([("a", 1.0, 0.1)]), metadata=Metadata(quality={"spans.duplicate": 1})
    )
    b = Capture(
        requests=_requests([("b", 2.0, 0.2)]), metadata=Metadata(quality={"spans.duplicate": 2})
    )
    c = concat([a, b])
    assert c.requests.column("request_id").to_pylist() == ["a", "b"]
    assert c.metadata.quality == {"spans.duplicate": 3}
    assert c.time_range == (1.0, 2.0)


def test_store_runs_sql_over_logical_tables() -> None:
    cap = Capture(requests=_requests([(str(i), float(i), i / 100) for i in range(101)]))
    with DuckDBStore(cap) as store:
        q = store.query("SELECT quantile_cont(ttft, 0.95) AS p95 FROM requests").to_pylist()
    assert q[0]["p95"] == pytest.approx(0.95)


def test_capture_rejects_wrong_columns() -> None:
    with pytest.raises(ValueError, match="requests"):
        Capture(requests=pa.table({"nope": [1]}))
