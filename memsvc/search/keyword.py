"""Keyword search: archived messages (Tantivy) and recent ones (history.json)
ranked together on one BM25 scale.

Owns splitting the work between the tiers (archive below the first message of
history.json, the in-memory recent messages from there on, so nothing is
returned twice), scoring recent messages with the archive's statistics, and
reading the conversation around hits (archived neighbours from the archive,
recent ones from history.json). Must never touch an index directly:
archive/index.py owns it.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from memsvc.archive import keywords
from memsvc.archive.index import Archive
from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.runtime import tracing
from memsvc.search.expansion import AFTER, BEFORE, expand
from memsvc.search.query import Bounds, Explanation, Hit, Placement, Query, Results, explained
from memsvc.search.recent import RecentIndexes, RecentTerms
from memsvc.window.reading import SessionReader


class LoopBudget(msgspec.Struct, frozen=True):
    """What a keyword search may read and still run on the event loop (a pool hop costs ~0.2 ms, as much as
    a warm search): its work is bounded before it starts by the postings its tokens hold, not by its words."""

    text_chars: int = 512
    tokens: int = 8
    archive_postings: int = 100_000
    "Tantivy reads this many postings in ~0.1 ms; a session filter only skips within them."
    recent_postings: int = 2_000
    "Recent matches are scored in Python, ~0.3 us a posting."
    unindexed: int = 16
    "Recent messages not yet in the session's term index, tokenized before the search."


LOOP_BUDGET = LoopBudget()


class Found(msgspec.Struct):
    """Ranked keyword hits, best first, and where history.json starts."""

    hits: list[Hit]
    recent: list[Record]
    cut: int
    "Ids below this are archived."


class KeywordSearch:
    def __init__(self, sessions: SessionReader, archive: Archive, loop_budget: LoopBudget = LOOP_BUDGET):
        self.sessions = sessions
        self.archive = archive
        self.loop_budget = loop_budget
        self.recent_terms = RecentIndexes()

    def placement(self, query: Query) -> Placement:
        """The loop when the search is within `loop_budget`: the session open with its recent terms indexed
        (nothing to load or build), a short query of few tokens, few postings, no context to read; else the
        pool."""
        budget = self.loop_budget
        if query.with_context or len(query.text) > budget.text_chars:
            return "pool"
        session = self.sessions.in_memory(query.session_id)
        unindexed = None if session is None else self.recent_terms.unindexed(session)
        if session is None or unindexed is None or unindexed > budget.unindexed:
            return "pool"
        terms = keywords.parse(query.text, query.require_all_words)
        tokens = {token for term in terms.terms for token in term.tokens}
        if not tokens or len(tokens) > budget.tokens:
            return "pool"
        index = self.recent_terms.of(session)
        if sum(index.doc_freq(token) for token in tokens) > budget.recent_postings:
            return "pool"
        archived = self.archive.statistics(terms).doc_freq
        return "loop" if sum(archived.values()) <= budget.archive_postings else "pool"

    def search(self, query: Query, limits: Bounds) -> Results:
        """Matches best first; with `with_context`, in runs with their neighbours instead."""
        found = self.ranked(query, limits)
        hits = found.hits
        if query.with_context:
            hits = self.in_context(query.session_id, found, {hit.record.id: hit.score for hit in found.hits})
        if query.explain:
            hits = explained(hits, {hit.record.id: Explanation(keyword_rank=place, keyword_score=hit.score)
                                    for place, hit in enumerate(found.hits, start=1)})
        return Results(hits)

    @tracing.traced("search.keyword")
    def ranked(self, query: Query, limits: Bounds) -> Found:
        """The best `limits.limit` archived messages (below history.json) and recent ones, best first.

        Recent messages are scored with the archive's BM25 statistics so both
        kinds rank on one scale; ties go to the newer message.
        """
        terms = keywords.parse(query.text, query.require_all_words)
        if not terms:
            raise InvalidArgument("a keyword search needs at least one word", reason=Reason.EMPTY_QUERY)
        session = self.sessions.reading(query.session_id)
        if session is None:
            return Found([], [], 1)
        recent = session.records
        cut = recent[0].id if recent else session.next_id
        index = self.recent_terms.of(session)
        statistics = self._statistics(terms, index)
        hits = [Hit(record, "archive", score) for record, score in self.archive.search(
            query.session_id, terms, statistics, cut, limits.since, limits.until, limits.limit)]
        hits += self._recent_matches(index, terms, statistics, limits)
        hits.sort(key=lambda hit: (-hit.score, -hit.record.id))
        return Found(hits[:limits.limit], recent, cut)

    def _statistics(self, query: keywords.KeywordQuery, index: RecentTerms) -> keywords.Statistics:
        """The archive's counts (every session's messages), which both tiers score with."""
        archived = self.archive.statistics(query)
        # The archive counts the recent messages too once it has committed them; until then (a burst of
        # appends) the recent index's own counts keep rare words rare.
        doc_freq = {token: max(count, index.doc_freq(token)) for token, count in archived.doc_freq.items()}
        return keywords.Statistics(doc_freq, max(archived.total_docs, len(index.lengths)), index.average_tokens)

    def _recent_matches(self, index: RecentTerms, query: keywords.KeywordQuery, statistics: keywords.Statistics,
                        limits: Bounds) -> list[Hit]:
        tokenized: dict[int, list[str]] = {}
        frequencies = [index.frequencies(term, tokenized) for term in query.terms]
        required = len(query.required)
        if required:
            candidates = set.intersection(*(set(found) for found in frequencies[:required]))
        else:
            candidates = set().union(*frequencies)
        records = index.records
        candidates = {at for at in candidates if limits.contains(records[at].send_at)}
        if not candidates:
            return []
        scores = dict.fromkeys(candidates, 0.0)
        for term, found in zip(query.terms, frequencies, strict=True):
            for at in candidates.intersection(found):
                scores[at] += keywords.term_score(found[at], index.lengths[at], term, statistics)
        return [Hit(records[at], "recent", score) for at, score in scores.items()]

    def in_context(self, session_id: str, found: Found, scores: dict[int, float]) -> list[Hit]:
        """The hits in `scores` with their neighbours (archived ones from the archive), in runs."""
        archived = sorted(id_ for id_ in scores if id_ < found.cut)
        records = self.neighbourhoods(session_id, archived, found.cut) + found.recent
        return expand(records, scores, archived_below=found.cut)

    def neighbourhoods(self, session_id: str, ids: Iterable[int], cut: int) -> list[Record]:
        """Archived messages around each of `ids` (2 before, 1 after, below `cut`), by id, once each."""
        spans: list[list[int]] = []
        for id_ in sorted(ids):
            low, high = max(1, id_ - BEFORE), min(id_ + AFTER, cut - 1)
            if spans and low <= spans[-1][1] + 1:
                spans[-1][1] = max(spans[-1][1], high)
            else:
                spans.append([low, high])
        records: list[Record] = []
        for low, high in spans:
            records += self.archive.messages(session_id, low - 1, high + 1)
        return records
