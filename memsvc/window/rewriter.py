"""Every change to a session's files besides an Append: cuts, deletions, Reset and removal.

Owns rewriting history.json without some of its messages (a compaction's
`trim`, a DeleteMessages' `drop`), deleting it (a Reset's `clear`, keeping
or deleting the summary tier's files), replacing what it holds (a
ReplaceMessages' `replace`, with the summary tier's files deleted) or the
whole directory (`remove`), and
the id floor `.next_id` those leave behind, so ids never repeat. Each
settles the session's history.json in the journal first, so no frame of it
is replayed into what replaces it. The caller holds the session's lock; the
lifecycle package decides when. Must never decide which messages go, nor
touch a derived store.
"""

from __future__ import annotations

from memsvc.core import durable
from memsvc.core.errors import storage_error
from memsvc.core.records import Record
from memsvc.window import history
from memsvc.window.session import Session
from memsvc.window.store import SessionStore


class Rewriter:
    """The caller of each method holds `session.lock` throughout."""

    def __init__(self, store: SessionStore):
        self.store = store
        self.journal = store.journal

    def trim(self, session: Session, cut: int) -> list[Record]:
        """Drop the first `cut` records from history.json; returns them."""
        removed, kept = session.records[:cut], session.records[cut:]
        try:
            self.journal.settle(self.store.journaled(session))
            size = history.rewrite(session.history_path, kept)
        except OSError as exc:
            raise storage_error(exc, f"compacting session {session.id}") from exc
        session.replaced(kept, size, forget_keys=False)
        return removed

    def drop(self, session: Session, ids: set[int], next_id: int) -> list[Record]:
        """Delete the records with these ids from history.json, ids continuing from `next_id`; returns them."""
        removed = [record for record in session.records if record.id in ids]
        if not removed:
            return []
        kept = [record for record in session.records if record.id not in ids]
        try:
            self._raise_floor(session, next_id)
            self.journal.settle(self.store.journaled(session))
            size = history.rewrite(session.history_path, kept)
        except OSError as exc:
            raise storage_error(exc, f"deleting messages of session {session.id}") from exc
        session.replaced(kept, size, forget_keys=True)
        return removed

    def _raise_floor(self, session: Session, next_id: int) -> None:
        """Ids never go below `next_id`, even once history.json no longer holds the newest of them."""
        next_id = max(next_id, session.next_id)
        if next_id > session.floor_id:
            durable.atomic_write(session.next_id_path, str(next_id).encode())
            session.floor_raised(next_id)

    def clear(self, session: Session, drop_summary: bool, next_id: int) -> tuple[int, bool]:
        """Delete history.json (and summary.json with its cursor and last run), ids continuing from `next_id`;
        returns (messages deleted, summary deleted)."""
        count = len(session.records)
        try:
            self._raise_floor(session, next_id)
            self.journal.settle(self.store.journaled(session))
            durable.remove_file(session.history_path)
            summary_deleted = drop_summary and _drop_summary(session)
        except OSError as exc:
            raise storage_error(exc, f"resetting session {session.id}") from exc
        session.replaced([], 0, forget_keys=True)
        return count, summary_deleted

    def replace(self, session: Session, records: list[Record], next_id: int) -> tuple[int, bool]:
        """Make history.json hold exactly `records` (ids from `next_id` on, given), deleting summary.json with
        its cursor and last run; returns (messages deleted, summary deleted). Run again after a kill, it ends the
        same."""
        count = len([record for record in session.records if record.id < next_id])
        try:
            self._raise_floor(session, next_id)
            self.journal.settle(self.store.journaled(session))
            size = history.rewrite(session.history_path, records) if records else 0
            if not records:
                durable.remove_file(session.history_path)
            summary_deleted = _drop_summary(session)
        except OSError as exc:
            raise storage_error(exc, f"replacing the history of session {session.id}") from exc
        session.rewritten(list(records), size)
        return count, summary_deleted

    def remove(self, session: Session) -> None:
        """Delete the session's directory and forget it."""
        existed = session.directory.is_dir()
        try:
            self.journal.settle(self.store.journaled(session))
            durable.remove_tree(session.directory)
        except OSError as exc:
            raise storage_error(exc, f"removing session {session.id}") from exc
        self.store.unregister(session, removed=existed)


def _drop_summary(session: Session) -> bool:
    """Delete the summary tier's files: summary.json (True when it was there), its cursor and its last run's
    record, which describe the history that goes."""
    deleted = durable.remove_file(session.summary_path)
    durable.remove_file(session.cursor_path)
    durable.remove_file(session.summary_run_path)
    return deleted
