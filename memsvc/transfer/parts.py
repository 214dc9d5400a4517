"""What an exported session is made of: its head, its messages in pages, and the totals that close it.

Owns the shapes both ends of a transfer share, the page limits (by count and
by bytes, so a part always fits in one gRPC message), and the digest: count,
last id and SHA-256 over the records as msgspec encodes them, which the
importing side recomputes. Must never read or write a store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

import msgspec

from memsvc.core import replies
from memsvc.core.records import Record
from memsvc.summary.cursor import Cursor
from memsvc.summary.runs import Run

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 500, 5000
"Messages per part of an export."


class Head(msgspec.Struct, kw_only=True):
    """A session's state apart from its messages."""

    session_id: str
    next_id: int
    "The id its next message gets (above every exported id; higher after a Reset)."
    first_recent_id: int
    "The first message still in history.json; those below are archived only. 0: history.json is empty."
    start_at: int
    "The compaction cutoff the archive recorded (UTC ns), 0 when never compacted."
    summary_json: str = ""
    "summary.json as stored; empty when there is none."
    cursor: Cursor | None = None
    last_run: Run | None = None
    "How the summarizer's last run went, as the summary and its cursor go: they describe the same history."
    recent_messages: int = 0
    "How many of the messages are in history.json."
    exported_by: str = ""
    exported_at: int = 0


class End(msgspec.Struct, frozen=True):
    messages: int
    last_id: int
    sha256: str


class Part(msgspec.Struct, kw_only=True):
    """One piece of a stream: the head first, then records, then the end."""

    head: Head | None = None
    records: list[Record] = []
    end: End | None = None


_encoder = msgspec.json.Encoder()


class Digest:
    """The running totals of a stream of records."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.messages = 0
        self.last_id = 0

    def add(self, records: Iterable[Record]) -> None:
        for record in records:
            self._hash.update(_encoder.encode(record) + b"\n")
            self.messages += 1
            self.last_id = record.id

    def end(self) -> End:
        return End(self.messages, self.last_id, self._hash.hexdigest())


def page_size(requested: int) -> int:
    """0 means DEFAULT_PAGE_SIZE; more than MAX_PAGE_SIZE gets MAX_PAGE_SIZE."""
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def pages(records: list[Record], size: int, part_bytes: int) -> Iterator[list[Record]]:
    """`records` cut into runs of at most `size` messages and `part_bytes` as a reply counts them, payloads
    included (core/replies.py), so that a part reaches a client with a default receive limit; a message
    larger alone goes alone."""
    page: list[Record] = []
    used = 0
    for record in records:
        cost = replies.cost(record)
        if page and (len(page) >= size or used + cost > part_bytes):
            yield page
            page, used = [], 0
        page.append(record)
        used += cost
    if page:
        yield page
