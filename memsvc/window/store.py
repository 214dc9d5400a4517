"""The open sessions: opened on first use, one writer at a time, the least recently used closed.

Owns `sessions/` as a set of directories (where a session's is, through the
layout; made, counted against max_sessions, given to an import in one
rename), the open sessions kept in memory (least recently used closed past
`max_open_sessions`, so no request re-decodes history.json), one writer per
session (`writing`, `locked`), the refusals every call about a session
passes (a hold, an interrupted Reset, removal or deletion, a data directory
deleted under the server), and reads of an open session's recent messages.
Must never change a history.json (appender.py and rewriter.py do), nor
block on or know about the derived stores: they hear of changes through the
DerivedStore calls and catch up in their own time.
"""

from __future__ import annotations

import bisect
import collections
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from memsvc.core import durable, layout
from memsvc.core.config import Settings
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import AlreadyExists, NotFound, ResourceExhausted, storage_error
from memsvc.core.ids import check_session_id
from memsvc.core.layout import TenantLayout
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.journal.journal import Journal
from memsvc.runtime import metrics
from memsvc.window.derived import DerivedStore
from memsvc.window.session import Session


class CreationGate(Protocol):
    """The pause of session creation (shards/holds.py)."""

    def refuse_creation(self) -> None:
        """Raise UNAVAILABLE while creating sessions is paused."""


class HoldGate(Protocol):
    """Sessions held while they move (shards/holds.py), and the pause of session creation."""

    def refuse(self, session_id: str) -> None:
        """Raise UNAVAILABLE while the session is held."""

    @property
    def pause(self) -> CreationGate: ...


class IntentGate(Protocol):
    """Resets, removals and deletions a crash or a failure interrupted (lifecycle/intents.py)."""

    def refuse_interrupted(self, session_id: str) -> None:
        """Raise UNAVAILABLE while the session's interrupted operation is not completed."""

    def is_interrupted(self, session_id: str) -> bool: ...


class SessionStore:
    """Every session of one tenant's sessions directory; `derived` stores hear of every open and close."""

    def __init__(self, settings: Settings, places: TenantLayout, journal: Journal, *, holds: HoldGate,
                 intents: IntentGate, derived: Sequence[DerivedStore], storage: durable.DataPaths,
                 max_sessions: Callable[[], int] | None = None):
        """`max_sessions()`: how many sessions the tenant may store, read at each new one (default: the
        max_sessions setting)."""
        self.settings = settings
        self.max_sessions = max_sessions or (lambda: settings.max_sessions)
        self.places = places
        self.journal = journal
        self.holds = holds
        self.intents = intents
        self.derived = tuple(derived)
        self.storage = storage
        "Checked before every write: the data directory must still be the one opened."
        self._open: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self._registry = threading.Lock()
        durable.ensure_dir(places.sessions_dir)
        durable.sweep_deleted(places.sessions_dir)
        for leftover in places.sessions_dir.glob(f"{layout.CREATING}*"):  # a kill before its rename
            durable.remove_tree(leftover)
        self.stored = len(places.stored())
        "Session directories on disk, counted against max_sessions."
        metrics.gauge("sessions", "Sessions stored on disk.", lambda: self.stored)
        metrics.gauge("open_sessions", "Sessions held in memory.", lambda: len(self._open))

    # -- where a session is ----------------------------------------------------------------------------------

    def directory(self, session_id: str) -> Path:
        """The session's directory, for every call about it: UNAVAILABLE while the session is held."""
        self.holds.refuse(check_session_id(session_id))
        return self.places.session_dir(session_id)

    def exists(self, session_id: str) -> bool:
        return self.directory(session_id).is_dir()

    def journaled(self, session: Session) -> str:
        """The session's history.json as the journal names it."""
        return self.journal.name_of(session.history_path)

    # -- opening ---------------------------------------------------------------------------------------------

    def _open_session(self, session_id: str, resuming: bool = False) -> Session:
        if not resuming:
            self.intents.refuse_interrupted(session_id)
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

    # -- writers ---------------------------------------------------------------------------------------------

    @contextmanager
    def writing(self, session_id: str, resuming: bool = False, deadline: Deadline = UNBOUNDED) -> Iterator[Session]:
        """The session, locked against other writers for the block (waiting within `deadline`).

        `resuming`: the caller completes the session's interrupted Reset, removal or deletion.
        """
        session = self.locked(session_id, resuming, deadline)
        try:
            yield session
        finally:
            session.lock.release()

    def locked(self, session_id: str, resuming: bool = False, deadline: Deadline = UNBOUNDED) -> Session:
        """The open session with its lock taken for the caller, who releases it; DEADLINE_EXCEEDED when
        another writer holds it past the caller's deadline."""
        while True:
            session = self._open_session(session_id, resuming)
            deadline.acquire(session.lock, f"waiting for session {session_id!r}'s other writer")
            if not session.closed:
                return session
            session.lock.release()

    def locked_now(self, session_id: str) -> Session | None:
        """The session with its lock taken for the caller, if that needs no wait and no disk (open, free,
        nothing interrupted); else None."""
        session = self.in_memory(session_id)
        if session is None or self.intents.is_interrupted(session_id):
            return None
        if not session.lock.acquire(blocking=False):
            return None
        if session.closed:
            session.lock.release()
            return None
        return session

    # -- readers ---------------------------------------------------------------------------------------------

    def reading(self, session_id: str) -> Session | None:
        """The open session for readers, or None when it has never been written."""
        if not self.exists(session_id):
            self.storage.check()  # not "no such session" when the whole data directory is gone
            return None
        return self._open_session(session_id)

    def in_memory(self, session_id: str) -> Session | None:
        """The session if it is open now, else None: never reads the disk or opens it."""
        with self._registry:
            return self._open.get(session_id)

    def require(self, session_id: str) -> Session:
        session = self.reading(session_id)
        if session is None:
            raise NotFound(f"session {session_id!r} does not exist", reason=Reason.SESSION_NOT_FOUND)
        return session

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

    # -- a session directory's life --------------------------------------------------------------------------

    def create(self, session: Session) -> None:
        """Make a new session's directory if max_sessions allows one more; the caller holds its lock."""
        self.holds.pause.refuse_creation()
        with self._registry:
            self._refuse_one_more()
            self.stored += 1
        try:
            self._make_dir(session)
        except BaseException:
            with self._registry:
                self.stored -= 1
            raise

    def _make_dir(self, session: Session) -> None:
        if not layout.is_hashed(session.directory.name):
            durable.make_dir(session.directory)
            return
        # A hashed name does not say its id: the directory appears with its id record, in one rename.
        staging = self.places.beside(layout.CREATING, session.id)
        durable.remove_tree(staging)
        durable.make_dir(staging)
        layout.record_id(staging / layout.ID_FILE, session.id)
        durable.publish(staging, session.directory)

    def _refuse_one_more(self) -> None:
        """RESOURCE_EXHAUSTED when the quota of sessions is stored; the caller holds the registry's lock."""
        quota = self.max_sessions()
        if self.stored >= quota:
            if quota < self.settings.max_sessions:
                raise ResourceExhausted(
                    f"tenant {self.places.name!r} already stores {self.stored} sessions, its max_sessions (tenants "
                    "file): remove one or raise the quota; existing sessions keep working",
                    reason=Reason.TENANT_QUOTA, metadata={"quota": "max_sessions", "limit": str(quota)})
            raise ResourceExhausted(
                f"this server already stores {self.stored} sessions (max_sessions): remove one or raise the "
                "setting; existing sessions keep working", reason=Reason.SESSION_QUOTA_EXCEEDED)

    def install(self, session_id: str, staged: Path) -> None:
        """Give an imported session, written complete in `staged`, its place in one rename, counted
        against max_sessions."""
        target = self.places.session_dir(check_session_id(session_id))
        # A barrier first: no frame of an earlier session of this id is ever replayed into the imported file.
        self.journal.settle(self.journal.name_of(target / layout.HISTORY))
        with self._registry:
            if target.exists():
                raise AlreadyExists(f"session {session_id!r} is already stored here: remove it first to import it "
                                    "again", reason=Reason.SESSION_EXISTS)
            self._refuse_one_more()
            try:
                durable.publish(staged, target)
            except OSError as exc:
                raise storage_error(exc, f"importing session {session_id}") from exc
            self.stored += 1
            cached = self._open.pop(session_id, None)
        if cached is not None:  # an empty copy opened before the import must not shadow the files
            cached.closed = True

    def forget(self, session: Session) -> None:
        """Drop an open session from memory (it is held, and read from disk while it moves); the
        caller holds its lock."""
        self.unregister(session, removed=False)
        for store in self.derived:
            store.closed(session.id)

    def unregister(self, session: Session, removed: bool) -> None:
        """`session` leaves memory and, `removed`, the count of stored sessions; the caller holds its lock."""
        session.closed = True
        with self._registry:
            self.stored -= removed
            if self._open.get(session.id) is session:
                del self._open[session.id]
