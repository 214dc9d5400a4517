"""A session's whole conversation, read across the compaction cut.

Owns reading every message after a given id, and the pages ListMessages
returns (oldest first, or from the newest back; at most a page size, and
within max_reply_bytes as core/replies.py counts them): from the archive below the first message
of history.json, then from history.json, so a reader that fell behind the
cut (the summarizer) misses nothing. Must never write.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from memsvc.core import replies
from memsvc.core.errors import InvalidArgument
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.window.derived import ArchiveOfRecord
from memsvc.window.lister import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from memsvc.window.reading import SessionReader


class Page(msgspec.Struct):
    records: list[Record]
    "Oldest first."
    next_token: str
    "Empty on the last page."


class Transcript:
    def __init__(self, sessions: SessionReader, archive: ArchiveOfRecord, *,
                 reply_bytes: int = replies.DEFAULT_MAX_REPLY_BYTES):
        self.sessions = sessions
        self.archive = archive
        self.reply_bytes = reply_bytes

    def messages_after(self, session_id: str, after_id: int) -> list[Record]:
        """Every message with id > after_id, oldest first."""
        recent = self.sessions.records_after(session_id, after_id)
        session = self.sessions.reading(session_id)
        if session is None:
            return recent
        cut = recent[0].id if recent else session.next_id
        return self.archive.messages(session_id, after_id, cut) + recent

    def page(self, session_id: str, page_size: int, page_token: str, newest_first: bool = False,
             omit_payloads: bool = False) -> Page:
        """One page of the session's messages; the token is the id the next page starts beyond.

        `page_size` 0 means DEFAULT_PAGE_SIZE; more than MAX_PAGE_SIZE gets MAX_PAGE_SIZE. A page ends early
        before it would pass max_reply_bytes; a first message that alone does not fit is
        MESSAGE_TOO_LARGE_FOR_REPLY.
        """
        check_session_id(session_id)
        size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        bound = _bound(page_token)
        session = self.sessions.reading(session_id)
        if session is None:
            return Page([], "")
        with session.lock:
            recent, next_id = list(session.records), session.next_id
        cut = recent[0].id if recent else next_id
        wanted = size + 1  # one more than the page: whether another page follows
        if newest_first:
            below = bound or next_id
            newer = [record for record in recent if record.id < below][-wanted:]
            floor = min(cut, below)
            older = (self.archive.messages(session_id, 0, floor, limit=wanted - len(newer), newest_first=True)
                     if len(newer) < wanted and floor > 1 else [])
            return _newest_page(self._shown((older + newer)[-wanted:], omit_payloads), size, self.reply_bytes)
        after = bound or 0
        # (the archive is asked only when it can hold some: a damaged one then refuses)
        older = self.archive.messages(session_id, after, cut, limit=wanted) if cut - after > 1 else []
        newer = [record for record in recent if record.id > after][:wanted - len(older)]
        return _oldest_page(self._shown(older + newer, omit_payloads), size, self.reply_bytes)

    @staticmethod
    def _shown(records: list[Record], omit_payloads: bool) -> list[Record]:
        return replies.without_payloads(records) if omit_payloads else records


def _bound(page_token: str) -> int:
    if not page_token:
        return 0
    try:
        bound = int(page_token)
    except ValueError:
        bound = 0
    if not 0 < bound < 2**63 or str(bound) != page_token:
        raise InvalidArgument("page_token is not one this server gave: pass next_page_token back as it came",
                              reason=Reason.INVALID_PAGE_TOKEN)
    return bound


def _fitting(records: Iterable[Record], size: int, reply_bytes: int) -> int:
    """How many of `records`, in the order given, one page takes: at least one, or MESSAGE_TOO_LARGE_FOR_REPLY."""
    taken = used = 0
    for record in records:
        used += replies.cost(record)
        if taken == size:
            break
        if used > reply_bytes:
            if not taken:
                raise replies.too_large(record, reply_bytes)
            break
        taken += 1
    return taken


def _oldest_page(records: list[Record], size: int, reply_bytes: int) -> Page:
    page = records[:_fitting(records, size, reply_bytes)]
    return Page(page, str(page[-1].id) if len(page) < len(records) else "")


def _newest_page(records: list[Record], size: int, reply_bytes: int) -> Page:
    page = records[len(records) - _fitting(reversed(records), size, reply_bytes):]
    return Page(page, str(page[0].id) if len(page) < len(records) else "")
