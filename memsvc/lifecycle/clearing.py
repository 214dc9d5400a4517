"""Reset, RemoveSession, DeleteMessages and ReplaceMessages across every store, as one step each.

Owns the order of each (an intent record first, intents.py; the archive
next, which may refuse before anything changed; then the other derived
stores; history.json and the summary tier's files last; a replacement's new
messages told to the derived stores after that), completing an interrupted
one (at start, at the next such call on the session, or by the minute job),
which messages a DeleteMessages names (by ids, or the newest, from
history.json or the archive), and whether a ReplaceMessages still finds the
history its caller read. Must never write a store's files itself: each store
does that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack

import msgspec

from memsvc.core import failpoints, replies
from memsvc.core.config import Settings
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import FailedPrecondition, InvalidArgument, MemsvcError, NotFound, ResourceExhausted
from memsvc.core.reasons import Reason
from memsvc.core.records import MAX_ID, Record
from memsvc.lifecycle.intents import Action, Intent, Intents
from memsvc.window.appender import AppendResult, Prepared
from memsvc.window.derived import ArchiveOfRecord, DerivedStore
from memsvc.window.rewriter import Rewriter
from memsvc.window.session import Session
from memsvc.window.store import SessionStore

log = logging.getLogger(__name__)

SessionHold = Callable[[str, Deadline], AbstractContextManager[object]]
"Holds one session against another writer of its files for a block, waiting within a deadline (the summarizer's guard)."


class Deleted(msgspec.Struct):
    history_messages: int = 0
    archived_messages: int = 0
    vectors: int = 0
    summary: bool = False


class Deletion(msgspec.Struct):
    records: list[Record]
    "The deleted messages as they were stored, oldest first; the oldest `contents_omitted` without texts."
    deleted: Deleted
    contents_omitted: int = 0
    "How many of the oldest echoed records lost content and payload to keep the reply within max_reply_bytes."


class Replacement(msgspec.Struct):
    result: AppendResult
    "The new history as stored (or, replayed, as first stored)."
    deleted: Deleted


class Clearing:
    """Reset, RemoveSession, DeleteMessages and ReplaceMessages. `exclusive` are held by all but DeleteMessages
    so other writers of a session's files (the summarizer) wait for them. DeleteMessages does not hold them: it
    touches no file of theirs, and waiting out a summary run's LLM calls would outlast its callers'
    deadlines."""

    def __init__(self, settings: Settings, store: SessionStore, rewriter: Rewriter, intents: Intents,
                 archive: ArchiveOfRecord, derived: Sequence[DerivedStore], *,
                 exclusive: Sequence[SessionHold] = ()):
        self.settings = settings
        self.store = store
        self.rewriter = rewriter
        self.intents = intents
        self.archive = archive
        self.derived = tuple(derived)
        self.exclusive = tuple(exclusive)

    def reset(self, session_id: str, keep_summary: bool, deadline: Deadline = UNBOUNDED) -> Deleted:
        return self._clear(session_id, "reset" if keep_summary else "reset_all", deadline)

    def remove(self, session_id: str, deadline: Deadline = UNBOUNDED) -> Deleted:
        return self._clear(session_id, "remove", deadline)

    def _clear(self, session_id: str, action: Action, deadline: Deadline) -> Deleted:
        """Reset or remove a session in every store, as one step: an intent first, then each store. Every
        wait is bounded by `deadline`, which is checked once more right before the intent is recorded."""
        self.store.storage.check()
        self.archive.check_writable()  # refuse before anything changes, not half way
        self.finish_interrupted(session_id)
        self.store.require(session_id)
        with self._excluding(session_id, action, deadline), \
                self.store.writing(session_id, deadline=deadline) as session:
            if not session.directory.is_dir():  # removed while this call waited for the session
                raise NotFound(f"session {session_id!r} does not exist", reason=Reason.SESSION_NOT_FOUND)
            intent = Intent(session_id, action, session.next_id)
            deadline.check(f"{action.replace('_', ' ')} of session {session_id!r}")
            self.intents.begin(intent)
            deleted = self._apply(session, intent, fresh=True)
        log.info("reset" if action != "remove" else "removed session", extra={"session": session_id,
                                                                              "action": action})
        return deleted

    def delete_messages(self, session_id: str, ids: Sequence[int] = (), last: int = 0,
                        deadline: Deadline = UNBOUNDED) -> Deletion:
        """DeleteMessages: the messages with these ids, or the newest `last`, from every store as one step."""
        self._check_targets(ids, last)
        self.store.storage.check()
        self.archive.check_writable()
        self.finish_interrupted(session_id)
        self.store.require(session_id)
        with self.store.writing(session_id, deadline=deadline) as session:
            if not session.directory.is_dir():
                raise NotFound(f"session {session_id!r} does not exist", reason=Reason.SESSION_NOT_FOUND)
            records = self._newest(session, last) if last else self._stored(session, set(ids))
            if not records:
                return Deletion([], Deleted())
            intent = Intent(session_id, "delete", session.next_id, tuple(record.id for record in records))
            deadline.check(f"deleting messages of session {session_id!r}")
            self.intents.begin(intent)
            deleted = self._apply(session, intent, fresh=True)
        log.info("deleted messages", extra={"session": session_id, "messages": len(records)})
        echo, contents_omitted = replies.echoed(records, self.settings.max_reply_bytes)
        return Deletion(echo, deleted, contents_omitted)

    def replace(self, prepared: Prepared, expected_last_id: int | None = None,
                deadline: Deadline = UNBOUNDED) -> Replacement:
        """ReplaceMessages: the session's whole history becomes `prepared`'s records (prepared `replacing`), in
        every store as one step, the summary deleted; creates the session. With `expected_last_id`, only
        while that is the id of the session's newest message (0: it holds none)."""
        session_id, key = prepared.session_id, prepared.idempotency_key
        self.archive.check_writable()
        self.finish_interrupted(session_id)
        with self._excluding(session_id, "replace", deadline), \
                self.store.writing(session_id, deadline=deadline) as session:
            if key and key in session.replies:
                return Replacement(AppendResult(session.replies[key], replayed=True), Deleted())
            self._expect(session, expected_last_id)
            next_id = session.next_id
            if next_id + len(prepared.records) - 1 > MAX_ID:
                raise ResourceExhausted(f"session {session_id!r} has used every message id up to 2^63 - 1",
                                        reason=Reason.SESSION_IDS_EXHAUSTED)
            records = [msgspec.structs.replace(record, id=next_id + offset)
                       for offset, record in enumerate(prepared.records)]
            if not session.directory.is_dir():
                if not records:
                    return Replacement(AppendResult([], replayed=False), Deleted())
                self.store.create(session)
            intent = Intent(session_id, "replace", next_id, records=tuple(records))
            deadline.check(f"replacing the history of session {session_id!r}")
            self.intents.begin(intent)
            deleted = self._apply(session, intent, fresh=True)
        log.info("replaced history", extra={"session": session_id, "messages": len(records)})
        return Replacement(AppendResult(records, replayed=False), deleted)

    def _expect(self, session: Session, expected_last_id: int | None) -> None:
        """HISTORY_CHANGED unless the session's newest message is the one its caller read."""
        if expected_last_id is None:
            return
        last_id = session.records[-1].id if session.records else self._archived_last_id(session)
        if last_id != expected_last_id:
            raise FailedPrecondition(
                f"session {session.id!r}'s newest message is {last_id or 'none'}, not {expected_last_id or 'none'} "
                "as expected: another writer changed it; read it again", reason=Reason.HISTORY_CHANGED,
                metadata={"last_id": str(last_id)})

    def _archived_last_id(self, session: Session) -> int:
        """The newest message of a session whose history.json holds none: in the archive, or 0."""
        newest = self.archive.messages(session.id, 0, session.next_id, limit=1, newest_first=True)
        return newest[0].id if newest else 0

    def _check_targets(self, ids: Sequence[int], last: int) -> None:
        most = self.settings.max_messages_per_request
        if bool(ids) == bool(last):
            raise InvalidArgument("name the messages to delete by ids or by last, exactly one of the two",
                                  reason=Reason.DELETE_TARGET_AMBIGUOUS if ids else Reason.DELETE_TARGET_REQUIRED)
        if len(ids) > most or last > most:
            raise InvalidArgument(f"at most {most} messages in one DeleteMessages (max_messages_per_request)",
                                  reason=Reason.TOO_MANY_MESSAGES)

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
        step = {"delete": "delete", "replace": "replace"}.get(intent.action, "clear")
        try:
            failpoints.hit(f"lifecycle.{step}.intended")
            deleted = Deleted(archived_messages=self.archive.deleted(session.id, ids) if deleting
                              else self.archive.cleared(session.id))
        except FailedPrecondition:
            if not fresh:
                self.intents.failed(intent)
                raise
            # The archive goes first, and refused the clear without committing any of it (it is damaged):
            # no store has changed, so the operation is simply not done.
            self.intents.done(session.id)
            raise
        except BaseException:
            self.intents.failed(intent)
            raise
        try:
            for store in self.derived:
                if store is not self.archive:
                    deleted.vectors += store.deleted(session.id, ids) if deleting else store.cleared(session.id)
            failpoints.hit(f"lifecycle.{step}.derived")
            if deleting:
                deleted.history_messages = len(self.rewriter.drop(session, set(ids), intent.next_id))
            elif intent.action == "replace":
                records = list(intent.records)
                deleted.history_messages, deleted.summary = self.rewriter.replace(session, records, intent.next_id)
                failpoints.hit("lifecycle.replace.written")
                self._tell_replaced(session.id, records)
            elif intent.action == "remove":
                deleted.history_messages, deleted.summary = len(session.records), session.summary_path.exists()
                self.rewriter.remove(session)
            elif session.directory.is_dir():  # (one deleted from outside has nothing left to clear)
                deleted.history_messages, deleted.summary = self.rewriter.clear(
                    session, drop_summary=intent.action == "reset_all", next_id=intent.next_id)
            self.intents.done(session.id)
        except BaseException:
            self.intents.failed(intent)
            raise
        return deleted

    def _tell_replaced(self, session_id: str, records: list[Record]) -> None:
        """The new history is durable: the derived stores, cleared, learn of it as of an Append (those that
        miss it catch up from history.json when the session is next opened)."""
        try:
            for store in self.derived:
                store.appended(session_id, records)
        except Exception:
            log.exception("a derived store refused a replaced history", extra={"session_id": session_id})

    def finish_interrupted(self, session_id: str | None = None) -> int:
        """Complete the interrupted Resets, removals and deletions (of one session, or all); returns how
        many were completed. At start, by a job each minute, and before a new one of the session."""
        finished = 0
        for intent in self.intents.all_interrupted():
            if session_id is not None and intent.session_id != session_id:
                continue
            try:
                with self._excluding(intent.session_id, intent.action, UNBOUNDED), \
                        self.store.writing(intent.session_id, resuming=True) as session:
                    if self.intents.interrupted(intent.session_id) is not intent:
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

    def _excluding(self, session_id: str, action: Action, deadline: Deadline) -> ExitStack:
        with ExitStack() as stack:
            for hold in self.exclusive if action != "delete" else ():
                stack.enter_context(hold(session_id, deadline))
            return stack.pop_all()  # the caller's block releases them; a failure here releases those taken
