"""The shared redo log of history.json appends: one sync for the Appends of every session at once.

An Append writes its line into history.json without syncing it, hands the same
bytes (file, offset, data) to the journal, and is acknowledged once the journal
holds them on disk. One thread writes every frame waiting at that moment in one
durable write (group commit): concurrent Appends, of one session or of many,
share one sync, so a slow volume bounds how often the journal syncs, not how
many Appends each sync carries; while they arrive together (its last write
carried several) it waits a moment (GATHER_SECONDS) for as many again. At start, `replay` writes every frame again at
its place (the same bytes at the same offset: repeating it is harmless) and
syncs those files, so an acknowledged Append survives the loss of the page
cache (a power cut, a pod's node dying), not only a kill.

Frames of a file hold only while the file is the one they were written to:
before anything rewrites or deletes a history (compaction, Reset, removal),
`settle` syncs it and logs a barrier, and replay skips that file's frames
before its last barrier. When the journal is full, a checkpoint syncs every
history written since the last one and starts the journal over: a header with
a higher sequence number, after which the old frames no longer count.

Layout of the file (`<data_dir>/.journal`): frames `<length u32><crc32 u32><seq u64><payload>`,
the first a header; a frame counts while the sequence numbers follow on and the
checksums hold. The file grows in zero-filled steps and is overwritten in
place, so a durable write syncs data blocks and no metadata. Must never decide
what an Append stores (window/appender.py) nor know history.json's layout (window/history.py).
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from memsvc.core import durable, failpoints
from memsvc.core.errors import Unavailable
from memsvc.core.reasons import Reason
from memsvc.runtime import tracing

log = logging.getLogger(__name__)

CAPACITY = 8 << 20
"Bytes of frames after which a checkpoint starts the journal over."
GROWTH = 1 << 20
"The file grows by this many zero bytes at a time (written once, then overwritten in place)."
MAX_FRAME = 1 << 20
"Larger writes do not go through the journal: the caller settles the file and syncs it in place."
QUICK_SYNC_SECONDS = 0.0005
"Batches written faster than this on average may be written by the Appends' own thread (`quick`)."
GATHER_SECONDS = 0.0015
"""While Appends arrive together (the last batch carried several), how long the journal's thread waits
for as many before it writes: a sync's kernel time is much of an Append's CPU, so each sync should carry
as many as it can (16 clients here: ~20% more Appends/s; a lone client is never made to wait)."""
BARRIER = -1
"The offset of a barrier frame: the file's earlier frames no longer apply."
_HEAD = struct.Struct("<IIQ")
_SEQUENCE = struct.Struct("<Q")
_MAGIC = b"memsvc-journal-2"
"Frames name files relative to the data directory."
_MAGIC_V1 = b"memsvc-journal-1"
"Frames name files relative to the sessions directory (before tenants could have sessions elsewhere)."
_V1_ROOT = "sessions"

Done = Callable[[BaseException | None], None]
"Called on the journal's thread once a frame is durable (None) or could not be made so (the error)."


class _Frame(msgspec.Struct, array_like=True):
    path: str
    "Relative to the journal's directory."
    offset: int
    data: bytes


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(_Frame).decode


def _checksum(sequence: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(_SEQUENCE.pack(sequence)))


def _framed(sequence: int, payload: bytes) -> bytes:
    return _HEAD.pack(len(payload), _checksum(sequence, payload), sequence) + payload


def _frames(data: bytes) -> Iterator[tuple[int, _Frame]]:
    """(sequence, frame) of every frame that counts: after a header, in sequence, checksums holding; a
    version 1 journal's paths are made relative to the data directory."""
    at, expected, prefix = 0, None, ""
    while at + _HEAD.size <= len(data):
        length, checksum, sequence = _HEAD.unpack_from(data, at)
        body = data[at + _HEAD.size:at + _HEAD.size + length]
        if not length or len(body) < length or checksum != _checksum(sequence, body):
            return
        if expected is None:
            if body not in (_MAGIC, _MAGIC_V1):
                return
            prefix = f"{_V1_ROOT}/" if body == _MAGIC_V1 else ""
        elif sequence != expected:
            return
        else:
            try:
                frame = _decode(body)
            except msgspec.DecodeError:
                return
            yield sequence, msgspec.structs.replace(frame, path=prefix + frame.path) if prefix else frame
        expected = sequence + 1
        at += _HEAD.size + length


class Journal:
    """Opening it replays what a crash left; then `submit` and `settle` until `close`."""

    def __init__(self, path: Path, root: Path, capacity: int = CAPACITY, gather_seconds: float = GATHER_SECONDS):
        """The journal file at `path`, of files named relative to `root` (the data directory)."""
        self.root = root
        self._root_prefix = f"{root}/"
        self.path = path
        self.capacity = capacity
        self.gather_seconds = gather_seconds
        self._wake = threading.Condition()
        self._waiting: list[tuple[bytes, str, Done]] = []
        self._gathering = 1
        "How many frames the journal's thread waits for (the size of the last batch), up to gather_seconds."
        self._closing = False
        self._writing = threading.Lock()
        "Held while a batch is written and completed, by the journal's thread or a caller of write_waiting."
        self._sync_seconds = 0.0
        "A moving average of how long a batch's write takes."
        self._dirty: set[str] = set()
        "Files written since the last checkpoint."
        self._traces = tracing.Gathered("journal.sync")
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if created:
            durable.fsync_dir(path.parent)
        self._length = os.fstat(self._fd).st_size
        self._sequence = self._replay()
        self._position = 0
        self._start_over()
        self._thread = threading.Thread(target=self._run, name="journal", daemon=True)
        self._thread.start()

    # -- recovery ----------------------------------------------------------------

    def _replay(self) -> int:
        """Write every frame that counts again at its place and sync those files; returns the last sequence."""
        data = os.pread(self._fd, self._length, 0)
        latest: dict[str, list[_Frame]] = {}
        last = 0
        for sequence, frame in _frames(data):
            last = sequence
            if frame.offset == BARRIER:
                latest[frame.path] = []
            else:
                latest.setdefault(frame.path, []).append(frame)
        restored = 0
        for relative, writes in latest.items():
            target = self.root / relative
            if not writes or not target.parent.is_dir():  # removed since: its removal settled it first
                continue
            fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                for write in writes:
                    durable.write_unsynced(fd, write.offset, write.data)
                # What lies past the last acknowledged write is a refused or unacknowledged one.
                durable.truncate(fd, writes[-1].offset + len(writes[-1].data))
            finally:
                os.close(fd)
            durable.fsync_dir(target.parent)
            restored += 1
        if restored:
            log.info("journal replayed", extra={"files": restored})
        # Past any frame a failed write may have left in this file.
        return last + self.capacity

    def name_of(self, path: Path) -> str:
        """How the journal names the file at `path` (under its root) in its frames."""
        # On every Append: slicing the string first, as Path.relative_to parses both paths again each time.
        text = str(path)
        if text.startswith(self._root_prefix):
            return text[len(self._root_prefix):]
        return path.relative_to(self.root).as_posix()

    # -- writing -------------------------------------------------------------------

    def submit(self, relative: str, offset: int, data: bytes, done: Done, here: bool = False) -> None:
        """Log that `data` was written at `offset` in the file at `relative`; `done` follows. `here`:
        the caller runs `write_waiting` soon, on its own thread (see `quick`), instead of waking the journal's."""
        payload = _encode(_Frame(relative, offset, data))
        done = tracing.carried(done)  # the Append's completion runs in its call's trace, whichever thread syncs
        with self._wake:
            if self._closing:
                raise Unavailable("the server is shutting down; retry on the next one", reason=Reason.SHUTTING_DOWN)
            self._waiting.append((payload, relative, done))
            self._traces.note(done)
            if not here and (len(self._waiting) == 1 or len(self._waiting) >= self._gathering):
                self._wake.notify()

    @property
    def quick(self) -> bool:
        """Syncs take well under a millisecond: a caller can write its frames itself, sparing two thread
        hops; a slow disk's syncs are better left to the journal's thread, which gathers while it waits."""
        return self._sync_seconds < QUICK_SYNC_SECONDS

    def write_waiting(self) -> None:
        """Write the frames waiting now, on this thread, unless the journal's thread is writing (then it
        takes them next)."""
        if not self._writing.acquire(blocking=False):
            return
        try:
            with self._wake:
                batch, self._waiting = self._waiting, []
            if batch:
                self._write_and_complete(batch)
        finally:
            self._writing.release()

    def settle(self, relative: str) -> None:
        """Before the file at `relative` is rewritten or deleted: make it durable as it is and log a
        barrier, so that replay never writes its older frames into what replaces it."""
        durable.sync_file(self.root / relative)
        settled = threading.Event()
        outcome: list[BaseException | None] = []

        def done(error: BaseException | None) -> None:
            outcome.append(error)
            settled.set()

        self.submit(relative, BARRIER, b"", done)
        settled.wait()
        if outcome[0] is not None:
            raise outcome[0]

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._waiting or self._closing)
                if not self._waiting:
                    return
                if self._gathering > 1:
                    self._wake.wait_for(lambda: len(self._waiting) >= self._gathering or self._closing,
                                        self.gather_seconds)
            with self._writing:
                with self._wake:
                    batch, self._waiting = self._waiting, []
                if batch:
                    self._write_and_complete(batch)

    def _write_and_complete(self, batch: list[tuple[bytes, str, Done]]) -> None:
        self._gathering = len(batch)
        error: BaseException | None = None
        started = time.perf_counter()
        try:
            with self._traces.span(*(done for _, _, done in batch), frames=len(batch)):
                self._write(batch)
        except OSError as exc:
            error = exc
        except Exception as exc:  # never die: the Appends waiting get an error, the next batch a try
            log.exception("journal write failed")
            error = OSError(errno.EIO, f"the journal could not be written ({type(exc).__name__}: {exc})")
        self._sync_seconds += (time.perf_counter() - started - self._sync_seconds) / 8
        for _, _, done in batch:
            try:
                done(error)
            except Exception:
                log.exception("completing an Append failed")

    def _write(self, batch: list[tuple[bytes, str, Done]]) -> None:
        size = sum(_HEAD.size + len(payload) for payload, _, _ in batch)
        if self._position + size > self.capacity:
            self._checkpoint()
        sequence = self._sequence
        frames = []
        for payload, _, _ in batch:
            sequence += 1
            frames.append(_framed(sequence, payload))
        data = b"".join(frames)
        self._grow(self._position + len(data))
        try:
            failpoints.hit("journal.write")
            durable.write_synced(self._fd, self._position, data)
            failpoints.hit("journal.synced")
        except OSError:
            try:  # frames that may be on disk although their Appends are refused: the next batch overwrites them
                durable.write_synced(self._fd, self._position, bytes(len(data)))
            except OSError:
                pass
            raise
        self._position += len(data)
        self._sequence = sequence
        self._dirty.update(relative for _, relative, _ in batch)

    def _grow(self, needed: int) -> None:
        while self._length < needed:
            durable.write_at(self._fd, self._length, bytes(GROWTH))
            self._length += GROWTH

    def _checkpoint(self) -> None:
        """Make every file written since the last checkpoint durable, then start the journal over."""
        for relative in sorted(self._dirty):
            durable.sync_file(self.root / relative)
        failpoints.hit("journal.checkpoint")
        self._dirty.clear()
        self._sequence += self.capacity
        self._start_over()

    def _start_over(self) -> None:
        self._sequence += 1
        header = _framed(self._sequence, _MAGIC)
        self._grow(len(header))
        durable.write_synced(self._fd, 0, header)
        self._position = len(header)

    def close(self, timeout: float = 5.0) -> None:
        """Refuse new frames, write those waiting, checkpoint, and release the file."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("journal still writing at shutdown; what it holds is replayed at the next start")
            return
        try:
            self._checkpoint()
        except OSError as exc:
            log.error("journal checkpoint at shutdown failed; it is replayed at the next start",
                      extra={"error": str(exc)})
        os.close(self._fd)
