"""Search within one session: the query, its time range, and routing to
the keyword path (archive + recent messages) or the semantic path (vectors).

Owns what a query means (limits, time ranges, which tier answers) and the
shape of a hit. Must never touch an index directly: archive.py and
vectors.py own theirs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal, Protocol

import msgspec

from . import keywords
from .archive import Archive
from .errors import InvalidArgument
from .history import Record
from .sessions import Session, Sessions, check_session_id

DEFAULT_LIMIT = 8
MAX_LIMIT = 32
MAX_QUERY_CHARS = 1024
DAY_NS = 86_400 * 1_000_000_000
TIME_RANGES = {"all": 0, "1d": DAY_NS, "7d": 7 * DAY_NS, "1m": 30 * DAY_NS, "1y": 365 * DAY_NS}

Match = Literal["semantic", "keyword", "hybrid"]
SourceName = Literal["recent", "archive"]


class Query(msgspec.Struct, kw_only=True):
    session_id: str
    text: str = ""
    match: Match = "semantic"
    limit: int = 0
    "0 means the default."
    time_range: str = "all"
    "One of TIME_RANGES; ignored when since or until is set."
    since: int = 0
    "UTC Unix nanoseconds, inclusive; 0 = no bound."
    until: int = 0
    "UTC Unix nanoseconds, exclusive; 0 = no bound."
    include_window: bool = False
    "Semantic: also return messages of the current window."
    vector: list[float] = []
    "Semantic: a query embedding supplied by the client."


class Hit(msgspec.Struct):
    record: Record
    source: SourceName
    score: float = 0.0
    is_context: bool = False
    run: int = 0


class Results(msgspec.Struct):
    hits: list[Hit]
    unsearched: int = 0
    "Semantic and hybrid: qualifying messages not searched because their embedding is pending or failing."


class SemanticPath(Protocol):
    """The vector side of search (semantic.py)."""

    def semantic(self, query: Query, limits: Bounds) -> Results: ...

    def hybrid(self, query: Query, limits: Bounds, keyword: Callable[[Query, Bounds], list[Hit]]) -> Results: ...

    def may_wait(self, query: Query) -> bool: ...


class Bounds(msgspec.Struct, frozen=True):
    """A checked query: limit resolved, time window as [since, until)."""

    limit: int
    since: int
    until: int

    def contains(self, send_at: int) -> bool:
        return self.since <= send_at < self.until


def bounds(query: Query, now: int) -> Bounds:
    check_session_id(query.session_id)
    if query.limit < 0 or query.limit > MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT} (0 for the default {DEFAULT_LIMIT})",
                              reason="INVALID_LIMIT")
    if len(query.text) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters", reason="QUERY_TOO_LONG")
    if query.since < 0 or query.until < 0:
        raise InvalidArgument("since and until must not be negative", reason="INVALID_TIME_RANGE")
    if query.since or query.until:
        since, until = query.since, query.until or 2**63 - 1
        if since >= until:
            raise InvalidArgument("since must be before until", reason="INVALID_TIME_RANGE")
    else:
        if query.time_range not in TIME_RANGES:
            raise InvalidArgument(f"time_range must be one of {', '.join(TIME_RANGES)}", reason="INVALID_TIME_RANGE")
        span = TIME_RANGES[query.time_range]
        since, until = (now - span if span else 0), 2**63 - 1
    return Bounds(query.limit or DEFAULT_LIMIT, since, until)


class Searcher:
    def __init__(self, sessions: Sessions, archive: Archive, semantic: SemanticPath,
                 clock: Callable[[], int] = time.time_ns):
        self.sessions = sessions
        self.archive = archive
        self.semantic = semantic
        self.clock = clock

    def may_wait(self, query: Query) -> bool:
        """Semantic and hybrid search may load a session's index or call an embedding endpoint."""
        return query.match != "keyword" and self.semantic.may_wait(query)

    def search(self, query: Query) -> Results:
        limits = bounds(query, self.clock())
        if query.match == "keyword":
            return Results(self.keyword(query, limits))
        if query.match == "semantic":
            return self.semantic.semantic(query, limits)
        return self.semantic.hybrid(query, limits, self.keyword)

    def keyword(self, query: Query, limits: Bounds) -> list[Hit]:
        """Archived messages (below the first one in history.json) plus recent ones, best first.

        Recent messages are scored with the archive's BM25 statistics so both
        kinds rank on one scale; ties go to the newer message.
        """
        words = keywords.parse(query.text)
        if not words:
            raise InvalidArgument("a keyword search needs at least one word", reason="EMPTY_QUERY")
        session = self.sessions.reading(query.session_id)
        if session is None:
            return []
        recent = list(session.records)
        cut = recent[0].id if recent else session.next_id
        hits = [Hit(record, "archive", score) for record, score in
                self.archive.search(query.session_id, words, cut, limits.since, limits.until, limits.limit)]
        hits += self._recent_matches(session, recent, words, limits)
        hits.sort(key=lambda hit: (-hit.score, -hit.record.id))
        return hits[:limits.limit]

    def _recent_matches(self, session: Session, recent: list[Record], words: list[keywords.Word],
                        limits: Bounds) -> list[Hit]:
        # Every token of every word must appear in the lowered text: a cheap filter before tokenizing.
        needles = [token for word in words for token in word.tokens]
        candidates = [record for record in recent if limits.contains(record.send_at)
                      and all(needle in session.lowered(record) for needle in needles)]
        matches = [record for record in candidates if keywords.contains(record.content, words)]
        if not matches:
            return []
        doc_freq, total = self.archive.statistics(words)
        average = sum(len(keywords.tokenize(record.content)) for record in matches) / len(matches)
        return [Hit(record, "recent", keywords.bm25(record.content, words, doc_freq, max(total, len(matches)),
                                                    average)) for record in matches]
