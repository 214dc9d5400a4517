"""Sessions: tier 1, the source of truth for recent messages.

Owns `sessions/<id>/` (history.json, and the directory's life: a Reset
deletes the summary tier's files by name) and `sessions/.intent-*` (the
records of Resets and removals in progress, intents.py), the in-memory copy
of each open session's recent messages, id assignment, idempotency, and one
writer per session. An Append writes history.json unsynced and is durable
once `.journal` holds the same bytes (journal.py: one sync for many Appends);
it is published to readers and the derived stores only then. Anything that
rewrites or deletes a history settles it in the journal first. What an
Append may carry is incoming.py's. Sessions
whose Reset or removal was interrupted are refused until it is completed,
and nothing is written once the data directory was deleted under the
server. Open sessions are kept in memory (least recently used closed past
`max_open_sessions`) so no request re-decodes history.json. Must never block on, or know about, the derived
stores (archive, vectors): they learn of changes through the DerivedStore
calls and catch up in their own time.
"""

from __future__ import annotations

import bisect
import collections
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

import msgspec

from memsvc.core import durable
from memsvc.core.config import Settings
from memsvc.core.errors import FailedPrecondition, NotFound, ResourceExhausted, Unavailable, storage_error
from memsvc.core.ids import check_session_id, is_session_id
from memsvc.core.records import Record
from memsvc.runtime import metrics
from memsvc.window import history, journal, legacy
from memsvc.window.derived import DerivedStore, EmbeddingSink
from memsvc.window.incoming import NewMessage as NewMessage  # re-exported: callers build it from here
from memsvc.window.incoming import check_append
from memsvc.window.intents import Intents

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 1000
JOURNAL = ".journal"
"The journal's file in the data directory."


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


class SessionInfo(msgspec.Struct):
    session_id: str
    message_count: int
    history_bytes: int
    last_append: int
    "UTC Unix nanoseconds (history.json's modification time)."
    has_summary: bool


class Session:
    """One open session. Mutations hold `lock`; readers take the list as it is."""

    def __init__(self, session_id: str, directory: Path):
        self.id = session_id
        self.directory = directory
        self.history_path = directory / "history.json"
        self.summary_path = directory / "summary.json"
        self.next_id_path = directory / ".next_id"
        self.lock = threading.Lock()
        self.closed = False
        try:
            loaded = history.load(self.history_path)
        except IsADirectoryError:
            raise FailedPrecondition(f"{self.history_path} is a directory, not a file: move it aside to use "
                                     f"session {session_id!r}", reason="HISTORY_UNREADABLE") from None
        except OSError as exc:
            raise storage_error(exc, f"opening session {session_id}") from exc
        self.records: list[Record] = loaded.records
        self.size = loaded.size
        self.replies: dict[str, list[Record]] = {}
        for record in self.records:
            if record.idempotency_key:
                self.replies.setdefault(record.idempotency_key, []).append(record)
        self._lowered: dict[int, str] = {}
        self.floor_id = self._read_floor()

    def _read_floor(self) -> int:
        """The id after the last one a Reset removed (1 when the session was never reset)."""
        try:
            return int(self.next_id_path.read_bytes())
        except FileNotFoundError:
            return 1
        except (OSError, ValueError) as exc:
            log.warning("unreadable .next_id left in place; ids continue after those in history.json",
                        extra={"path": str(self.next_id_path), "error": str(exc)})
            return 1

    @property
    def next_id(self) -> int:
        """Ids never repeat in a session, even after Reset emptied its history."""
        return max(self.records[-1].id + 1 if self.records else 1, self.floor_id)

    def lowered(self, record: Record) -> str:
        """The record's content in lower case, computed once (keyword search scans it often)."""
        text = self._lowered.get(record.id)
        if text is None:
            text = self._lowered[record.id] = record.content.lower()
        return text


class Sessions:
    """Every session of the data root; opens them on first use and keeps the open ones in memory.

    `derived` stores hear of every change; `embeddings` takes vectors clients
    supply (None: refuse them); `on_oversize(session_id)` is called after an
    Append leaves history.json over max_history_bytes (it must return at once:
    compaction happens elsewhere).
    """

    def __init__(self, settings: Settings, *, derived: Sequence[DerivedStore], embeddings: EmbeddingSink | None,
                 on_oversize: Callable[[str], None], clock: Callable[[], int] = time.time_ns):
        self.settings = settings
        self.root = settings.sessions_dir
        self.clock = clock
        self.derived = tuple(derived)
        self.embeddings = embeddings
        self.on_oversize = on_oversize
        self._open: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self._registry = threading.Lock()
        durable.ensure_dir(self.root)
        durable.sweep_deleted(self.root)
        self.journal = journal.Journal(Path(settings.data_dir) / JOURNAL, self.root)
        "Makes Appends durable, many at once; replays what a crash left before anything reads a history."
        self.storage = durable.DataPaths([Path(settings.data_dir), self.root])
        "Checked before every write: the data directory must still be the one opened."
        self.intents = Intents(self.root)
        self.stored = sum(1 for entry in self.root.iterdir() if entry.is_dir() and is_session_id(entry.name))
        "Session directories on disk, counted against max_sessions."
        metrics.gauge("sessions", "Sessions stored on disk.", lambda: self.stored)
        metrics.gauge("open_sessions", "Sessions held in memory.", lambda: len(self._open))

    # -- opening -----------------------------------------------------------

    def directory(self, session_id: str) -> Path:
        return self.root / check_session_id(session_id)

    def exists(self, session_id: str) -> bool:
        return self.directory(session_id).is_dir()

    def _get(self, session_id: str, resuming: bool = False) -> Session:
        interrupted = self.intents.interrupted(session_id)
        if interrupted is not None and not resuming:
            raise Unavailable(f"an interrupted {interrupted.action.replace('_', ' ')} of session {session_id!r} is "
                              "being completed; retry shortly", reason="SESSION_BEING_CLEARED")
        with self._registry:
            session = self._open.get(session_id)
            if session is not None:
                self._open.move_to_end(session_id)
                return session
            session = Session(session_id, self.directory(session_id))
            self._open[session_id] = session
            self._evict()
        with session.lock:  # so no snapshot a store recovers from predates a deletion that reached it first
            for store in self.derived:
                store.recover(session_id, list(session.records))
        return session

    def _evict(self) -> None:
        while len(self._open) > self.settings.max_open_sessions:
            for candidate_id, candidate in self._open.items():
                if candidate.lock.acquire(blocking=False):
                    candidate.closed = True
                    candidate.lock.release()
                    del self._open[candidate_id]
                    for store in self.derived:
                        store.closed(candidate_id)
                    break
            else:
                return  # every open session is busy: over the limit until one is free

    @contextmanager
    def writing(self, session_id: str, resuming: bool = False) -> Iterator[Session]:
        """The session, locked against other writers for the block.

        `resuming`: the caller completes the session's interrupted Reset or removal (lifecycle.py).
        """
        session = self._locked(session_id, resuming)
        try:
            yield session
        finally:
            session.lock.release()

    def _locked(self, session_id: str, resuming: bool = False) -> Session:
        """The open session with its lock held by the caller."""
        while True:
            session = self._get(session_id, resuming)
            session.lock.acquire()
            if not session.closed:
                return session
            session.lock.release()

    def reading(self, session_id: str) -> Session | None:
        """The open session for readers, or None when it has never been written."""
        if not self.exists(session_id):
            self.storage.check()  # not "no such session" when the whole data directory is gone
            return None
        return self._get(session_id)

    # -- tier 1 ------------------------------------------------------------

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
        with self._registry:
            session = self._open.get(prepared.session_id)
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
        relative = self._journaled(session)
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

    def _create(self, directory: Path) -> None:
        """Make a new session's directory if max_sessions allows one more."""
        with self._registry:
            if self.stored >= self.settings.max_sessions:
                raise ResourceExhausted(
                    f"this server already stores {self.stored} sessions (max_sessions): remove one or raise the "
                    "setting; existing sessions keep working", reason="SESSION_QUOTA_EXCEEDED")
            self.stored += 1
        try:
            durable.make_dir(directory)
        except BaseException:
            with self._registry:
                self.stored -= 1
            raise

    def _record(self, message: NewMessage, idempotency_key: str) -> Record:
        content, sender, send_at = legacy.resolve(message.content, message.sender, message.send_at)
        return Record(role=message.role, content=content, send_at=send_at or self.clock(), sender=sender,
                      idempotency_key=idempotency_key, payload=message.payload)

    def window(self, session_id: str) -> list[Record]:
        """The last max_history_messages messages, oldest first."""
        session = self.reading(session_id)
        if session is None:
            return []
        return session.records[-self.settings.max_history_messages:]

    def records_after(self, session_id: str, after_id: int) -> list[Record]:
        """The session's messages in history.json with an id above `after_id`, oldest first."""
        session = self.reading(session_id)
        if session is None:
            return []
        with session.lock:
            records = session.records
            return records[bisect.bisect_right(records, after_id, key=lambda record: record.id):]

    # -- listing -----------------------------------------------------------

    def list_page(self, page_size: int, page_token: str, id_contains: str = "") -> tuple[list[SessionInfo], str]:
        """One page of sessions ordered by id, only those whose id contains `id_contains` (ignoring
        case) when it is given; the token is the last id shown.

        `page_size` 0 means DEFAULT_PAGE_SIZE; more than MAX_PAGE_SIZE gets MAX_PAGE_SIZE.
        """
        page_size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        if page_token:
            check_session_id(page_token)
        needle = id_contains.casefold()
        names = sorted(entry.name for entry in self.root.iterdir()
                       if entry.is_dir() and is_session_id(entry.name) and entry.name > page_token
                       and needle in entry.name.casefold())
        page = names[:page_size]
        infos = [info for name in page if (info := self._info(name)) is not None]
        return infos, page[-1] if len(names) > page_size else ""

    def _info(self, session_id: str) -> SessionInfo | None:
        directory = self.root / session_id
        path = directory / "history.json"
        with self._registry:
            session = self._open.get(session_id)
        try:
            stat = path.stat()
            size, modified = stat.st_size, stat.st_mtime_ns
            count = len(session.records) if session is not None else _count_records(path) if size else 0
        except FileNotFoundError:
            size, modified, count = 0, 0, 0
        except OSError as exc:  # one unreadable session must not fail the listing of every other
            log.warning("history unreadable while listing sessions", extra={"path": str(path), "error": str(exc)})
            size, modified, count = 0, 0, 0
        return SessionInfo(session_id, count, size, modified, (directory / "summary.json").exists())

    # -- cutting (the caller holds session.lock; lifecycle.py decides when) -----

    def trim(self, session: Session, cut: int) -> list[Record]:
        """Drop the first `cut` records from history.json; returns them."""
        removed, kept = session.records[:cut], session.records[cut:]
        try:
            self.journal.settle(self._journaled(session))
            session.size = history.rewrite(session.history_path, kept)
        except OSError as exc:
            raise storage_error(exc, f"compacting session {session.id}") from exc
        session.records = kept
        session._lowered = {}
        return removed

    def drop(self, session: Session, ids: set[int], next_id: int) -> list[Record]:
        """Delete the records with these ids from history.json, ids continuing from `next_id`; returns them."""
        removed = [record for record in session.records if record.id in ids]
        if not removed:
            return []
        kept = [record for record in session.records if record.id not in ids]
        try:
            self._raise_floor(session, next_id)
            self.journal.settle(self._journaled(session))
            session.size = history.rewrite(session.history_path, kept)
        except OSError as exc:
            raise storage_error(exc, f"deleting messages of session {session.id}") from exc
        session.records = kept
        session._lowered = {}
        for key in {record.idempotency_key for record in removed if record.idempotency_key}:
            # As history.json tells after a restart: a key whose messages are all gone is forgotten.
            if not (left := [record for record in session.replies.pop(key) if record.id not in ids]):
                continue
            session.replies[key] = left
        return removed

    def _raise_floor(self, session: Session, next_id: int) -> None:
        """Ids never go below `next_id`, even once history.json no longer holds the newest of them."""
        next_id = max(next_id, session.next_id)
        if next_id > session.floor_id:
            durable.atomic_write(session.next_id_path, str(next_id).encode())
            session.floor_id = next_id

    def clear(self, session: Session, drop_summary: bool, next_id: int) -> tuple[int, bool]:
        """Delete history.json (and summary.json), ids continuing from `next_id`; returns
        (messages deleted, summary deleted)."""
        count = len(session.records)
        try:
            self._raise_floor(session, next_id)
            self.journal.settle(self._journaled(session))
            durable.remove_file(session.history_path)
            summary_deleted = False
            if drop_summary:
                summary_deleted = durable.remove_file(session.summary_path)
                durable.remove_file(session.directory / ".summary_cursor")
        except OSError as exc:
            raise storage_error(exc, f"resetting session {session.id}") from exc
        session.records, session.size, session.replies, session._lowered = [], 0, {}, {}
        return count, summary_deleted

    def remove(self, session: Session) -> None:
        """Delete the session's directory and forget it."""
        existed = session.directory.is_dir()
        try:
            self.journal.settle(self._journaled(session))
            durable.remove_tree(session.directory)
        except OSError as exc:
            raise storage_error(exc, f"removing session {session.id}") from exc
        session.closed = True
        with self._registry:
            self.stored -= existed
            if self._open.get(session.id) is session:
                del self._open[session.id]

    def _journaled(self, session: Session) -> str:
        """The session's history.json as the journal names it."""
        return f"{session.id}/{history.NAME}"

    def close(self) -> None:
        """After the last Append: the journal writes what waits and checkpoints."""
        self.journal.close()

    def last_writes(self, prefix: str = "") -> list[tuple[str, int]]:
        """(session id, last history write in UTC ns) of stored sessions whose id starts with `prefix`."""
        found = []
        for entry in self.root.iterdir():
            if entry.is_dir() and entry.name.startswith(prefix) and is_session_id(entry.name):
                try:
                    found.append((entry.name, (entry / "history.json").stat().st_mtime_ns))
                except FileNotFoundError:
                    found.append((entry.name, entry.stat().st_mtime_ns))
        return found

    def require(self, session_id: str) -> Session:
        session = self.reading(session_id)
        if session is None:
            raise NotFound(f"session {session_id!r} does not exist", reason="SESSION_NOT_FOUND")
        return session


def _count_records(path: Path) -> int:
    """Records in a closed session's history without decoding it.

    Every stored record starts with `{"id":` and that byte sequence cannot
    occur inside a JSON string (its quotes would be escaped).
    """
    return path.read_bytes().count(b'{"id":')
