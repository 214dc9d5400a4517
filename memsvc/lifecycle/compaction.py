"""Compaction: older messages leave history.json, once the archive has committed them.

Owns manual Compact (keep the window) and auto compaction (an Append left
history.json over max_history_bytes: trim it to 80% of that, on its own
thread, off the Append path), the order that keeps every message somewhere
(the archive commits before the cut, the cut happens under the session's
lock, the derived stores hear of it before the lock is released), and the
queue Appends fill. Must never decide where a history may be cut (cuts.py)
nor write a file itself (the rewriter does).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Sequence

import msgspec

from memsvc.core import failpoints
from memsvc.core.config import Settings
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import MemsvcError
from memsvc.lifecycle.cuts import AUTO_COMPACT_RATIO, cut_for_size, pair_boundary
from memsvc.runtime import metrics
from memsvc.window.derived import ArchiveOfRecord, DerivedStore
from memsvc.window.rewriter import Rewriter
from memsvc.window.session import Session
from memsvc.window.store import SessionStore

log = logging.getLogger(__name__)

FLUSH_SECONDS = 5.0
"How long a compaction waits for the archive to commit what it cuts (less when its caller's deadline is nearer)."

COMPACTIONS = metrics.counter("compactions_total", "Compactions that removed messages from history.json.",
                              ("trigger",))


class CompactionQueue:
    """Sessions waiting for auto compaction: Appends add to it, Lifecycle's worker drains it."""

    def __init__(self) -> None:
        self._pending: set[str] = set()
        self._wake = threading.Condition()
        self._closed = False

    def request(self, session_id: str) -> None:
        with self._wake:
            self._pending.add(session_id)
            self._wake.notify()

    def take(self) -> str | None:
        """The next session to compact, waiting for one; None once closed and drained."""
        with self._wake:
            self._wake.wait_for(lambda: self._pending or self._closed)
            return self._pending.pop() if self._pending else None

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()


class Compacted(msgspec.Struct):
    removed: int
    start_at: int
    "UTC Unix nanoseconds: send time of the first message left in history.json (0 when none)."


class Compaction:
    """Compact and auto compaction; `queue` is the CompactionQueue the Appender's on_oversize fills, drained
    by this object's worker thread."""

    def __init__(self, settings: Settings, store: SessionStore, rewriter: Rewriter, archive: ArchiveOfRecord,
                 derived: Sequence[DerivedStore], queue: CompactionQueue):
        self.settings = settings
        self.store = store
        self.rewriter = rewriter
        self.archive = archive
        self.derived = tuple(derived)
        self.queue = queue
        self._worker = threading.Thread(target=self._compact_in_background, name="auto-compact", daemon=True)
        self._worker.start()

    def compact(self, session_id: str, deadline: Deadline = UNBOUNDED) -> Compacted:
        """Manual Compact: keep the window, cut on a pair boundary; every wait within `deadline`."""
        self.store.storage.check()
        self.store.require(session_id)
        keep = self.settings.max_history_messages
        return self._compact(session_id, lambda session: pair_boundary(session.records, len(session.records) - keep),
                             "manual", deadline)

    def auto_compact(self, session_id: str) -> Compacted:
        """Trim an oversize history to at most 80% of max_history_bytes."""
        limit = self.settings.max_history_bytes

        def cut_for(session: Session) -> int:
            if session.size <= limit:
                return 0
            cut = cut_for_size(session.records, int(limit * AUTO_COMPACT_RATIO))
            if not cut:
                log.warning("history over its size limit has no pair boundary to cut at",
                            extra={"session": session_id, "bytes": session.size})
            return cut

        return self._compact(session_id, cut_for, "auto", UNBOUNDED)

    def _compact(self, session_id: str, cut_for: Callable[[Session], int], trigger: str,
                 deadline: Deadline) -> Compacted:
        with self.store.writing(session_id, deadline=deadline) as session:
            if cut_for(session) <= 0:
                return Compacted(0, self._start_at(session))
            last_queued = session.records[-1].id
        # Nothing leaves history.json before the archive has committed it. The wait happens
        # outside the session lock: Appends to this session must not stall behind a commit.
        left = deadline.left()
        self.archive.flush(FLUSH_SECONDS if left is None else min(left, FLUSH_SECONDS))
        self.archive.check_writable(session_id)  # whatever it could not store must stay in history.json
        failpoints.hit("lifecycle.compact.flushed")
        with self.store.writing(session_id, deadline=deadline) as session:
            committed = bisect.bisect_right(session.records, last_queued, key=lambda record: record.id)
            cut = min(cut_for(session), pair_boundary(session.records, committed))
            if cut <= 0:
                return Compacted(0, self._start_at(session))
            deadline.check(f"compacting session {session_id!r}")
            removed = self.rewriter.trim(session, cut)
            start_at = self._start_at(session)
            first_kept = session.records[0].id if session.records else session.next_id
            for store in self.derived:
                store.compacted(session.id, first_kept, start_at)
        COMPACTIONS.labels(trigger).inc()
        log.info("compacted", extra={"session": session_id, "removed": len(removed), "bytes": session.size})
        return Compacted(len(removed), start_at)

    def _start_at(self, session: Session) -> int:
        return session.records[0].send_at if session.records else self.archive.start_at(session.id)

    def _compact_in_background(self) -> None:
        while (session_id := self.queue.take()) is not None:
            try:
                self.auto_compact(session_id)
            except MemsvcError as exc:
                log.error("auto compaction failed; retried at the next append", extra={
                    "session": session_id, "reason": exc.reason})
            except Exception:  # this worker must outlive any one session's failure
                log.exception("auto compaction failed; retried at the next append", extra={"session": session_id})

    def close(self, timeout: float | None = None) -> None:
        """Stop the auto-compaction worker after the compaction in flight (waiting at most `timeout`)."""
        self.queue.close()
        self._worker.join(timeout)
