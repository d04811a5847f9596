"""Every file tailtriage writes goes through here: outputs never destroy inputs (issue 21).

Three rules, the same for every command (``ingest -o``, ``--json``, ``--html``, ``simulate``,
``whatif``, ``render -o``, ``bench --out``, the saved capture):

* an output that resolves to one of the command's inputs (the same file, through a symlink
  or a hard link, or an existing file inside an input folder) is refused before any work:
  :func:`check_outputs` raises :class:`~tailtriage.errors.ConfigError` (exit 2);
* a regular file is replaced atomically: written to a temporary file in the same folder,
  flushed to disk, then renamed over the target under an exclusive lock, so a reader never
  sees half a file, a killed writer leaves the previous file whole, and two concurrent writers
  serialise; a symlink is followed (its target is replaced, the link stays);
* a FIFO, a device or ``/dev/stdout`` is written *into* (a rename would replace the device
  node with a regular file and the reader would get nothing).

Missing folders are created; one that cannot be, or a write that fails (disk full,
permissions), is :class:`~tailtriage.errors.OutputError` (exit 3) naming the path::

    check_outputs(inputs=[bundle], outputs=[json_path, html_path])
    write_text(html_path, html)
    with replacing(capture_path) as tmp:   # a writer that needs a path (DuckDB)
        duckdb.connect(str(tmp)) ...
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from tailtriage.errors import ConfigError, OutputError

#: how long a writer waits for another writer of the same file before giving up: a capture
#: of 1 M spans takes a few seconds to save, so this is generous without hanging forever
LOCK_TIMEOUT_S: Final = 120.0
#: how often a waiting writer retries the lock
_LOCK_POLL_S: Final = 0.05
#: paths under these folders are streams or kernel files: written into, never replaced
_STREAM_ROOTS: Final = ("/dev/", "/proc/")


def is_stream(path: Path) -> bool:
    """True for a FIFO, a device, a socket, or anything under /dev or /proc (``/dev/stdout``
    redirected to a file included: replacing that file would hide the output from the shell)."""
    text = os.path.abspath(path)
    if text.startswith(_STREAM_ROOTS):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(folder))
    except ValueError:
        return False
    return True


def check_outputs(
    inputs: Iterable[str | os.PathLike[str] | None],
    outputs: Iterable[str | os.PathLike[str] | None],
) -> None:
    """Refuse (ConfigError, exit 2) an output that is one of the inputs, an existing file
    inside an input folder, an existing folder, or the same file as another output.  ``None``
    entries (options not given) and URLs are ignored; streams (``-``, FIFOs, devices) too."""
    ins = [Path(p) for p in inputs if p is not None and "://" not in os.fspath(p)]
    seen: list[Path] = []
    for raw in outputs:
        if raw is None or os.fspath(raw) == "-":
            continue
        out = Path(raw)
        if is_stream(out):
            continue
        if out.is_dir():
            raise ConfigError(f"output {out} is a folder; give a file name")
        for src in ins:
            clash = _same_file(out, src) or (src.is_dir() and out.exists() and _inside(out, src))
            if clash or os.path.realpath(out) == os.path.realpath(src):
                raise ConfigError(
                    f"output {out} is the input {src}: refusing to overwrite it; "
                    "choose another output path"
                )
        for other in seen:
            if os.path.realpath(out) == os.path.realpath(other) or _same_file(out, other):
                raise ConfigError(f"output {out} is given twice ({other}); one file each")
        seen.append(out)


def check_output_folder(
    folder: str | os.PathLike[str] | None, inputs: Iterable[str | os.PathLike[str] | None]
) -> None:
    """Refuse (ConfigError) an output folder that is, contains or lies inside an input."""
    if folder is None:
        return
    out = Path(folder)
    for raw in inputs:
        if raw is None or "://" in os.fspath(raw):
            continue
        src = Path(raw)
        if not src.exists():
            continue
        if _same_file(out, src) or _inside(src, out) or (src.is_dir() and _inside(out, src)):
            raise ConfigError(
                f"output folder {out} overlaps the input {src}: its files could be replaced; "
                "choose another folder"
            )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output folder {out} is a file")


def ensure_folder(folder: str | os.PathLike[str]) -> Path:
    """``folder`` created with its parents when missing; OutputError (exit 3) when it cannot be."""
    p = Path(folder)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create folder ({_why(exc)})", path=str(p)) from None
    return p


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _target(path: Path) -> Path:
    """The file a write to ``path`` replaces: symlinks followed (a dangling one to its target)."""
    return Path(os.path.realpath(path))


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """An exclusive lock on ``target``'s hidden lock file for the time of a replacement.  The
    lock file is removed while still held, so none is left beside the output; a process that
    was waiting on the removed file finds it gone once it gets the lock, and locks anew."""
    lock = target.with_name(f".{target.name}.lock")
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(
                f"cannot create the lock file ({_why(exc)})", path=str(lock)
            ) from None
        try:
            _flock(fd, target, deadline)
            if _still_at(fd, lock):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # locked a file another process has removed since: lock the new one
    try:
        yield
    finally:
        _remove(lock)
        os.close(fd)  # releases the lock


def _flock(fd: int, target: Path, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise OutputError(
                    f"another process has been writing this file for {LOCK_TIMEOUT_S:.0f} s",
                    path=str(target),
                ) from None
            time.sleep(_LOCK_POLL_S)


def _still_at(fd: int, path: Path) -> bool:
    """The open ``fd`` is still the file at ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path, in the target's folder, to write the new file at; on a clean exit it
    is flushed and renamed over the target (under the lock), on an error removed.  Only for
    regular files: a stream target is OutputError (a DuckDB file cannot live in a FIFO)."""
    given = Path(path)
    if is_stream(given):
        raise OutputError("must be a regular file, not a device or a pipe", path=str(given))
    target = _target(given)
    ensure_folder(target.parent)
    with _locked(target):
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        _remove(tmp)
        try:
            yield tmp
            _fsync(tmp)
            # a stale write-ahead log next to the target would be replayed onto the new file
            _remove(target.with_name(target.name + ".wal"))
            os.replace(tmp, target)
            _fsync_folder(target.parent)
        except OSError as exc:
            raise OutputError(f"cannot write ({_why(exc)})", path=str(given)) from None
        finally:
            _remove(tmp)
            _remove(tmp.with_name(tmp.name + ".wal"))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path``: atomically for a regular file, into a stream otherwise."""
    given = Path(path)
    if is_stream(given):
        try:
            with open(given, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise OutputError(f"cannot write ({_why(exc)})", path=str(given)) from None
        return given
    with replacing(given) as tmp:
        try:
            tmp.write_bytes(data)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise OutputError("disk full", path=str(given)) from None
            raise
    return given


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8", errors="surrogateescape"))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be synced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
