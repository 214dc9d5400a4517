"""The append path: an Append checked, given ids, written, made durable by the journal, then published.

Owns id assignment, idempotency (a retried key gets its first result back),
where an Append runs (`submit`: a small one to a session already open is
checked and written on the event loop, a lone one on a quick disk even synced
there; anything that could wait goes to a worker thread), and the order of an
Append: checked and made into records before any lock (`prepare`), written
into history.json unsynced under the session's lock, durable once the
journal holds the same bytes, and only then acknowledged, published to
readers and told to the derived stores, under the lock still so that no
Reset or Compact overtakes the news. The session's lock passes from the
Append that took it to exactly one release: `_begin`'s, when the Append ends
on the caller's thread (replayed, refused, or too large for the journal and
synced in place), or `_complete`'s, on the thread that synced its frame.
What an Append may carry is incoming.py's. Must never rewrite or remove
what history.json already holds (rewriter.py does), nor wait for a derived
store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

import msgspec

from memsvc.core.config import Settings
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import FailedPrecondition, InvalidArgument, ResourceExhausted, storage_error
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.core.records import MAX_ID, Record
from memsvc.journal import journal
from memsvc.runtime.futures import settled_here
from memsvc.window import history, legacy
from memsvc.window.derived import DerivedStore, EmbeddingSink
from memsvc.window.incoming import NewMessage, check_append
from memsvc.window.session import Session
from memsvc.window.store import SessionStore

log = logging.getLogger(__name__)

QUICK_APPEND_MESSAGES = 8
"Appends of up to this many messages are converted and checked on the event loop (a few microseconds each)."


class AppendResult(msgspec.Struct):
    records: list[Record]
    replayed: bool


class Prepared(msgspec.Struct):
    """An Append checked and made into records, not yet stored."""

    session_id: str
    records: list[Record]
    idempotency_key: str
    embeddings: list[list[float]] | None
    "Client-supplied embeddings, one per record (empty where absent); None when the Append carried none."


class ByteQuota(Protocol):
    """The bytes a tenant may still store (tenancy/usage.py)."""

    def refuse(self, records: Sequence[Record], pending: int = 0) -> int:
        """Raise RESOURCE_EXHAUSTED when storing `records`, after `pending` bytes of the same call not stored
        yet, would pass the quota; else the bytes they count for."""

    def added(self, records: Sequence[Record]) -> None:
        """`records` were stored."""

    def grew(self, size: int) -> None:
        """`size` bytes, counted by `refuse`, were stored."""


class Appender:
    """Appends to the sessions of `store`. `embeddings` takes vectors clients supply (None: refuse them);
    `derived` stores hear of every Append; `on_oversize(session_id)` is called after an Append leaves
    history.json over max_history_bytes (it must return at once: compaction happens elsewhere)."""

    def __init__(self, settings: Settings, store: SessionStore, *, derived: Sequence[DerivedStore],
                 embeddings: EmbeddingSink | None, on_oversize: Callable[[str], None], quota: ByteQuota | None = None,
                 clock: Callable[[], int] = time.time_ns):
        self.settings = settings
        self.quota = quota
        self.store = store
        self.journal = store.journal
        self.derived = tuple(derived)
        self.embeddings = embeddings
        self.on_oversize = on_oversize
        self.clock = clock
        self._journal_write_due = False
        "A write of the journal's waiting frames is scheduled on the event loop."
        self._on_loop = 0
        "Appends the event loop awaits (only the loop changes it)."

    # -- from the event loop ---------------------------------------------------------------------------------

    async def submit(self, session_id: str, messages: Callable[[], list[NewMessage]], count: int,
                     idempotency_key: str = "", deadline: Deadline = UNBOUNDED) -> AppendResult:
        """An Append from the event loop, `count` messages that `messages()` makes (the transport's
        conversion, which runs where the Append runs). In memory and free, the session is written from
        the loop: a lone Append on a quick disk syncs the journal there too (no thread hop either way);
        while others are in flight, or on a slow disk, the journal's thread does, gathering Appends into
        each sync. Anything that could wait (a large Append, a session to open or make, a busy writer)
        runs on a worker thread."""
        if count > QUICK_APPEND_MESSAGES:  # converting and checking them would stall every other call
            return await asyncio.to_thread(lambda: self.append(session_id, messages(), idempotency_key, deadline))
        prepared = self.prepare(session_id, messages(), idempotency_key)
        here = self.journal.quick and not self._on_loop
        started = self.append_nowait(prepared, write_here=here)
        if started is not None and here and not self._journal_write_due:
            self._journal_write_due = True
            asyncio.get_running_loop().call_soon(self._write_journal)
        self._on_loop += 1
        try:
            return await (settled_here(started) if started is not None
                          else asyncio.to_thread(self.append_prepared, prepared, deadline))
        finally:
            self._on_loop -= 1

    def _write_journal(self) -> None:
        self._journal_write_due = False
        self.journal.write_waiting()

    # -- from any thread -------------------------------------------------------------------------------------

    def append(self, session_id: str, messages: list[NewMessage], idempotency_key: str = "",
               deadline: Deadline = UNBOUNDED) -> AppendResult:
        """Store `messages` durably at the end of the session, then tell the derived stores."""
        return self.append_prepared(self.prepare(session_id, messages, idempotency_key), deadline)

    def prepare(self, session_id: str, messages: list[NewMessage], idempotency_key: str = "", *,
                replacing: bool = False) -> Prepared:
        """Check an Append (or, `replacing`, a ReplaceMessages' new history: maybe empty, without
        embeddings) and make its records, before any lock; raises for what is wrong with it."""
        check_session_id(session_id)
        check_append(messages, idempotency_key, self.settings, at_least_one=not replacing)
        embeddings = [message.embedding for message in messages]
        supplied = any(embeddings)
        if supplied and replacing:
            # A replacement a kill interrupted is completed from its intent, which keeps records, not vectors.
            raise InvalidArgument("ReplaceMessages takes no client-supplied embeddings",
                                  reason=Reason.EMBEDDINGS_IN_REPLACE)
        if supplied:
            if self.embeddings is None:
                raise FailedPrecondition("this server takes no client-supplied embeddings",
                                         reason=Reason.EMBEDDINGS_NOT_ACCEPTED)
            self.embeddings.check(session_id, embeddings)
        records = [self._record(message, idempotency_key) for message in messages]
        if self.quota is not None:
            self.quota.refuse(records)
        self.store.storage.check()
        return Prepared(session_id, records, idempotency_key, embeddings if supplied else None)

    def append_prepared(self, prepared: Prepared, deadline: Deadline = UNBOUNDED) -> AppendResult:
        """Store a prepared Append, waiting within `deadline` for whatever it needs (the session's lock, its
        directory); never stored once the caller stopped waiting."""
        session = self.store.locked(prepared.session_id, deadline=deadline)
        started = self._begin(session, prepared, may_wait=True, deadline=deadline)
        assert started is not None
        return started.result()

    def append_nowait(self, prepared: Prepared, write_here: bool = False) -> Future[AppendResult] | None:
        """Start a prepared Append blocking on nothing but memory: its result, set once durable; or
        None when it would have to wait (the session not in memory, another writer of it busy, a
        directory to make, a write too large for the journal): then run `append_prepared` on a thread.
        `write_here`: the caller runs `journal.write_waiting()` soon on its thread (when `journal.quick`)."""
        session = self.store.locked_now(prepared.session_id)
        if session is None:
            return None
        return self._begin(session, prepared, may_wait=False, write_here=write_here)

    # -- one Append, under the session's lock ----------------------------------------------------------------

    def _begin(self, session: Session, prepared: Prepared, may_wait: bool, write_here: bool = False,
               deadline: Deadline = UNBOUNDED) -> Future[AppendResult] | None:
        """With `session.lock` taken by the caller: ids, the write into history.json left unsynced, and its
        journal frame, whose completion releases the lock; on every other path, released here."""
        done: Future[AppendResult] = Future()
        done.set_running_or_notify_cancel()  # a caller that gives up cannot cancel what the journal completes
        records, key = prepared.records, prepared.idempotency_key
        before = session.size
        handed_to_journal = large = False
        try:
            deadline.check(f"appending to session {session.id!r}")
            if key and key in session.replies:
                done.set_result(AppendResult(session.replies[key], replayed=True))
                return done
            if session.next_id + len(records) - 1 > MAX_ID:
                raise ResourceExhausted(f"session {session.id!r} has used every message id up to 2^63 - 1: export "
                                        "what it holds into a new session", reason=Reason.SESSION_IDS_EXHAUSTED)
            for offset, record in enumerate(records):
                record.id = session.next_id + offset
            offset, payload = history.planned(before, records)
            creating = before == 0 and not session.directory.is_dir()
            large = len(payload) > journal.MAX_FRAME
            if (creating or large) and not may_wait:
                return None
            if creating:
                self.store.create(session)
            if large:  # synced in place: its file settled first, so no older frame is replayed over it
                self.journal.settle(self.store.journaled(session))
                session.size = history.append(session.history_path, before, records)
                self._publish(session, prepared, done)
            else:
                session.size = history.write_planned(session.history_path, before, offset, payload)
                self.journal.submit(self.store.journaled(session), offset, payload,
                                    lambda error: self._complete(session, prepared, before, done, error), write_here)
                handed_to_journal = True
        except BaseException as exc:
            if session.size != before:
                history.undo(session.history_path, before)
                session.size = before
            if isinstance(exc, OSError):
                raise storage_error(exc, f"appending to session {session.id}") from exc
            raise
        finally:
            if not handed_to_journal:
                session.lock.release()
        if large:
            self._after(session)
        return done

    def _complete(self, session: Session, prepared: Prepared, before: int, done: Future[AppendResult],
                  error: BaseException | None) -> None:
        """The journal's answer for an Append's frame: durable (None) or not (`error`); the lock's release."""
        try:
            if error is None:
                self._publish(session, prepared, done)
            else:
                history.undo(session.history_path, before)
                session.size = before
                done.set_exception(storage_error(error, f"appending to session {session.id}")
                                   if isinstance(error, OSError) else error)
        finally:
            session.lock.release()
        if error is None:
            self._after(session)

    def _after(self, session: Session) -> None:
        """Once the lock is released: past max_history_bytes, the session is queued for compaction."""
        if session.size > self.settings.max_history_bytes:
            self.on_oversize(session.id)

    def _publish(self, session: Session, prepared: Prepared, done: Future[AppendResult]) -> None:
        """The Append is durable: publish it and acknowledge it, then tell the derived stores under the
        lock still, so a Reset or Compact can never overtake this news."""
        records = prepared.records
        session.published(records, prepared.idempotency_key)
        if self.quota is not None:
            self.quota.added(records)
        done.set_result(AppendResult(records, replayed=False))
        try:
            if prepared.embeddings is not None and self.embeddings is not None:
                self.embeddings.supplied(session.id, records, prepared.embeddings)
            for store in self.derived:
                store.appended(session.id, records)
        except Exception:  # stored and acknowledged: the store catches up when the session is next opened
            log.exception("a derived store refused appended messages", extra={"session_id": session.id})

    def _record(self, message: NewMessage, idempotency_key: str) -> Record:
        content, sender, send_at = legacy.resolve(message.content, message.sender, message.send_at)
        return Record(role=message.role, content=content, send_at=send_at or self.clock(), sender=sender,
                      idempotency_key=idempotency_key, payload=message.payload)
