"""The append path: an Append checked, given ids, written, made durable by the journal, then published.

Owns id assignment, idempotency (a retried key gets its first result back),
and the order of an Append: checked and made into records before any lock
(`prepare`), written into history.json unsynced under the session's lock,
durable once the journal holds the same bytes, and only then acknowledged,
published to readers and told to the derived stores, under the lock still
so that no Reset or Compact overtakes the news. A write too large for the
journal settles the file and is synced in place. What an Append may carry is
incoming.py's. Must never rewrite or remove what history.json already holds
(rewriting.py does), nor wait for a derived store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future

import msgspec

from memsvc.core.errors import FailedPrecondition, storage_error
from memsvc.core.ids import check_session_id
from memsvc.core.records import Record
from memsvc.window import history, journal, legacy
from memsvc.window.derived import EmbeddingSink
from memsvc.window.incoming import NewMessage, check_append
from memsvc.window.registry import Registry
from memsvc.window.session import Session

log = logging.getLogger(__name__)


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


class Appending(Registry):
    """`embeddings` takes vectors clients supply (None: refuse them); `on_oversize(session_id)` is
    called after an Append leaves history.json over max_history_bytes (it must return at once:
    compaction happens elsewhere)."""

    embeddings: EmbeddingSink | None
    on_oversize: Callable[[str], None]

    def append(self, session_id: str, messages: list[NewMessage], idempotency_key: str = "") -> AppendResult:
        """Store `messages` durably at the end of the session, then tell the derived stores."""
        return self.append_prepared(self.prepare(session_id, messages, idempotency_key))

    def prepare(self, session_id: str, messages: list[NewMessage], idempotency_key: str = "") -> Prepared:
        """Check an Append and make its records, before any lock; raises for what is wrong with it."""
        check_session_id(session_id)
        check_append(messages, idempotency_key, self.settings)
        embeddings = [message.embedding for message in messages]
        supplied = any(embeddings)
        if supplied:
            if self.embeddings is None:
                raise FailedPrecondition("this server takes no client-supplied embeddings",
                                         reason="EMBEDDINGS_NOT_ACCEPTED")
            self.embeddings.check(session_id, embeddings)
        records = [self._record(message, idempotency_key) for message in messages]
        self.storage.check()
        return Prepared(session_id, records, idempotency_key, embeddings if supplied else None)

    def append_prepared(self, prepared: Prepared) -> AppendResult:
        """Store a prepared Append, waiting for whatever it needs (the session's lock, its directory)."""
        started = self._begin(self._locked(prepared.session_id), prepared, may_wait=True)
        assert started is not None
        return started.result()

    def append_nowait(self, prepared: Prepared, write_here: bool = False) -> Future[AppendResult] | None:
        """Start a prepared Append blocking on nothing but memory: its result, set once durable; or
        None when it would have to wait (the session not in memory, another writer of it busy, a
        directory to make, a write too large for the journal): then run `append_prepared` on a thread.
        `write_here`: the caller runs `journal.write_waiting()` soon on its thread (when `journal.quick`)."""
        session = self.in_memory(prepared.session_id)
        if session is None or self.intents.interrupted(prepared.session_id) is not None:
            return None
        if not session.lock.acquire(blocking=False):
            return None
        if session.closed:
            session.lock.release()
            return None
        return self._begin(session, prepared, may_wait=False, write_here=write_here)

    def _begin(self, session: Session, prepared: Prepared, may_wait: bool,
               write_here: bool = False) -> Future[AppendResult] | None:
        """Under `session.lock`, which the Append's completion releases: ids, the write into
        history.json left unsynced, and its journal frame; the journal's thread completes it."""
        done: Future[AppendResult] = Future()
        done.set_running_or_notify_cancel()  # a caller that gives up cannot cancel what the journal completes
        records, key = prepared.records, prepared.idempotency_key
        relative = self._journaled(session.id)
        before = session.size
        try:
            if key and key in session.replies:
                session.lock.release()
                done.set_result(AppendResult(session.replies[key], replayed=True))
                return done
            for offset, record in enumerate(records):
                record.id = session.next_id + offset
            offset, payload = history.planned(before, records)
            creating = before == 0 and not session.directory.is_dir()
            large = len(payload) > journal.MAX_FRAME
            if (creating or large) and not may_wait:
                session.lock.release()
                return None
            if creating:
                self._create(session.directory)
            if large:  # synced in place: its file settled first, so no older frame is replayed over it
                self.journal.settle(relative)
                session.size = history.append(session.history_path, before, records)
                self._complete(session, prepared, before, done, None)
                return done
            session.size = history.write_planned(session.history_path, before, offset, payload)
            self.journal.submit(relative, offset, payload,
                                lambda error: self._complete(session, prepared, before, done, error), write_here)
        except BaseException as exc:
            if session.size != before:
                history.undo(session.history_path, before)
                session.size = before
            session.lock.release()
            if isinstance(exc, OSError):
                raise storage_error(exc, f"appending to session {session.id}") from exc
            raise
        return done

    def _complete(self, session: Session, prepared: Prepared, before: int, done: Future[AppendResult],
                  error: BaseException | None) -> None:
        """The Append is durable (or `error` says why not): publish it and acknowledge it, then tell the
        derived stores under the lock still, so a Reset or Compact can never overtake this news."""
        records = prepared.records
        try:
            if error is not None:
                history.undo(session.history_path, before)
                session.size = before
                done.set_exception(storage_error(error, f"appending to session {session.id}")
                                   if isinstance(error, OSError) else error)
                return
            session.records.extend(records)
            if prepared.idempotency_key:
                session.replies[prepared.idempotency_key] = records
            done.set_result(AppendResult(records, replayed=False))
            oversize = session.size > self.settings.max_history_bytes
            try:
                if prepared.embeddings is not None and self.embeddings is not None:
                    self.embeddings.supplied(session.id, records, prepared.embeddings)
                for store in self.derived:
                    store.appended(session.id, records)
            except Exception:  # stored and acknowledged: the store catches up when the session is next opened
                log.exception("a derived store refused appended messages", extra={"session_id": session.id})
        finally:
            session.lock.release()
        if oversize:
            self.on_oversize(session.id)

    def _record(self, message: NewMessage, idempotency_key: str) -> Record:
        content, sender, send_at = legacy.resolve(message.content, message.sender, message.send_at)
        return Record(role=message.role, content=content, send_at=send_at or self.clock(), sender=sender,
                      idempotency_key=idempotency_key, payload=message.payload)

