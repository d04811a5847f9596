"""Outputs never destroy inputs (issue 21): every command refuses an output that is an input,
writes regular files atomically, writes into FIFOs and devices, follows symlinks, and creates
missing folders or fails with exit 3 and one line."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from tailtriage.cli._app import main
from tailtriage.errors import ConfigError, OutputError
from tailtriage.outputs import check_outputs, is_stream, write_bytes, write_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources"))
from trace_builders import otlp_doc, vllm_trace, write_jsonl


def run_main(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """The real entry point (its error boundary included): exit code and stderr."""
    monkeypatch.setattr(sys, "argv", ["tailtriage", *argv])
    with pytest.raises(SystemExit) as ei:
        main()
    code = ei.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().err


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    folder = tmp_path / "B"
    folder.mkdir()
    write_jsonl(folder / "traces.otlp.jsonl", [otlp_doc(vllm_trace(i, float(i))) for i in range(4)])
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        ["ingest", "{file}", "-o", "{file}"],
        ["ingest", "{bundle}", "-o", "{file}"],
        ["ingest", "{bundle}", "--json", "{file}"],
        ["triage", "{bundle}", "--no-whatif", "--json", "{file}"],
        ["analyze", "{bundle}", "--slo", "p95 ttft < 1s", "--html", "{file}"],
        ["render", "{file}", "-o", "{link}"],
        ["whatif", "{file}", "--slo", "p95 ttft < 1s", "--json", "{file}"],
        ["simulate", "{file}", "--json", "{link}"],
        ["compare", "{bundle}", "{file}", "--json", "{file}"],
    ],
)
def test_an_output_that_is_an_input_is_refused_and_the_input_untouched(
    argv: list[str],
    bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    file = bundle / "traces.otlp.jsonl"
    link = bundle.parent / "alias.jsonl"
    link.symlink_to(file)  # the same file under another name
    before = file.read_bytes()
    args = [a.format(file=file, bundle=bundle, link=link) for a in argv]
    code, err = run_main(args, monkeypatch, capsys)
    assert code == ConfigError.exit_code
    assert "refusing to overwrite" in err and err.count("\n") == 1
    assert file.read_bytes() == before


def test_two_outputs_naming_one_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="given twice"):
        check_outputs(inputs=[], outputs=[tmp_path / "r.json", tmp_path / "." / "r.json"])


def test_a_symlinked_output_replaces_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    target = tmp_path / "real" / "report.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_writers_that_overlap_take_turns_and_leave_no_lock_file(tmp_path: Path) -> None:
    """The lock file goes with the last writer; one that waited on a removed lock file locks
    the new one, so no two writers ever hold the lock at once."""
    import tailtriage.outputs as O

    target, inside, most = tmp_path / "report.json", [0], [0]
    guard = threading.Lock()
    real = O.os.replace

    def counting_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        threading.Event().wait(0.002)
        real(src, dst)
        with guard:
            inside[0] -= 1

    def write(k: int) -> None:
        for i in range(20):
            write_text(target, f"{k}-{i}")

    O.os.replace = counting_replace  # type: ignore[assignment]
    try:
        threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        O.os.replace = real  # type: ignore[assignment]
    assert most[0] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_bytes(fifo, b"report\n")
    reader.join(timeout=10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_device_is_written_into_and_stays_a_device() -> None:
    assert is_stream(Path("/dev/null")) and is_stream(Path("/dev/stdout"))
    write_bytes("/dev/null", b"x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_missing_output_folders_are_created(
    bundle: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "new" / "deeper" / "c.duckdb"
    js = tmp_path / "other" / "s.json"
    code, err = run_main(
        ["ingest", str(bundle), "-o", str(out), "--json", str(js)], monkeypatch, capsys
    )
    assert code == 0, err
    assert out.is_file() and js.is_file()


def test_an_output_folder_that_cannot_be_made_is_exit_3_one_line(
    bundle: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    out = blocker / "sub" / "c.duckdb"  # a folder under a regular file cannot exist
    code, err = run_main(["ingest", str(bundle), "-o", str(out)], monkeypatch, capsys)
    assert code == OutputError.exit_code == 3
    assert err.count("\n") == 1 and str(blocker / "sub") in err


def test_a_capture_cannot_be_saved_into_a_fifo(tmp_path: Path) -> None:
    from tailtriage.model import Capture

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="regular file"):
        Capture().save(fifo)
