"""What a shard does about the sessions it stores: say where one is, export, import, hold and release them.

Owns the order of a hold (an interrupted Reset, removal or deletion of the
session is completed first, and so before an export; a summary run in
flight on the session finishes next, then the session's writers, then the hold is recorded) and of a
release with drop (the derived stores are cleared, then the files, and the
hold ends last, so a crash half way leaves a held session that the next
release finishes), and the pause of session creation. Must never choose
which sessions move or where: the resharding tool asks the proxy.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Sequence

import msgspec

from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import FailedPrecondition
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.lifecycle.clearing import Clearing, Deleted, SessionHold
from memsvc.shards.moves import Moves
from memsvc.transfer.export import Exporter, holding
from memsvc.transfer.parts import Part
from memsvc.transfer.restore import Imported, Importer
from memsvc.window.derived import ArchiveOfRecord, DerivedStore
from memsvc.window.lister import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

log = logging.getLogger(__name__)


class Placement(msgspec.Struct):
    stored: bool
    held: bool
    hold_until: int
    "When its hold's lease ends (UTC ns); 0 when not held, or held by an import in progress only."


class Released(msgspec.Struct):
    was_held: bool
    deleted: Deleted | None


class Transfers:
    """`exclusive` are held by a hold and a drop, so other writers of a session's files (the
    summarizer) finish first."""

    def __init__(self, clearing: Clearing, moves: Moves, archive: ArchiveOfRecord, derived: Sequence[DerivedStore],
                 exporter: Exporter, importer: Importer, *, exclusive: Sequence[SessionHold] = ()):
        self.clearing = clearing
        self.derived = tuple(derived)
        self.moves = moves
        self.archive = archive
        self.exporter = exporter
        self.importer = importer
        self.exclusive = tuple(exclusive)

    def placement(self, session_id: str) -> Placement:
        lease = self.moves.holds.lease(session_id)
        return Placement(self.moves.stores(session_id), self.moves.holds.held(session_id),
                         lease.until if lease is not None else 0)

    def export(self, session_id: str, page_size: int = 0) -> Generator[Part, None, None]:
        """The session's parts; a Reset, removal or deletion a crash interrupted is completed first
        (on the generator's first step, so off the caller's event loop)."""
        self.clearing.finish_interrupted(check_session_id(session_id))
        yield from self.exporter.export(session_id, page_size)

    def restore(self, parts: Iterable[Part], deadline: Deadline = UNBOUNDED) -> Imported:
        return self.importer.restore(parts, deadline)

    def hold(self, session_id: str, deadline: Deadline = UNBOUNDED) -> bool:
        """Hold the session still, once an interrupted Reset, removal or deletion of it is completed, or
        renew its hold's lease; returns whether it is stored here. Waits within `deadline`, and holds
        nothing once it passed."""
        self.clearing.finish_interrupted(check_session_id(session_id))
        with holding(self.exclusive, session_id, deadline):
            return self.moves.hold(session_id, deadline)

    def lapse(self) -> list[str]:
        """End the holds whose lease ran out (the job, each minute): a reservation's import is aborted (the
        session dropped from every store), then a stored session's hold is released; returns their ids."""
        ended = []
        for lease in self.moves.holds.lapsed():
            if lease.reserved and self.moves.stores(lease.session_id):
                self.release(lease.session_id, drop=True)
                log.warning("hold lease lapsed", extra={
                    "session": lease.session_id, "effect": "the move was not released in time: its import is aborted"})
            else:
                self.moves.holds.release(lease.session_id)
                log.warning("hold lease lapsed", extra={
                    "session": lease.session_id, "effect": "the session is served here again"})
            ended.append(lease.session_id)
        return ended

    def release(self, session_id: str, drop: bool, deadline: Deadline = UNBOUNDED) -> Released:
        """End the session's hold; with `drop`, remove it from every store first (it moved away)."""
        check_session_id(session_id)
        deleted = None
        if drop:
            if not self.moves.holds.durable(session_id):
                raise FailedPrecondition(f"session {session_id!r} is not held: only a held session is dropped "
                                         "(RemoveSession removes a live one)", reason=Reason.SESSION_NOT_HELD)
            deleted = Deleted()
            with holding(self.exclusive, session_id, deadline):
                deadline.check(f"dropping session {session_id!r}")
                for store in self.derived:
                    count = store.cleared(session_id)
                    if store is self.archive:
                        deleted.archived_messages = count
                    else:
                        deleted.vectors += count
                if self.moves.stores(session_id):
                    deleted.history_messages, deleted.summary = self.moves.drop(session_id)
        return Released(self.moves.holds.release(session_id), deleted)

    def held_page(self, page_size: int, page_token: str) -> tuple[list[str], str]:
        if page_token:
            check_session_id(page_token)
        return self.moves.holds.page(min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE), page_token)

    def pause_creation(self, seconds: int) -> int:
        return self.moves.holds.pause.pause_creation(seconds)
