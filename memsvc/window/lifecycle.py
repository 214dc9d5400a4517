"""Compaction, reset, removal and deletion across every store, in the safe order.

Owns where history.json may be cut (only after an assistant message, never
between a tool call and its result), the rule that a message leaves
history.json only once the archive has committed it, auto compaction off
the Append path, Reset, RemoveSession and DeleteMessages as one step across
the stores (an intent record first, intents.py; an interrupted one is
completed at start, at the next Reset, RemoveSession or DeleteMessages of
the session, or by the minute job), which messages a DeleteMessages names,
and the cleanup of idle `temp-` sessions. Must never write a store's files
itself: each store does that.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack

import msgspec

from memsvc.core import failpoints
from memsvc.core.errors import FailedPrecondition, InvalidArgument, MemsvcError, NotFound
from memsvc.core.ids import TEMP_PREFIX
from memsvc.core.records import Record
from memsvc.core.units import NANOS_PER_SECOND
from memsvc.runtime import metrics
from memsvc.window import history
from memsvc.window.derived import ArchiveOfRecord
from memsvc.window.intents import Action, Intent
from memsvc.window.session import Session
from memsvc.window.sessions import Sessions

log = logging.getLogger(__name__)

AUTO_COMPACT_RATIO = 0.8
TEMP_IDLE_NS = 30 * 60 * NANOS_PER_SECOND
COMPACTIONS = metrics.counter("compactions_total", "Compactions that removed messages from history.json.",
                              ("trigger",))

SessionHold = Callable[[str], AbstractContextManager[object]]
"Holds one session against another writer of its files for a block (the summarizer's guard)."


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


class Deleted(msgspec.Struct):
    history_messages: int = 0
    archived_messages: int = 0
    vectors: int = 0
    summary: bool = False


class Deletion(msgspec.Struct):
    records: list[Record]
    "The deleted messages as they were stored, oldest first."
    deleted: Deleted


def _cuts_at(records: list[Record], cut: int) -> bool:
    """Right after an assistant message, and not between a tool call and its result."""
    return records[cut - 1].role == "assistant" and (cut == len(records) or records[cut].role != "tool")


def pair_boundary(records: list[Record], at_most: int) -> int:
    """The largest cut <= at_most that falls right after an assistant message (0 if none)."""
    for cut in range(min(at_most, len(records)), 0, -1):
        if _cuts_at(records, cut):
            return cut
    return 0


def cut_for_size(records: list[Record], target_bytes: int) -> int:
    """The smallest pair-boundary cut leaving the rendered history at most `target_bytes`."""
    sizes = [len(history.encode_line([record], first=False)) for record in records]
    remaining = len(history.EMPTY) + sum(sizes)
    needed = 0
    while needed < len(records) and remaining > target_bytes:
        remaining -= sizes[needed]
        needed += 1
    if needed == 0:
        return 0
    for cut in range(needed, len(records)):
        if cut and _cuts_at(records, cut):
            return cut
    return 0


class Lifecycle:
    """Compact, Reset, RemoveSession and DeleteMessages across every store, and the auto-compaction worker.

    `queue` is the CompactionQueue the sessions' on_oversize fills; `exclusive`
    are held by Reset and RemoveSession so other writers of a session's files
    (the summarizer) wait for them. DeleteMessages does not hold them: it
    touches no file of theirs, and waiting out a summary run's LLM calls
    would outlast its callers' deadlines.
    """

    def __init__(self, sessions: Sessions, archive: ArchiveOfRecord, queue: CompactionQueue, *,
                 exclusive: Sequence[SessionHold] = (), clock: Callable[[], int] = time.time_ns):
        self.sessions = sessions
        self.archive = archive
        self.queue = queue
        self.exclusive = tuple(exclusive)
        self.clock = clock
        self._worker = threading.Thread(target=self._compact_in_background, name="auto-compact", daemon=True)
        self._worker.start()

    # -- compaction ------------------------------------------------------------

    def compact(self, session_id: str) -> Compacted:
        """Manual Compact: keep the window, cut on a pair boundary."""
        self.sessions.storage.check()
        self.sessions.require(session_id)
        keep = self.sessions.settings.max_history_messages
        return self._compact(session_id, lambda session: pair_boundary(session.records, len(session.records) - keep),
                             "manual")

    def auto_compact(self, session_id: str) -> Compacted:
        """Trim an oversize history to at most 80% of max_history_bytes."""
        limit = self.sessions.settings.max_history_bytes

        def cut_for(session: Session) -> int:
            if session.size <= limit:
                return 0
            cut = cut_for_size(session.records, int(limit * AUTO_COMPACT_RATIO))
            if not cut:
                log.warning("history over its size limit has no pair boundary to cut at",
                            extra={"session": session_id, "bytes": session.size})
            return cut

        return self._compact(session_id, cut_for, "auto")

    def _compact(self, session_id: str, cut_for: Callable[[Session], int], trigger: str) -> Compacted:
        with self.sessions.writing(session_id) as session:
            if cut_for(session) <= 0:
                return Compacted(0, self._start_at(session))
            last_queued = session.records[-1].id
        # Nothing leaves history.json before the archive has committed it. The wait happens
        # outside the session lock: Appends to this session must not stall behind a commit.
        self.archive.flush()
        failpoints.hit("lifecycle.compact.flushed")
        with self.sessions.writing(session_id) as session:
            committed = bisect.bisect_right(session.records, last_queued, key=lambda record: record.id)
            cut = min(cut_for(session), pair_boundary(session.records, committed))
            if cut <= 0:
                return Compacted(0, self._start_at(session))
            removed = self.sessions.trim(session, cut)
            start_at = self._start_at(session)
            first_kept = session.records[0].id if session.records else session.next_id
            for store in self.sessions.derived:
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

    # -- reset and removal -----------------------------------------------------

    def reset(self, session_id: str, keep_summary: bool) -> Deleted:
        return self._clear(session_id, "reset" if keep_summary else "reset_all")

    def remove(self, session_id: str) -> Deleted:
        return self._clear(session_id, "remove")

    def _clear(self, session_id: str, action: Action) -> Deleted:
        """Reset or remove a session in every store, as one step: an intent first, then each store."""
        self.sessions.storage.check()
        self.archive.check_writable()  # refuse before anything changes, not half way
        self.finish_interrupted(session_id)
        self.sessions.require(session_id)
        with self._excluding(session_id, action), self.sessions.writing(session_id) as session:
            if not session.directory.is_dir():  # removed while this call waited for the session
                raise NotFound(f"session {session_id!r} does not exist", reason="SESSION_NOT_FOUND")
            intent = Intent(session_id, action, session.next_id)
            self.sessions.intents.begin(intent)
            deleted = self._apply(session, intent, fresh=True)
        log.info("reset" if action != "remove" else "removed session", extra={"session": session_id,
                                                                              "action": action})
        return deleted

    def delete_messages(self, session_id: str, ids: Sequence[int] = (), last: int = 0) -> Deletion:
        """DeleteMessages: the messages with these ids, or the newest `last`, from every store as one step."""
        self._check_targets(ids, last)
        self.sessions.storage.check()
        self.archive.check_writable()
        self.finish_interrupted(session_id)
        self.sessions.require(session_id)
        with self.sessions.writing(session_id) as session:
            if not session.directory.is_dir():
                raise NotFound(f"session {session_id!r} does not exist", reason="SESSION_NOT_FOUND")
            records = self._newest(session, last) if last else self._stored(session, set(ids))
            if not records:
                return Deletion([], Deleted())
            intent = Intent(session_id, "delete", session.next_id, tuple(record.id for record in records))
            self.sessions.intents.begin(intent)
            deleted = self._apply(session, intent, fresh=True)
        log.info("deleted messages", extra={"session": session_id, "messages": len(records)})
        return Deletion(records, deleted)

    def _check_targets(self, ids: Sequence[int], last: int) -> None:
        most = self.sessions.settings.max_messages_per_request
        if bool(ids) == bool(last):
            raise InvalidArgument("name the messages to delete by ids or by last, exactly one of the two",
                                  reason="DELETE_TARGET_AMBIGUOUS" if ids else "DELETE_TARGET_REQUIRED")
        if len(ids) > most or last > most:
            raise InvalidArgument(f"at most {most} messages in one DeleteMessages (max_messages_per_request)",
                                  reason="TOO_MANY_MESSAGES")

    def _newest(self, session: Session, last: int) -> list[Record]:
        """The newest `last` messages, from the archive too when history.json holds fewer."""
        recent = session.records[-last:]
        if len(recent) == last:
            return list(recent)
        cut = recent[0].id if recent else session.next_id
        return self.archive.messages(session.id, 0, cut, limit=last - len(recent), newest_first=True) + recent

    def _stored(self, session: Session, ids: set[int]) -> list[Record]:
        """The stored messages among `ids`: from history.json, else from the archive."""
        recent = [record for record in session.records if record.id in ids]
        rest = sorted(ids - {record.id for record in recent})
        archived = self.archive.stored(session.id, rest) if rest else []
        return sorted(archived + recent, key=lambda record: record.id)

    def _apply(self, session: Session, intent: Intent, fresh: bool = False) -> Deleted:
        """Do what `intent` says in every store, then forget it; the caller holds the session.

        `fresh`: the intent was just recorded, so no store has been touched for it yet.
        """
        deleting, ids = intent.action == "delete", list(intent.ids)
        step = "delete" if deleting else "clear"
        try:
            failpoints.hit(f"lifecycle.{step}.intended")
            deleted = Deleted(archived_messages=self.archive.deleted(session.id, ids) if deleting
                              else self.archive.cleared(session.id))
        except FailedPrecondition:
            if not fresh:
                self.sessions.intents.failed(intent)
                raise
            # The archive goes first, and refused the clear without committing any of it (it is damaged):
            # no store has changed, so the operation is simply not done.
            self.sessions.intents.done(session.id)
            raise
        except BaseException:
            self.sessions.intents.failed(intent)
            raise
        try:
            for store in self.sessions.derived:
                if store is not self.archive:
                    deleted.vectors += store.deleted(session.id, ids) if deleting else store.cleared(session.id)
            failpoints.hit(f"lifecycle.{step}.derived")
            if deleting:
                deleted.history_messages = len(self.sessions.drop(session, set(ids), intent.next_id))
            elif intent.action == "remove":
                deleted.history_messages, deleted.summary = len(session.records), session.summary_path.exists()
                self.sessions.remove(session)
            elif session.directory.is_dir():  # (one deleted from outside has nothing left to clear)
                deleted.history_messages, deleted.summary = self.sessions.clear(
                    session, drop_summary=intent.action == "reset_all", next_id=intent.next_id)
            self.sessions.intents.done(session.id)
        except BaseException:
            self.sessions.intents.failed(intent)
            raise
        return deleted

    def finish_interrupted(self, session_id: str | None = None) -> int:
        """Complete the interrupted Resets, removals and deletions (of one session, or all); returns how
        many were completed. At start, by a job each minute, and before a new one of the session."""
        finished = 0
        for intent in self.sessions.intents.all_interrupted():
            if session_id is not None and intent.session_id != session_id:
                continue
            try:
                with self._excluding(intent.session_id, intent.action), \
                        self.sessions.writing(intent.session_id, resuming=True) as session:
                    if self.sessions.intents.interrupted(intent.session_id) is not intent:
                        continue  # completed meanwhile
                    self._apply(session, intent)
            except Exception as exc:
                if session_id is not None:
                    raise
                log.error("interrupted reset, removal or deletion still cannot be completed; retried in a minute",
                          exc_info=not isinstance(exc, MemsvcError), extra={
                              "session": intent.session_id, "action": intent.action,
                              "reason": getattr(exc, "reason", type(exc).__name__)})
                continue
            finished += 1
            log.info("completed an interrupted reset, removal or deletion", extra={
                "session": intent.session_id, "action": intent.action})
        return finished

    def _excluding(self, session_id: str, action: Action) -> ExitStack:
        stack = ExitStack()
        for hold in self.exclusive if action != "delete" else ():
            stack.enter_context(hold(session_id))
        return stack

    def remove_idle_temporary(self) -> list[str]:
        """Remove `temp-` sessions idle for 30 minutes, from every store."""
        if self.sessions.storage.missing() is not None:
            return []  # the data directory is gone: health says so, once; there is nothing to clean
        idle_since = self.clock() - TEMP_IDLE_NS
        removed = []
        for session_id, last_write in self.sessions.last_writes(prefix=TEMP_PREFIX):
            if last_write < idle_since:
                try:
                    self.remove(session_id)
                except NotFound:
                    continue  # removed meanwhile
                removed.append(session_id)
        return removed
