"""Fault handling against loopback servers: every failure is classified, nothing hangs, and
the run ends within its bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import refusing_port
from tailtriage.loadgen import LoadConfig, Timeouts, run_load

from .servers import fast_server


def _cfg(port: int, **kw: object) -> LoadConfig:
    base: dict[str, object] = dict(
        url=f"http://127.0.0.1:{port}", model="m", rate=20.0, arrival="constant", requests=3,
        output_len="6", drain=5.0,
        timeouts=Timeouts(connect=2.0, first_byte=1.0, idle=0.5, total=5.0),
    )  # fmt: skip
    base.update(kw)
    return LoadConfig(**base)  # type: ignore[arg-type]


def test_connection_refused() -> None:
    with refusing_port() as port:
        res = run_load(_cfg(port))
    assert [r.error for r in res.records] == ["connect"] * 3
    assert all(r.status == "error" for r in res.records)
    assert res.summary.errors == {"connect": 3}


@pytest.mark.parametrize("code", [429, 500, 503])
def test_http_status(code: int) -> None:
    with fast_server(fault=f"status:{code}") as port:
        res = run_load(_cfg(port))
    assert {r.error for r in res.records} == {"http_status"}
    assert {r.http_status for r in res.records} == {code}
    assert all("injected fault" in (r.error_detail or "") for r in res.records)


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("reset:2", "stream_protocol"),
        ("malformed", "stream_protocol"),
        ("truncate:3", "stream_protocol"),
        ("no_done", None),
        ("stall:2", "timeout"),
        ("slow_headers:3", "timeout"),
    ],
)
def test_broken_streams_are_classified(fault: str, error: str) -> None:
    with fast_server(ttft=0.02, itl=0.01, fault=fault) as port:
        res = run_load(_cfg(port))
    assert len(res.records) == 3
    assert {r.error for r in res.records} == {error}
    for r in res.records:
        assert r.finish is not None
        # each failure ends within its own bound (idle 0.5 s, first byte 1 s) plus slack
        assert r.finish - r.send < 2.5
    if fault.startswith(("reset", "stall")):
        # tokens that did arrive before the fault are kept
        assert all(len(r.chunks) == 2 for r in res.records)


def test_close_after_response_does_not_break_the_next_request() -> None:
    with fast_server(ttft=0.01, itl=0.005, fault="close_early") as port:
        res = run_load(_cfg(port, requests=4, rate=50.0))
    assert [r.status for r in res.records] == ["ok"] * 4


def test_duration_bounds_a_run_against_a_stalled_server(tmp_path: Path) -> None:
    """A server that never finishes: the run stops dispatching at --duration and cancels
    what is left after --drain, keeping the records."""
    with fast_server(ttft=0.01, itl=0.01, fault="stall:1") as port:
        cfg = _cfg(
            port, requests=None, duration=0.6, drain=0.3,
            timeouts=Timeouts(connect=2.0, first_byte=30.0, idle=30.0, total=60.0),
        )  # fmt: skip
        res = run_load(cfg, tmp_path / "out")
    assert res.records
    assert {r.status for r in res.records} == {"cancelled"}
    assert (tmp_path / "out" / "capture.duckdb").exists()
    lines = (tmp_path / "out" / "requests.w0.jsonl").read_bytes().splitlines()
    assert len(lines) == len(res.records)


def test_closed_loop_users_survive_a_server_that_closes_after_each_response() -> None:
    # each user's next request goes out on the connection just freed, from the read callback;
    # when the server closed it meanwhile, the request is sent again on a fresh connection
    with fast_server(ttft=0.01, itl=0.005, fault="close_early") as port:
        res = run_load(
            _cfg(port, rate=None, concurrency=3, requests=12, timeouts=Timeouts(connect=2.0))
        )
    assert len(res.records) == 12
    assert [r.status for r in res.records] == ["ok"] * 12
    assert res.summary.self_checks["connections_opened"] >= 12  # one per response, at least
