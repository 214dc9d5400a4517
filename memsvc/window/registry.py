"""The sessions of the data root as the other tier-1 modules reach them: opened on first use, one writer at a time.

Owns `sessions/` as a whole: the directory of each session and its life
(made, counted against max_sessions, given to an import in one rename), the
open sessions kept in memory (least recently used closed past
`max_open_sessions`, so no request re-decodes history.json), one writer per
session (`writing`), the journal every history.json write goes through
(journal.py), the refusals that apply to every call about a session (held
while it moves, holds.py; an interrupted Reset, removal or deletion not yet
completed, intents.py; creation paused; the data directory deleted under
the server), and reads of an open session's recent messages. Must never
change a history.json itself (appending.py and rewriting.py do), nor block
on, or know about, the derived stores (archive, vectors): they learn of
changes through the DerivedStore calls and catch up in their own time.
"""

from __future__ import annotations

import bisect
import collections
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from memsvc.core import durable
from memsvc.core.config import Settings
from memsvc.core.errors import AlreadyExists, NotFound, ResourceExhausted, Unavailable, storage_error
from memsvc.core.ids import check_session_id, is_session_id
from memsvc.core.records import Record
from memsvc.runtime import metrics
from memsvc.window import history, journal
from memsvc.window.derived import DerivedStore
from memsvc.window.holds import Holds
from memsvc.window.intents import Intents
from memsvc.window.session import Session

JOURNAL = ".journal"
"The journal's file in the data directory."


class Registry:
    """Every session of the data root; `derived` stores hear of every change."""

    def __init__(self, settings: Settings, *, derived: Sequence[DerivedStore], clock: Callable[[], int] = time.time_ns):
        self.settings = settings
        self.root = settings.sessions_dir
        self.clock = clock
        self.derived = tuple(derived)
        self._open: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self._registry = threading.Lock()
        durable.ensure_dir(self.root)
        durable.sweep_deleted(self.root)
        self.journal = journal.Journal(Path(settings.data_dir) / JOURNAL, self.root)
        "Makes Appends durable, many at once; replays what a crash left before anything reads a history."
        self.storage = durable.DataPaths([Path(settings.data_dir), self.root])
        "Checked before every write: the data directory must still be the one opened."
        self.intents = Intents(self.root)
        self.holds = Holds(self.root, clock)
        "Sessions held while they move to another shard: every call about one is refused (holds.py)."
        self.stored = sum(1 for entry in self.root.iterdir() if entry.is_dir() and is_session_id(entry.name))
        "Session directories on disk, counted against max_sessions."
        metrics.gauge("sessions", "Sessions stored on disk.", lambda: self.stored)
        metrics.gauge("open_sessions", "Sessions held in memory.", lambda: len(self._open))

    # -- opening -----------------------------------------------------------

    def directory(self, session_id: str) -> Path:
        """The session's directory, for every call about it: UNAVAILABLE while the session is held."""
        self.holds.refuse(check_session_id(session_id))
        return self.root / session_id

    def exists(self, session_id: str) -> bool:
        return self.directory(session_id).is_dir()

    def refuse_interrupted(self, session_id: str) -> None:
        """UNAVAILABLE while the session's interrupted Reset, removal or deletion is not completed."""
        interrupted = self.intents.interrupted(session_id)
        if interrupted is not None:
            raise Unavailable(f"an interrupted {interrupted.action.replace('_', ' ')} of session {session_id!r} is "
                              "being completed; retry shortly", reason="SESSION_BEING_CLEARED")

    def _get(self, session_id: str, resuming: bool = False) -> Session:
        if not resuming:
            self.refuse_interrupted(session_id)
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

    def in_memory(self, session_id: str) -> Session | None:
        """The session if it is open now, else None: never reads the disk or opens it."""
        with self._registry:
            return self._open.get(session_id)

    def require(self, session_id: str) -> Session:
        session = self.reading(session_id)
        if session is None:
            raise NotFound(f"session {session_id!r} does not exist", reason="SESSION_NOT_FOUND")
        return session

    # -- reading recent messages -----------------------------------------------

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

    # -- a session directory's life -------------------------------------------

    def _create(self, directory: Path) -> None:
        """Make a new session's directory if max_sessions allows one more."""
        self.holds.refuse_creation()
        with self._registry:
            self._refuse_one_more()
            self.stored += 1
        try:
            durable.make_dir(directory)
        except BaseException:
            with self._registry:
                self.stored -= 1
            raise

    def _refuse_one_more(self) -> None:
        """RESOURCE_EXHAUSTED when max_sessions are stored; the caller holds the registry's lock."""
        if self.stored >= self.settings.max_sessions:
            raise ResourceExhausted(
                f"this server already stores {self.stored} sessions (max_sessions): remove one or raise the "
                "setting; existing sessions keep working", reason="SESSION_QUOTA_EXCEEDED")

    def install(self, session_id: str, staged: Path) -> None:
        """Give an imported session, written complete in `staged`, its place in one rename, counted
        against max_sessions."""
        target = self.root / check_session_id(session_id)
        # A barrier first: no frame of an earlier session of this id is ever replayed into the imported file.
        self.journal.settle(self._journaled(session_id))
        with self._registry:
            if target.exists():
                raise AlreadyExists(f"session {session_id!r} is already stored here: remove it first to import it "
                                    "again", reason="SESSION_EXISTS")
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
        self._unregister(session, removed=False)
        for store in self.derived:
            store.closed(session.id)

    def _unregister(self, session: Session, removed: bool) -> None:
        """`session` leaves memory and, `removed`, the count of stored sessions; the caller holds its lock."""
        session.closed = True
        with self._registry:
            self.stored -= removed
            if self._open.get(session.id) is session:
                del self._open[session.id]

    def _journaled(self, session_id: str) -> str:
        """The session's history.json as the journal names it."""
        return f"{session_id}/{history.NAME}"

    def close(self) -> None:
        """After the last Append: the journal writes what waits and checkpoints."""
        self.journal.close()

