"""Sessions on the move: holding one still, reading it while held, and the staging of imports.

Owns the order of a hold (the writes in flight finish, the hold is recorded,
the open copy leaves memory, so a held session is only ever read from disk),
the rule that only a held session is read or dropped by a move, and
`sessions/.importing-<session directory name>/`, where an imported session
is written complete (history.json, the id floor and, for a hashed name, the
id record here; the summary tier's files by their owner) before the store
gives it its place in one rename. Must never touch the derived stores or
decide what moves: the transfer package does.
"""

from __future__ import annotations

from pathlib import Path

from memsvc.core import durable, layout
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import FailedPrecondition, storage_error
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.shards.holds import Holds
from memsvc.window import history
from memsvc.window.rewriter import Rewriter
from memsvc.window.session import Session
from memsvc.window.store import SessionStore


class Moves:
    def __init__(self, store: SessionStore, rewriter: Rewriter, holds: Holds):
        self.store = store
        self.rewriter = rewriter
        self.holds = holds
        self.places = store.places

    def stores(self, session_id: str) -> bool:
        """Whether the session's directory is here, held or not."""
        return self.places.session_dir(check_session_id(session_id)).is_dir()

    def hold(self, session_id: str, deadline: Deadline = UNBOUNDED) -> bool:
        """Hold the session once the writes in flight are done (waiting within `deadline`), or renew its
        hold's lease; returns whether it is stored here (False: the hold reserves the id for an import)."""
        if self.holds.durable(check_session_id(session_id)):
            deadline.check(f"renewing the hold of session {session_id!r}")
            self.holds.hold(session_id, self.stores(session_id))
        else:
            with self.store.writing(session_id, deadline=deadline) as session:
                deadline.check(f"holding session {session_id!r}")
                self.holds.hold(session_id, self.stores(session_id))
                self.store.forget(session)
        return self.stores(session_id)

    def held_copy(self, session_id: str) -> Session:
        """The held session as stored, read afresh and never shared: nothing else reads or writes it."""
        if not self.holds.held(check_session_id(session_id)):
            raise FailedPrecondition(f"session {session_id!r} is not held: hold it first (HoldSession)",
                                     reason=Reason.SESSION_NOT_HELD)
        self.store.intents.refuse_interrupted(session_id)  # its files are half way through a Reset or deletion
        return Session(session_id, self.places.session_dir(session_id))

    def drop(self, session_id: str) -> tuple[int, bool]:
        """Delete the held session's files (the caller cleared its derived stores first); returns
        (messages that were in history.json, whether it had a summary)."""
        session = self.held_copy(session_id)
        removed = len(session.records), session.summary_path.exists()
        self.rewriter.remove(session)
        return removed

    # -- imports -----------------------------------------------------------------

    def staging(self, session_id: str) -> Staging:
        """An empty session directory to write an import into, on the data root's file system."""
        path = self._staging_path(session_id)
        try:
            durable.remove_tree(path)
            durable.ensure_dir(path)
            if layout.is_hashed(path.name.removeprefix(layout.STAGING)):
                layout.record_id(path / layout.ID_FILE, session_id)
        except OSError as exc:
            raise storage_error(exc, f"importing session {session_id}") from exc
        return Staging(session_id, path)

    def install(self, session_id: str) -> None:
        self.store.install(session_id, self._staging_path(session_id))

    def staged(self) -> list[str]:
        """Sessions whose import stopped before it was installed (a crash): their staging is left. A staging
        directory a kill left before its id was recorded holds nothing yet, and is removed here."""
        named = self.places.besides(layout.STAGING)
        for leftover in set(self.places.sessions_dir.glob(f"{layout.STAGING}*")) - {path for _, path in named}:
            durable.remove_tree(leftover)
        return [session_id for session_id, _ in named]

    def discard_staging(self, session_id: str) -> None:
        durable.remove_tree(self._staging_path(session_id))

    def _staging_path(self, session_id: str) -> Path:
        return self.places.beside(layout.STAGING, check_session_id(session_id))


class Staging:
    """An imported session's directory while it is written: its recent messages and id floor."""

    def __init__(self, session_id: str, directory: Path):
        self.session_id = session_id
        self.directory = directory
        self.history_path = directory / layout.HISTORY
        self.size = 0
        "Bytes of the staged history.json."

    def append(self, records: list[Record]) -> None:
        """Add messages at the end of history.json, durably."""
        try:
            self.size = history.append(self.history_path, self.size, records)
        except OSError as exc:
            raise storage_error(exc, f"importing session {self.session_id}") from exc

    def records(self) -> list[Record]:
        """What the staged history.json holds."""
        return history.load(self.history_path).records

    def replace(self, records: list[Record]) -> None:
        """history.json holds exactly `records` (the older ones are in the archive only)."""
        try:
            self.size = history.rewrite(self.history_path, records)
        except OSError as exc:
            raise storage_error(exc, f"importing session {self.session_id}") from exc

    def keep_next_id(self, next_id: int) -> None:
        """Ids go on from `next_id`, whatever history.json holds (they never repeat in a session)."""
        try:
            durable.atomic_write(self.directory / layout.NEXT_ID, str(next_id).encode())
        except OSError as exc:
            raise storage_error(exc, f"importing session {self.session_id}") from exc
