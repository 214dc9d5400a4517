"""Durability primitives, written once: atomic replace, in-place append,
exclusive creation, publishing a file another library wrote, directory
fsync, writes that are durable in one call and writes left for a later sync
(a redo log, window/journal.py, covers them), durable removal, the
data-directory lock, and noticing that the data directory was deleted or
replaced under a running server.

Every sync goes through `_sync`, where the failure point `durable.fsync`
can make it slow (`delay:2ms` shows a network volume on a fast disk).

Every file memsvc itself writes goes through here (SQLite and Tantivy make
their own files durable), so "acknowledged means on disk" has one
implementation. Must never know what the bytes mean.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from memsvc.core import failpoints
from memsvc.core.errors import InvalidSetting, Unavailable
from memsvc.core.reasons import Reason


def _sync(fd: int, data_only: bool = False) -> None:
    failpoints.hit("durable.fsync")
    if data_only:
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _sync(fd)
    finally:
        os.close(fd)


def sync_file(path: Path) -> bool:
    """Make what was written to `path` durable; False when it no longer exists."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        _sync(fd, data_only=True)
    finally:
        os.close(fd)
    return True


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: temp file, fsync, rename, fsync the directory.

    A crash leaves either the old file or the new one, never a mix.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    _write_synced(tmp, os.O_TRUNC, data)
    failpoints.hit("durable.atomic_write.synced")
    os.replace(tmp, path)
    failpoints.hit("durable.atomic_write.renamed")
    fsync_dir(path.parent)


def append_file(path: Path, data: bytes) -> None:
    """Add `data` at the end of `path` (created if missing) and make it durable."""
    created = not path.exists()
    _write_synced(path, os.O_APPEND, data)
    if created:
        fsync_dir(path.parent)


def create_new(path: Path, data: bytes) -> None:
    """Create `path` holding `data`, durably; FileExistsError if it is already there.

    For a file's first version: a crash can only leave it torn and new, never
    a replaced old one.
    """
    _write_synced(path, os.O_EXCL, data)
    fsync_dir(path.parent)


def publish(temporary: Path, final: Path) -> None:
    """Make a file another library wrote under a temp name durable, then give it its name."""
    fd = os.open(temporary, os.O_RDONLY)
    try:
        _sync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, final)
    fsync_dir(final.parent)


def _write_synced(path: Path, mode: int, data: bytes) -> None:
    """Open `path` with `mode` (O_TRUNC, O_APPEND or O_EXCL), write all of `data`, fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        _sync(fd)
    finally:
        os.close(fd)


def write_at(fd: int, offset: int, data: bytes) -> None:
    """Write `data` at `offset` and make it durable before returning."""
    failpoints.hit("durable.write_at.start")
    write_unsynced(fd, offset, data)
    failpoints.hit("durable.write_at.written")
    _sync(fd, data_only=True)
    failpoints.hit("durable.write_at.synced")


def write_unsynced(fd: int, offset: int, data: bytes) -> None:
    """Write `data` at `offset`, for a sync later: only where a redo log holds the same bytes durably."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


_DSYNC = getattr(os, "RWF_DSYNC", None)


def write_synced(fd: int, offset: int, data: bytes) -> None:
    """`write_at` in one system call where the kernel can (RWF_DSYNC): over blocks already written,
    it syncs the data and no metadata, the cheapest durable write there is."""
    if _DSYNC is None or len(data) > 1 << 20:
        write_at(fd, offset, data)
        return
    failpoints.hit("durable.fsync")
    written = os.pwritev(fd, [data], offset, _DSYNC)
    if written < len(data):  # a short write: finish it, then sync the whole
        write_at(fd, offset + written, data[written:])


def truncate(fd: int, size: int) -> None:
    os.ftruncate(fd, size)
    _sync(fd)


def truncate_file(path: Path, size: int) -> None:
    """Cut `path` to `size` bytes, durably (a torn last record off an append-only file)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        truncate(fd, size)
    finally:
        os.close(fd)


def make_dir(path: Path) -> None:
    """Create `path` if missing, durably, in a parent that must exist: never recreates a deleted data root."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        return
    fsync_dir(path.parent)


def ensure_dir(path: Path) -> None:
    """Create `path` (and parents) so that the new entries survive a crash."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
        fsync_dir(directory.parent)


def remove_tree(path: Path) -> None:
    """Delete a directory so that it stays deleted after a crash.

    Renamed aside first: a crash mid-delete leaves a `.deleting-*` directory
    that `sweep_deleted` finishes, never a half-empty live one.
    """
    if not path.exists():
        return
    doomed = path.with_name(f".deleting-{path.name}")
    if doomed.exists():
        shutil.rmtree(doomed)
    os.replace(path, doomed)
    fsync_dir(path.parent)
    shutil.rmtree(doomed)


def remove_file(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True


def sweep_deleted(parent: Path) -> None:
    """Finish deletions a crash interrupted."""
    if parent.is_dir():
        for leftover in parent.glob(".deleting-*"):
            shutil.rmtree(leftover, ignore_errors=True)


class DirectoryLock:
    """An exclusive lock on the data directory, held for the server's life.

    A second server on the same data would share its TCP port and steal its
    unix socket, so it must fail to start instead.
    """

    def __init__(self, data_dir: Path):
        self.path = data_dir / ".lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        ensure_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise InvalidSetting(
                f"data directory {self.path.parent} is in use by memsvc pid {holder}; "
                "stop that server or choose another --data-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class DataPaths:
    """Directories and files as this server found them, checked before writes.

    Deleted or replaced under a running server, writes would go to unlinked
    files (acknowledged, then gone at the next start) or into an empty tree
    created anew; `check` refuses them instead. A check is one stat per path.
    """

    def __init__(self, paths: Sequence[Path]):
        self._found = {path: _identity(path) for path in paths}

    def missing(self) -> Path | None:
        """The first path deleted or replaced since the server found it, or None."""
        for path, identity in self._found.items():
            try:
                if _identity(path) != identity:
                    return path
            except OSError:
                return path
        return None

    def check(self) -> None:
        """Raise UNAVAILABLE `DATA_DIR_MISSING` if a path was deleted or replaced."""
        missing = self.missing()
        if missing is not None:
            raise Unavailable(f"{missing} was deleted or replaced while memsvc was running, so nothing can be "
                              "stored: restore it and restart memsvc (or restart it on an empty data directory)",
                              reason=Reason.DATA_DIR_MISSING)


def _identity(path: Path) -> tuple[int, int]:
    found = os.stat(path)
    return found.st_dev, found.st_ino
