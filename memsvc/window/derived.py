"""What the window asks of the stores derived from history.json (the archive,
the vectors): the protocols they implement.

history.json is the source of truth for recent messages; these stores learn
of every change through these calls and catch up in their own time. Must
never hold an implementation.
"""

from __future__ import annotations

from typing import Protocol

from memsvc.core.records import Record


class DerivedStore(Protocol):
    """A store derived from history.json.

    Every call must return quickly: the store queues work and catches up on
    its own threads.
    """

    def recover(self, session_id: str, records: list[Record]) -> None:
        """A session was opened holding `records`: add whatever of them is missing."""

    def appended(self, session_id: str, records: list[Record]) -> None:
        """`records` are durable at the end of the session."""

    def compacted(self, session_id: str, first_kept_id: int, start_at: int) -> None:
        """Messages with id < first_kept_id left history.json; start_at is the cutoff time."""

    def cleared(self, session_id: str) -> int:
        """Reset or RemoveSession: drop everything of the session; returns how much was dropped."""

    def deleted(self, session_id: str, ids: list[int]) -> int:
        """DeleteMessages: drop these messages of the session (any of them may be absent already, and
        the call may be repeated); returns how many were dropped."""

    def closed(self, session_id: str) -> None:
        """The session left memory; the next call about it is a `recover`."""


class EmbeddingSink(Protocol):
    """Takes embeddings a client supplied with its messages (the vector tier)."""

    def check(self, session_id: str, embeddings: list[list[float]]) -> None:
        """Raise if an embedding cannot be stored (wrong dimension, not finite); empty ones are absent."""

    def supplied(self, session_id: str, records: list[Record], embeddings: list[list[float]]) -> None:
        """`records` are durable; keep their embeddings. Called before DerivedStore.appended."""


class ArchiveOfRecord(DerivedStore, Protocol):
    """The derived store that becomes the source of truth for messages compacted out of history.json."""

    def flush(self, timeout: float = 5.0) -> None:
        """Return once everything handed over so far is committed (or raise an Unavailable error after
        `timeout` seconds)."""

    def check_writable(self, session_id: str | None = None) -> None:
        """Raise if a change handed over now could not be committed (a damaged index), or, given a session, if
        the archive set that session's messages aside."""

    def start_at(self, session_id: str) -> int:
        """The session's compaction cutoff (UTC ns), 0 when it was never compacted."""

    def messages(self, session_id: str, after_id: int, below_id: int, limit: int | None = None,
                 newest_first: bool = False) -> list[Record]:
        """Archived messages with after_id < id < below_id, oldest first; with `limit`, only the
        first (or `newest_first`, the last) `limit` of them."""

    def stored(self, session_id: str, ids: list[int]) -> list[Record]:
        """The archived messages with these ids, oldest first."""

    def count(self, session_id: str, below_id: int | None = None) -> int:
        """Archived messages of a session (committed ones); with `below_id`, only those with a lower id."""
