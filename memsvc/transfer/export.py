"""Exporting one session whole: its head, then its archived and recent messages in id order, then its totals.

Owns what a session's export holds (messages with their ids, roles, times,
senders, payloads and the idempotency keys history.json keeps, summary.json
as stored, the summary cursor and last run, the compaction cutoff and the id
floor) and that it is one moment's copy: the session's recent messages, and how many
are archived below them, are taken under its lock (which a DeleteMessages
holds throughout), and the session is held against Reset, RemoveSession and
summary runs (the `exclusive` holds) until the stream ends; a DeleteMessages
of archived messages meanwhile is seen by their count and fails the export
before its end, never leaving it half applied. A Reset, removal or deletion
a crash interrupted is refused (UNAVAILABLE) here; transfer/service.py
completes it first. The archive is read a page at a time: a long session is
never in memory whole. Must never write a store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from contextlib import ExitStack

from memsvc.core import replies
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import FailedPrecondition, NotFound, Unavailable
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.lifecycle.clearing import SessionHold
from memsvc.shards.moves import Moves
from memsvc.summary.cursor import read_cursor
from memsvc.summary.runs import read_run
from memsvc.transfer.parts import Digest, Head, Part, page_size, pages
from memsvc.window.derived import ArchiveOfRecord
from memsvc.window.session import Session
from memsvc.window.store import SessionStore


class Exporter:
    def __init__(self, sessions: SessionStore, moves: Moves, archive: ArchiveOfRecord, *,
                 exclusive: Sequence[SessionHold] = (), shard_name: str = "",
                 clock: Callable[[], int] = time.time_ns, part_bytes: int = replies.DEFAULT_MAX_REPLY_BYTES):
        self.sessions = sessions
        self.part_bytes = part_bytes
        self.moves = moves
        self.archive = archive
        self.exclusive = tuple(exclusive)
        self.shard_name = shard_name
        self.clock = clock

    def export(self, session_id: str, requested_page_size: int = 0) -> Generator[Part, None, None]:
        """The session's parts, in order; NOT_FOUND before the first one when it is not stored here,
        UNAVAILABLE `SESSION_CHANGED` before the end when a DeleteMessages removed archived messages
        meanwhile (the stream then never ends whole, so no import stores it)."""
        size = page_size(requested_page_size)
        with holding(self.exclusive, session_id):
            head, recent, archived_count = self._snapshot(session_id)
            yield Part(head=head)
            digest = Digest()
            after, cut = 0, head.first_recent_id or head.next_id
            while archived := self.archive.messages(session_id, after, cut, limit=size):
                for page in pages(archived, size, self.part_bytes):
                    digest.add(page)
                    yield Part(records=page)
                after = archived[-1].id
            if digest.messages != archived_count or self.archive.count(session_id, below_id=cut) != archived_count:
                raise Unavailable(f"messages of session {session_id!r} were deleted while it was exported: export "
                                  "it again", reason=Reason.SESSION_CHANGED)
            for page in pages(recent, size, self.part_bytes):
                digest.add(page)
                yield Part(records=page)
            yield Part(end=digest.end())

    def _snapshot(self, session_id: str) -> tuple[Head, list[Record], int]:
        """The session's head, its recent messages and how many are archived below them, as they are now."""
        exported_at = self.clock()
        if self.moves.holds.held(session_id):  # a move: nothing changes it, it is read from disk
            if not self.moves.stores(session_id):
                raise NotFound(f"session {session_id!r} is not stored here (it is held for an import)",
                               reason=Reason.SESSION_NOT_FOUND)
            session = self.moves.held_copy(session_id)
            recent, next_id = list(session.records), session.next_id
            archived = self.archive.count(session_id, below_id=recent[0].id if recent else next_id)
        else:
            self.sessions.require(session_id)
            # Under the lock a DeleteMessages holds from its intent to its end: one moment of both tiers.
            with self.sessions.writing(session_id) as session:
                recent, next_id = list(session.records), session.next_id
                archived = self.archive.count(session_id, below_id=recent[0].id if recent else next_id)
        head = Head(session_id=session_id, next_id=next_id, first_recent_id=recent[0].id if recent else 0,
                    start_at=self.archive.start_at(session_id), summary_json=_summary_text(session),
                    cursor=read_cursor(session.cursor_path), last_run=read_run(session.summary_run_path),
                    recent_messages=len(recent),
                    exported_by=self.shard_name, exported_at=exported_at)
        return head, recent, archived


def _summary_text(session: Session) -> str:
    try:
        return session.summary_path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError:
        raise FailedPrecondition(f"summary.json of session {session.id!r} is not UTF-8 text: fix or delete it to "
                                 "export the session", reason=Reason.SUMMARY_UNREADABLE) from None


def holding(exclusive: Sequence[SessionHold], session_id: str, deadline: Deadline = UNBOUNDED) -> ExitStack:
    """Every one of `exclusive` held on the session (each waited for within `deadline`), for a `with` block."""
    with ExitStack() as stack:
        for hold in exclusive:
            stack.enter_context(hold(session_id, deadline))
        return stack.pop_all()  # the caller's block releases them; a failure here releases those taken
