"""Search within one session: routing a query to the keyword, semantic or hybrid path.

Owns which path answers which match mode, and whether a query may have to
wait (load an index, call an embedding endpoint) and so needs a thread,
which tier an explained hit came from, and that every answer keeps within
max_reply_bytes. Must never search itself: keyword.py, semantic.py and hybrid.py do.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from memsvc.core import replies
from memsvc.search import budget
from memsvc.search.hybrid import HybridSearch
from memsvc.search.keyword import KeywordSearch
from memsvc.search.query import Hit, Placement, Query, Results, Tier, bounds
from memsvc.search.semantic import SemanticSearch


class Searcher:
    def __init__(self, keyword: KeywordSearch, semantic: SemanticSearch, hybrid: HybridSearch,
                 clock: Callable[[], int] = time.time_ns, *, reply_bytes: int = replies.DEFAULT_MAX_REPLY_BYTES):
        self.keyword = keyword
        self.reply_bytes = reply_bytes
        self.semantic = semantic
        self.hybrid = hybrid
        self.clock = clock

    def placement(self, query: Query) -> Placement:
        """Semantic and hybrid search may load a session's index or call an embedding or rerank endpoint;
        keyword search computes, on the loop when it is known to be short."""
        if query.mode == "keyword":
            return self.keyword.placement(query)
        if query.mode == "hybrid":
            return "thread" if self.hybrid.may_wait(query) else "pool"
        return self.semantic.placement(query)

    def search(self, query: Query) -> Results:
        """The hits, within max_reply_bytes (budget.py)."""
        found = self._found(query)
        if query.explain:
            found = msgspec.structs.replace(found, hits=self._with_tiers(query.session_id, found.hits))
        return budget.within(found, self.reply_bytes, query.omit_payloads)

    def _found(self, query: Query) -> Results:
        limits = bounds(query, self.clock())
        if query.mode == "keyword":
            return self.keyword.search(query, limits)
        if query.mode == "semantic":
            return self.semantic.search(query, limits)
        return self.hybrid.search(query, limits)

    def _with_tiers(self, session_id: str, hits: list[Hit]) -> list[Hit]:
        """Explained hits told apart by tier: a recent message is in the window when the agent's context
        (GetContext) holds it."""
        window = self.semantic.sessions.window(session_id)
        window_from = window[0].id if window else None

        def tier(hit: Hit) -> Tier:
            if hit.source == "archive":
                return "archive"
            return "window" if window_from is not None and hit.record.id >= window_from else "recent"

        return [msgspec.structs.replace(hit, explanation=msgspec.structs.replace(hit.explanation, tier=tier(hit)))
                if hit.explanation is not None else hit for hit in hits]
