"""Semantic search within one session: the query vector, which messages
qualify, and the nearest of them as runs of conversation.

Owns turning a query into a vector (the embedder, or the client's
query_embedding) and which messages qualify (time range, compaction floor,
the current window unless asked for). Must never touch an index:
vectors/store.py answers nearest-neighbour questions.
"""

from __future__ import annotations

import numpy as np

from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.runtime import tracing
from memsvc.search.expansion import expand
from memsvc.search.query import Bounds, Explanation, Placement, Query, Results, explained, ranked
from memsvc.vectors.embedders.base import Embedder
from memsvc.vectors.generation import EXACT_ITEMS, Eligible
from memsvc.vectors.store import Nearest, VectorStore
from memsvc.window.reading import SessionReader


class SemanticSearch:
    def __init__(self, sessions: SessionReader, vectors: VectorStore, embedder: Embedder, *, window_size: int):
        self.sessions = sessions
        self.window_size = window_size
        "max_history_messages: the window a search skips unless asked."
        self.vectors = vectors
        self.embedder = embedder

    def placement(self, query: Query) -> Placement:
        """A thread unless the embedder is instant (or the client sent the vector) and the index is in
        memory with nothing pending; then the loop when that is one exact scan of at most EXACT_ITEMS
        vectors (~0.2-0.4 ms at 10,000 of 256 dimensions, less than the hop to a thread and back)."""
        rows = self.vectors.ready_rows(query.session_id) if query.vector or self.embedder.instant else None
        if rows is None:
            return "thread"
        return "loop" if rows <= EXACT_ITEMS else "pool"

    def search(self, query: Query, limits: Bounds) -> Results:
        found = self.nearest(query, limits)
        if found is None:
            return Results([])
        records, nearest = found
        hits = expand(records, dict(zip(nearest.ids, nearest.scores, strict=True)))
        if query.explain:
            hits = explained(hits, {id_: Explanation(semantic_rank=place, semantic_similarity=score)
                                    for id_, (place, score) in ranked(nearest.ids, nearest.scores).items()})
        return Results(hits, nearest.unsearched)

    def below_id(self, query: Query, records: list[Record]) -> int:
        """Ids from here on are in the current window, which the agent already holds."""
        window = records[-self.window_size:]
        return NO_UPPER_BOUND if query.include_window or not window else window[0].id

    @tracing.traced("search.semantic")
    def nearest(self, query: Query, limits: Bounds) -> tuple[list[Record], Nearest] | None:
        """The session's records and the nearest qualifying ones among them; None when nothing can match."""
        vector: np.ndarray | None = None
        if query.vector:
            vector = self.vectors.query_vector(query.vector)
        elif not query.text.strip():
            raise InvalidArgument("a semantic search needs a query or a query_embedding", reason=Reason.EMPTY_QUERY)
        session = self.sessions.reading(query.session_id)
        if session is None:
            return None
        if vector is None:
            with tracing.span("embed.query"):
                vector = self.embedder.vectors([query.text], max_retries=0)[0]
        if not vector.any():
            return None
        records = session.records  # grows only at its end while we read it; never copied per query
        eligible = Eligible(0, self.below_id(query, records), limits.since, limits.until)
        return records, self.vectors.nearest(query.session_id, records, vector, limits.limit, eligible)
