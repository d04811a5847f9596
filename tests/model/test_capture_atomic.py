"""A killed or concurrent save never loses the previous capture (issue 21)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa

from tailtriage.model import Capture, make_table
from tailtriage.model import schema as S


def capture(n: int, tag: str) -> Capture:
    return Capture(
        requests=make_table(
            S.REQUESTS,
            {
                "request_id": [f"{tag}{i}" for i in range(n)],
                "arrival": [float(i) for i in range(n)],
                "ttft": [0.1] * n,
                "status": ["ok"] * n,
            },
        )
    )


#: saves a new capture over ARGV[1], but stops for good half-way (after the tables, before
#: the metadata) and says so: the parent kills it there
_KILLED_MID_WRITE = """
import sys, time, types
import orjson
from tailtriage.model import capture as C
from tailtriage.model import Capture, make_table, schema as S

def stuck(*a, **k):
    print("mid-write", flush=True)
    time.sleep(600)

C.orjson = types.SimpleNamespace(dumps=stuck, loads=orjson.loads)
n = 5000
Capture(requests=make_table(S.REQUESTS, {
    "request_id": [f"new{i}" for i in range(n)], "arrival": [0.0] * n,
    "ttft": [0.2] * n, "status": ["ok"] * n})).save(sys.argv[1])
"""


def test_a_save_killed_mid_write_leaves_the_previous_capture_loadable(tmp_path: Path) -> None:
    path = tmp_path / "capture.duckdb"
    capture(7, "old").save(path)
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_MID_WRITE, str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "mid-write"
    finally:
        child.kill()  # SIGKILL: no cleanup runs
        child.wait()
    back = Capture.load(path)
    assert back.requests["request_id"].to_pylist() == [f"old{i}" for i in range(7)]
    capture(3, "next").save(path)  # the leftovers of the killed writer do not get in the way
    assert Capture.load(path).requests.num_rows == 3


def test_concurrent_saves_serialise_and_the_file_is_one_of_them_whole(tmp_path: Path) -> None:
    path = tmp_path / "capture.duckdb"
    caps = [capture(200 + k, f"w{k}-") for k in range(4)]
    errors: list[BaseException] = []

    def save(c: Capture) -> None:
        try:
            c.save(path)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(c,)) for c in caps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    back = Capture.load(path)
    assert back.requests.num_rows in {c.requests.num_rows for c in caps}
    ids = back.requests["request_id"].to_pylist()
    assert len({i.split("-")[0] for i in ids}) == 1  # rows of one writer only
    assert {p.name for p in tmp_path.iterdir()} == {"capture.duckdb"}  # no lock, no temp


def test_a_stale_wal_next_to_the_target_is_not_replayed_onto_the_new_capture(
    tmp_path: Path,
) -> None:
    path = tmp_path / "capture.duckdb"
    (tmp_path / "capture.duckdb.wal").write_bytes(b"garbage of a killed writer")
    capture(5, "x").save(path)
    assert Capture.load(path).requests.num_rows == 5
    assert isinstance(Capture.load(path).requests, pa.Table)
