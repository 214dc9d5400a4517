"""Semantic and hybrid search within one session, and the expansion of their
hits into runs of conversation.

Owns turning a query into a vector (the embedder, or the client's
query_embedding), which messages qualify (time range, compaction floor, the
current window unless asked for), reciprocal-rank fusion of keyword and
semantic hits, and expansion: each hit with the 2 messages before it and the 1
after (clamped at the ends of history.json), overlapping or touching
expansions merged, in time order, each contiguous run numbered from 1. Must
never touch an index: vectors.py answers nearest-neighbour questions.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from .annoygen import Eligible
from .embedders import Embedder
from .errors import InvalidArgument
from .history import Record
from .search import MAX_LIMIT, Bounds, Hit, Query, Results
from .sessions import Sessions
from .vectors import Nearest, VectorStore

BEFORE, AFTER = 2, 1
RRF_K = 60
"Reciprocal-rank fusion constant: a hit's share is 1 / (RRF_K + rank)."
NO_BOUND = 2**63 - 1

KeywordSearch = Callable[[Query, Bounds], list[Hit]]


def expand(records: list[Record], scores: dict[int, float]) -> list[Hit]:
    """Every hit among `records` with its neighbours, in runs; `scores` maps hit id to score."""
    spans: list[list[int]] = []
    present = (_position(records, id_) for id_ in scores)
    for position in sorted(at for at, id_ in zip(present, scores) if at < len(records) and records[at].id == id_):
        start, end = max(0, position - BEFORE), min(len(records) - 1, position + AFTER)
        if spans and start <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    hits = []
    for run, (start, end) in enumerate(spans, start=1):
        for record in records[start:end + 1]:
            matched = record.id in scores
            hits.append(Hit(record, "recent", score=scores[record.id] if matched else 0.0, is_context=not matched,
                            run=run))
    return hits


def _position(records: list[Record], id_: int) -> int:
    return bisect.bisect_left(records, id_, key=lambda record: record.id)


class SemanticSearch:
    def __init__(self, sessions: Sessions, vectors: VectorStore, embedder: Embedder):
        self.sessions = sessions
        self.vectors = vectors
        self.embedder = embedder

    def may_wait(self, query: Query) -> bool:
        """False when the search needs no thread: an instant embedder (or the client's
        vector) and an index already in memory with nothing pending."""
        return not ((query.vector or self.embedder.instant) and self.vectors.ready(query.session_id))

    def semantic(self, query: Query, limits: Bounds) -> Results:
        found = self._nearest(query, limits)
        if found is None:
            return Results([])
        records, nearest = found
        return Results(expand(records, dict(zip(nearest.ids, nearest.scores))), nearest.unsearched)

    def hybrid(self, query: Query, limits: Bounds, keyword: KeywordSearch) -> Results:
        """Keyword and semantic hits fused by reciprocal rank, then expanded.

        Archive hits (older than history.json) have no neighbours here: each
        is a run of its own, ahead of the recent runs.
        """
        if not query.text.strip():
            raise InvalidArgument("a hybrid search needs query text", reason="EMPTY_QUERY")
        pool = Bounds(min(MAX_LIMIT, 2 * limits.limit), limits.since, limits.until)
        found = self._nearest(query, pool)
        records, nearest = found if found is not None else ([], Nearest([], [], 0))
        below_id = self._below_id(query, records)
        fused: dict[tuple[str, int], float] = {}
        recent: dict[int, Hit] = {}
        archived: dict[int, Hit] = {}
        for rank, hit in enumerate(keyword(query, pool)):
            if hit.source == "recent" and hit.record.id >= below_id:
                continue
            (recent if hit.source == "recent" else archived)[hit.record.id] = hit
            fused[(hit.source, hit.record.id)] = 1.0 / (RRF_K + rank + 1)
        for rank, id_ in enumerate(nearest.ids):
            key = ("recent", id_)
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank + 1)
        chosen = sorted(fused, key=lambda key: (-fused[key], -key[1]))[:limits.limit]
        old = sorted((archived[id_] for source, id_ in chosen if source == "archive"),
                     key=lambda hit: (hit.record.send_at, hit.record.id))
        hits = [Hit(hit.record, "archive", score=fused[("archive", hit.record.id)], run=run)
                for run, hit in enumerate(old, start=1)]
        scores = {id_: fused[(source, id_)] for source, id_ in chosen if source == "recent"}
        for hit in expand(records, scores):
            hit.run += len(old)
            hits.append(hit)
        return Results(hits, nearest.unsearched)

    def _below_id(self, query: Query, records: list[Record]) -> int:
        """Ids from here on are in the current window, which the agent already holds."""
        window = records[-self.sessions.settings.max_history_messages:]
        return NO_BOUND if query.include_window or not window else window[0].id

    def _nearest(self, query: Query, limits: Bounds) -> tuple[list[Record], Nearest] | None:
        if query.vector:
            vector = self.vectors.query_vector(query.vector)
        elif not query.text.strip():
            raise InvalidArgument("a semantic search needs a query or a query_embedding", reason="EMPTY_QUERY")
        session = self.sessions.reading(query.session_id)
        if session is None:
            return None
        if not query.vector:
            vector = self.embedder.vectors([query.text], attempts=1)[0]
        if not vector.any():
            return None
        records = session.records  # grows only at its end while we read it; never copied per query
        eligible = Eligible(0, self._below_id(query, records), limits.since, limits.until)
        return records, self.vectors.nearest(query.session_id, records, vector, limits.limit, eligible)
