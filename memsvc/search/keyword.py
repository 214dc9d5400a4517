"""Keyword search: archived messages (Tantivy) and recent ones (history.json)
ranked together on one BM25 scale.

Owns splitting the work between the tiers (archive below the first message of
history.json, the in-memory recent messages from there on, so nothing is
returned twice) and scoring recent messages with the archive's statistics.
Must never touch an index directly: archive/index.py owns it.
"""

from __future__ import annotations

from memsvc.archive import keywords
from memsvc.archive.index import Archive
from memsvc.core.errors import InvalidArgument
from memsvc.core.records import Record
from memsvc.search.query import Bounds, Hit, Query
from memsvc.window.session import Session
from memsvc.window.sessions import Sessions


class KeywordSearch:
    def __init__(self, sessions: Sessions, archive: Archive):
        self.sessions = sessions
        self.archive = archive

    def search(self, query: Query, limits: Bounds) -> list[Hit]:
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
