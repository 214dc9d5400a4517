"""Search within one session: routing a query to the keyword, semantic or hybrid path.

Owns which path answers which match mode, and whether a query may have to
wait (load an index, call an embedding endpoint) and so needs a thread. Must
never search itself: keyword.py, semantic.py and hybrid.py do.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from memsvc.search.hybrid import HybridSearch
from memsvc.search.keyword import KeywordSearch
from memsvc.search.query import Query, Results, bounds
from memsvc.search.semantic import SemanticSearch


class Searcher:
    def __init__(self, keyword: KeywordSearch, semantic: SemanticSearch, hybrid: HybridSearch,
                 clock: Callable[[], int] = time.time_ns):
        self.keyword = keyword
        self.semantic = semantic
        self.hybrid = hybrid
        self.clock = clock

    def may_wait(self, query: Query) -> bool:
        """Semantic and hybrid search may load a session's index or call an embedding or rerank endpoint."""
        if query.match == "keyword":
            return False
        return self.hybrid.may_wait(query) if query.match == "hybrid" else self.semantic.may_wait(query)

    def quick(self, query: Query) -> bool:
        """A semantic search that scans a small index in memory: it may run where it is asked."""
        return query.match == "semantic" and self.semantic.quick(query)

    def search(self, query: Query) -> Results:
        limits = bounds(query, self.clock())
        if query.match == "keyword":
            return self.keyword.search(query, limits)
        if query.match == "semantic":
            return self.semantic.search(query, limits)
        return self.hybrid.search(query, limits)
