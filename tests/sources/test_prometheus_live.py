"""The live Prometheus reader against a stub HTTP API on loopback (the real server is in
tests/integration/test_prometheus_server.py)."""

from __future__ import annotations

import itertools
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from support import refusing_port
from tailtriage.errors import BackendError, ConfigError
from tailtriage.model.metric_catalog import CATALOG
from tailtriage.sources.prometheus_live import MAX_POINTS, TOKEN_ENV, read_prometheus

Reply = tuple[int, Any]  # (HTTP status, JSON body or raw bytes)


class Stub:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.answer: Callable[[dict[str, str]], Reply] = lambda q: (200, _matrix([]))
        self.lock = threading.Lock()


def _matrix(result: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parts.query))
            with state.lock:
                state.requests.append((parts.path, query, dict(self.headers.items())))
            status, body = state.answer(query)
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_reads_every_catalog_concept_and_keeps_series_as_exported(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = stub
    monkeypatch.delenv(TOKEN_ENV, raising=False)

    def answer(q: dict[str, str]) -> Reply:
        if '=~"vllm:num_requests_waiting|' in q["query"]:  # not ..._by_reason
            series = {"__name__": "vllm:num_requests_waiting", "model_name": "m", "pod": "p-1"}
            return 200, _matrix([{"metric": series, "values": [[100, "3"], [115, "9"]]}])
        for metric, value in (("kube_pod_created", "40"), ("kube_pod_status_scheduled_time", "52"),
                              ("kube_pod_status_ready_time", "90")):  # fmt: skip
            if metric in q["query"]:
                series = {"__name__": metric, "namespace": "llm", "pod": "p-1"}
                return 200, _matrix([{"metric": series, "values": [[100, value]]}])
        return 200, _matrix([])

    state.answer = answer
    cap = read_prometheus(url + "/", 100, 130, step=15)
    assert len(state.requests) == len(CATALOG)
    assert {p for p, _, _ in state.requests} == {"/api/v1/query_range"}
    _, q, headers = state.requests[0]
    assert (float(q["start"]), float(q["end"]), float(q["step"])) == (100, 130, 15)
    assert "Authorization" not in headers
    rows = [r for r in cap.series.to_pylist() if r["metric"].startswith("vllm:")]
    assert [(r["metric"], r["time"], r["value"]) for r in rows] == [
        ("vllm:num_requests_waiting", 100.0, 3.0),
        ("vllm:num_requests_waiting", 115.0, 9.0),
    ]
    assert json.loads(rows[0]["labels"]) == {"model_name": "m", "pod": "p-1"}
    assert rows[0]["source"] == url
    found = cap.metadata.extra["prometheus"]["found"]
    assert found == ["requests_waiting", "pod_created_time", "pod_scheduled_time", "pod_ready_time"]
    # no kubectl output over a live Prometheus: pods' pending and cold start from the gauges
    derived = {
        r["kind"]: r["duration"] for r in cap.events.to_pylist() if r["duration"] is not None
    }
    assert derived == {"pod_pending": 12.0, "cold_start": 38.0}


def test_token_only_from_environment_and_never_stored(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = stub
    secret = "s3cr3t-token-value"
    monkeypatch.setenv(TOKEN_ENV, secret)
    state.answer = lambda q: (200, _matrix([{"metric": {"__name__": "up"}, "values": [[1, "1"]]}]))
    cap = read_prometheus(url, 0, 10, step=5, queries=[("up", "up")])
    assert state.requests[0][2]["Authorization"] == f"Bearer {secret}"
    dumped = json.dumps(cap.metadata.to_dict()) + str(cap.series.to_pylist())
    assert secret not in dumped


def test_url_credentials_become_basic_auth_and_are_not_shown(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = stub
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with_creds = url.replace("http://", "http://alice:pa%40ss@")
    cap = read_prometheus(with_creds + "/prom", 0, 10, queries=[("up", "up")])
    path, _, headers = state.requests[0]
    assert path == "/prom/api/v1/query_range"
    assert headers["Authorization"] == "Basic YWxpY2U6cGFAc3M="  # alice:pa@ss
    assert "alice" not in json.dumps(cap.metadata.to_dict())


def test_long_ranges_are_split_below_the_point_limit(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    state, url = stub
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    read_prometheus(url, 0, 30_000, step=1, queries=[("up", "up")])
    windows = [(float(q["start"]), float(q["end"])) for _, q, _ in state.requests]
    windows.sort()
    assert windows[0][0] == 0 and windows[-1][1] == 30_000
    for (_, hi), (nxt, _) in itertools.pairwise(windows):
        assert nxt == hi + 1  # no gap, no overlap
    assert all((hi - lo) / 1 + 1 <= MAX_POINTS for lo, hi in windows)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            (400, {"status": "error", "errorType": "bad_data", "error": "1:2: parse error"}),
            "HTTP 400: bad_data: 1:2: parse error",
        ),
        ((401, b"Unauthorized\n"), f"HTTP 401 (set {TOKEN_ENV})"),
        ((200, b"<html>not prometheus</html>"), "did not answer JSON"),
        (
            (200, {"status": "error", "errorType": "timeout", "error": "query timed out"}),
            "query timed out",
        ),
        (
            (
                200,
                {
                    "status": "success",
                    "data": {
                        "resultType": "matrix",
                        "result": [{"metric": {}, "values": [[1, "x"]]}],
                    },
                },
            ),
            "expected a number",
        ),
    ],
)
def test_failures_are_one_line_backend_errors_naming_the_host(
    stub: tuple[Stub, str], monkeypatch: pytest.MonkeyPatch, reply: Reply, expected: str
) -> None:
    state, url = stub
    monkeypatch.setenv(TOKEN_ENV, "tok-should-not-leak")
    state.answer = lambda q: reply
    with pytest.raises(BackendError) as info:
        read_prometheus(url, 0, 60)
    msg = str(info.value)
    assert url in msg and expected in msg
    assert "\n" not in msg and "tok-should-not-leak" not in msg


def test_unreachable_server_and_bad_arguments() -> None:
    with (
        refusing_port() as port,
        pytest.raises(
            BackendError, match=rf"cannot reach Prometheus at http://127\.0\.0\.1:{port}"
        ),
    ):
        read_prometheus(f"http://127.0.0.1:{port}", 0, 60, timeout=2)
    with pytest.raises(ConfigError):
        read_prometheus("ftp://x", 0, 60)
    with pytest.raises(ConfigError):
        read_prometheus("http://127.0.0.1:1", 60, 0)
    with pytest.raises(ConfigError):
        read_prometheus("http://127.0.0.1:1", 0, 60, step=0)
