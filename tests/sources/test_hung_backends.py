"""A backend that accepts connections and never answers is one BackendError line (exit 4)
after the configured timeout, not a hang (issue 21).  The pytest timeouts below are guards
against the hang, not speed measurements."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest

from tailtriage.cli._app import main
from tailtriage.errors import BackendError, ConfigError
from tailtriage.sources._safety import (
    DEFAULT_TIMEOUT_S,
    TIMEOUT_ENV,
    network_timeout,
    using_timeout,
)
from tailtriage.sources.prometheus_live import read_prometheus


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port whose listener completes connections (the kernel's backlog) and
    never reads or writes a byte."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


@pytest.mark.timeout(60)
def test_a_silent_prometheus_is_a_backend_error(silent_port: int) -> None:
    with pytest.raises(BackendError) as err:
        read_prometheus(f"http://127.0.0.1:{silent_port}", 0, 60, timeout=0.5)
    assert f"127.0.0.1:{silent_port}" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scheme", ["http", "clickhouse"])
def test_the_cli_gives_exit_4_and_one_line_for_a_silent_backend(
    scheme: str,
    silent_port: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: object,
) -> None:
    if scheme == "clickhouse":
        pytest.importorskip("clickhouse_connect")
        argv = ["triage", f"clickhouse://127.0.0.1:{silent_port}/otel", "--timeout", "0.5"]
    else:
        argv = ["ingest", "--prometheus", f"http://127.0.0.1:{silent_port}", "--timeout", "0.5"]
    monkeypatch.chdir(str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["tailtriage", *argv])
    with pytest.raises(SystemExit) as ei:
        main()
    err = capsys.readouterr().err
    assert ei.value.code == BackendError.exit_code == 4, err
    assert err.count("\n") == 1 and f"127.0.0.1:{silent_port}" in err


def test_the_timeout_is_30_s_unless_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert network_timeout() == DEFAULT_TIMEOUT_S == 30.0
    monkeypatch.setenv(TIMEOUT_ENV, "7")
    assert network_timeout() == 7.0
    with using_timeout(2.5):
        assert network_timeout() == 2.5
    monkeypatch.setenv(TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError):
        network_timeout()
    with pytest.raises(ConfigError), using_timeout(-1):
        pass
