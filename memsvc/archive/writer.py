"""The archive's one writer thread: batches, commits, retries, and when it gives up.

tantivy-py's IndexWriter is not thread-safe, so one thread owns it: it
gathers queued operations for up to `commit_interval` (or until a flush
asks for a commit now), applies them and commits once. A commit the disk
refuses is rolled back and retried with backoff, never dropped; the files
are checked at the first failure and now and then after it, and a damaged
index (integrity.py) ends the retries. An operation whose own data cannot be
stored (a value no field can hold) is never retried: it is set aside with its
session named, that session's archive is refused with the reason until a
Reset or removal clears it, and every other session keeps committing. At `close` the thread commits what is
queued and stops within its timeout. The thread survives every failure; one
it cannot understand stops all writing as damage does (until a restart,
which re-indexes from history.json what was not committed), so nothing is
ever cut from history.json that the archive does not hold. Must never block
a caller but flush().
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import msgspec
import tantivy

from memsvc.archive.integrity import Damage, engine_failure
from memsvc.core import failpoints
from memsvc.core.errors import Unavailable
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.runtime import metrics

log = logging.getLogger(__name__)

FIRST_RETRY_SECONDS, LAST_RETRY_SECONDS = 0.1, 5.0
CHECK_EVERY_FAILURES = 8
"A failing commit checks the files at its first failure and then every this many (a full read of the index)."
CLOSE_SECONDS = 5.0
UNSTORABLE = (OverflowError, TypeError, UnicodeEncodeError)
"What building a document raises for a value no field holds (an id past 2^64, a lone surrogate): retrying cannot help."


class Op(msgspec.Struct):
    kind: str
    "add | reconcile | clear | delete | commit (commit now, without waiting for more)"
    session_id: str
    records: list[Record] = []
    ids: list[int] = []
    "delete: the ids of the session's messages to delete."
    cleared: int = 0
    "clear and delete: how many of the session's messages it deleted, set by the writer."
    number: int = 0
    "Its place in the queue, from 1."


class _Unstorable(Exception):
    def __init__(self, op: Op, cause: BaseException):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.op = op


class Writer:
    """`count(session)` and `present_ids(session, lowest, highest)` read the committed index."""

    def __init__(self, index: tantivy.Index, writer: tantivy.IndexWriter, commit_interval: float, damage: Damage,
                 count: Callable[[str], int], present_ids: Callable[[str, int, int], set[int]],
                 messages_with_ids: Callable[[str, list[int]], tantivy.Query]):
        self.index = index
        self._writer = writer
        self.commit_interval = commit_interval
        self.damage = damage
        self._count = count
        self._present_ids = present_ids
        self._messages_with_ids = messages_with_ids
        self._pending: list[Op | None] = []
        "Queued operations (None: close); the thread takes them all at once."
        self._arrived = threading.Condition()
        self._urgent = False
        "A commit (flush) or the close is pending: stop gathering."
        self._queued = 0
        self._settled = 0
        "Operations committed or given up on: they are applied in order."
        self._committed = 0
        self._first_given_up: int | None = None
        "The first operation given up on (only once the index is damaged or the server is closing: no later one "
        "commits but during the last drain)."
        self._progress = threading.Condition()
        self._closing = threading.Event()
        self._failure: BaseException | None = None
        self._batch_ids: dict[str, set[int]] = {}
        "Ids added by the batch being applied, not yet visible to searchers."
        self._batch_cleared: set[str] = set()
        "Sessions a clear of the batch being applied deleted: their committed messages are counted already."
        self.set_aside: dict[str, str] = {}
        "Sessions with an operation that could not be stored -> why; their archive is refused until cleared."
        self._refused: set[int] = set()
        "Numbers of the operations of the batch being applied that were set aside."
        self._thread = threading.Thread(target=self._run, name="archive-writer", daemon=True)
        self._thread.start()
        metrics.gauge("archive_queue_depth", "Archive operations queued but not committed.",
                      lambda: self._queued - self._settled)
        metrics.total("archive_committed_operations_total", "Archive operations committed.",
                      lambda: self._committed)
        metrics.gauge("archive_sessions_set_aside", "Sessions whose messages the archive could not store.",
                      lambda: len(self.set_aside))

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def enqueue(self, op: Op) -> None:
        with self._progress:
            self._queued += 1
            op.number = self._queued
            self._put(op)

    def _put(self, op: Op | None) -> None:
        # Wakes the thread only for the first operation of a batch or one that cannot wait: the
        # Appends between cost the thread nothing, nor the GIL they would take from the requests.
        with self._arrived:
            self._pending.append(op)
            urgent = op is None or op.kind == "commit"
            self._urgent = self._urgent or urgent
            if urgent or len(self._pending) == 1:
                self._arrived.notify()

    def flush(self, timeout: float) -> None:
        """Wait until everything queued so far is committed and searchable (see Archive.flush)."""
        commit = Op("commit", "")
        self.enqueue(commit)
        target = commit.number
        with self._progress:
            self._progress.wait_for(lambda: self._settled >= target or self.damage.problem is not None, timeout)
            given_up = self._first_given_up is not None and self._first_given_up <= target
            if self._settled >= target and not given_up:
                return
            self.damage.check()
            if given_up:
                raise Unavailable("the server is shutting down; retry on the next one", reason=Reason.SHUTTING_DOWN)
            if self._failure is not None:
                raise Unavailable(f"the archive cannot commit ({self._failure}); retry later",
                                  reason=Reason.ARCHIVE_UNAVAILABLE)
            raise Unavailable("the archive is behind; retry later", reason=Reason.ARCHIVE_BEHIND)

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Commit everything queued (trying for at most `timeout`), then release the index."""
        self._closing.set()
        self._put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("archive writer still busy at shutdown; what it did not commit is re-indexed from "
                      "history.json when each session is next opened", extra={
                          "queued": self._queued - self._settled, "waited_s": timeout})

    # -- the thread ------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            with self._arrived:
                self._arrived.wait_for(lambda: self._pending)
                self._arrived.wait_for(lambda: self._urgent, self.commit_interval)
                batch, self._pending, self._urgent = self._pending, [], False
            if None in batch:
                stopping = True
            ops = [op for op in batch if op is not None]
            try:
                self._apply_until_committed(ops)
            except BaseException as exc:  # never die; write nothing more until a restart re-indexes
                log.exception("archive writer failed", extra={"ops": len(ops)})
                self.damage.found(f"its writer failed unexpectedly ({type(exc).__name__}: {exc})",
                                  remedy="restart memsvc: what was not committed is re-indexed from history.json")
                self._settle(ops, committed=False)
        try:
            self._writer.wait_merging_threads()
        except BaseException:
            log.exception("archive merges failed at shutdown")

    def _settle(self, ops: list[Op], committed: bool) -> None:
        with self._progress:
            self._settled += len(ops)
            if committed:
                self._committed += len(ops)
                self._failure = None
            elif ops and self._first_given_up is None:
                self._first_given_up = ops[0].number
            self._progress.notify_all()

    def _apply_until_committed(self, ops: list[Op]) -> None:
        """Apply and commit `ops`, retrying (never dropping) while the disk refuses; given up on only
        when the index is damaged or the server is closing."""
        delay, failures = FIRST_RETRY_SECONDS, 0
        self._refused = set()
        while True:
            if self.damage.problem is not None or (failures and self._closing.is_set()):
                self._settle(ops, committed=False)
                return
            self._batch_ids, self._batch_cleared = {}, set()
            try:
                for op in ops:
                    if op.number not in self._refused:
                        self._apply_checked(op)
                failpoints.hit("archive.commit")
                self._writer.commit()
                self.index.reload()
            except _Unstorable as unstorable:  # its own data: the batch is applied again without it, at once
                self._set_aside(unstorable.op, str(unstorable))
                self._writer.rollback()
                continue
            except BaseException as exc:
                if not engine_failure(exc):
                    raise
                failures += 1
                self._failed(exc, failures, len(ops))
                self._closing.wait(delay)
                delay = min(delay * 2, LAST_RETRY_SECONDS)
                continue
            self._settle(ops, committed=True)
            return

    def _apply_checked(self, op: Op) -> None:
        try:
            self._apply(op)
        except UNSTORABLE as exc:
            raise _Unstorable(op, exc) from exc

    def _set_aside(self, op: Op, why: str) -> None:
        self._refused.add(op.number)
        with self._progress:
            first = op.session_id not in self.set_aside
            self.set_aside[op.session_id] = why
        if first:
            log.error("archive set a session's messages aside: they cannot be stored, and retrying cannot help; "
                      "the session's archive is refused until it is reset or removed; other sessions go on",
                      extra={"session": op.session_id, "op": op.kind, "messages": len(op.records), "error": why})

    def forgive(self, session_id: str) -> None:
        """The session was cleared (its messages are gone): its archive is served again."""
        with self._progress:
            self.set_aside.pop(session_id, None)

    def _failed(self, exc: BaseException, failures: int, ops: int) -> None:
        """Roll back, tell flush() why, and check the files now and then: a damaged index ends the retries."""
        now_and_then = failures == 1 or failures % CHECK_EVERY_FAILURES == 0
        if now_and_then:
            log.error("archive commit failed; retrying", extra={"error": str(exc), "ops": ops, "failures": failures})
        with self._progress:
            self._failure = exc
            self._progress.notify_all()
        try:
            self._writer.rollback()
        except BaseException as rollback:
            if not engine_failure(rollback):
                raise
            log.error("archive rollback failed", extra={"error": str(rollback)})
        # OSErrors come from the disk (or a test's failure point), never from a damaged file.
        if now_and_then and not isinstance(exc, OSError):
            self.damage.look()

    def _apply(self, op: Op) -> None:
        if op.kind == "add":
            self._add(op.session_id, op.records)
        elif op.kind == "reconcile":
            present = self._present_ids(op.session_id, op.records[0].id, op.records[-1].id)
            present |= self._batch_ids.get(op.session_id, set())
            missing = [record for record in op.records if record.id not in present]
            if missing:
                log.info("archive re-indexing", extra={"session": op.session_id, "messages": len(missing)})
                self._add(op.session_id, missing)
        elif op.kind == "clear":
            committed = 0 if op.session_id in self._batch_cleared else self._count(op.session_id)
            op.cleared = committed + len(self._batch_ids.pop(op.session_id, set()))
            self._batch_cleared.add(op.session_id)
            # Deletes reach only documents added before them, so later adds of this batch survive.
            self._writer.delete_documents_by_term("session", op.session_id)
        elif op.kind == "delete" and op.ids:
            self._delete(op)

    def _delete(self, op: Op) -> None:
        """Delete some of a session's messages by id: those committed and those added in this batch."""
        wanted = set(op.ids)
        query = self._messages_with_ids(op.session_id, sorted(wanted))
        committed = 0 if op.session_id in self._batch_cleared else int(
            self.index.searcher().search(query, limit=1, count=True).count)  # type: ignore[attr-defined]
        batch = self._batch_ids.get(op.session_id, set())
        op.cleared = committed + len(batch & wanted)
        batch -= wanted
        self._writer.delete_documents_by_query(query)

    def _add(self, session_id: str, records: list[Record]) -> None:
        self._batch_ids.setdefault(session_id, set()).update(record.id for record in records)
        for record in records:
            document = tantivy.Document()
            document.add_text("session", session_id)
            document.add_unsigned("id", record.id)
            document.add_integer("send_at", record.send_at)
            document.add_text("role", record.role)
            document.add_text("sender", record.sender)
            document.add_text("content", record.content)
            if record.payload:
                document.add_bytes("payload", record.payload.encode())
            self._writer.add_document(document)
