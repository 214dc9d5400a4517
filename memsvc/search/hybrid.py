"""Hybrid search: keyword and semantic candidates fused into one ranking,
optionally reranked, then read as conversation.

Owns the candidate pools (POOL of each, far more than `limit`, so a message
ranked modestly by both can still win), the fusion (reciprocal rank: a hit's
share from a list is weight / (RRF_K + rank); chosen by measurement over
reciprocal-rank weights, k and pools and min-max score fusion, see
benchmarks/fusion.py), handing the best RERANK_CANDIDATES to the reranker,
and expanding the chosen hits, archived ones with their archived neighbours.
Must never search a tier itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.search.keyword import KeywordSearch
from memsvc.search.query import Bounds, Explanation, Query, Results, explained, ranked
from memsvc.search.rerank import Reranker
from memsvc.search.semantic import SemanticSearch

POOL = 50
"Candidates taken from each of the keyword and semantic rankings (at least 4x the limit)."
RRF_K = 10
"Small: a candidate near the top of either list counts most (RealMem, benchmarks/results/fusion.json)."
KEYWORD_WEIGHT = 1.0
SEMANTIC_WEIGHT = 1.0
RERANK_CANDIDATES = 32
"The best fused candidates the reranker reorders."


def fuse(rankings: Sequence[tuple[Sequence[int], float]], k: int = RRF_K) -> dict[int, float]:
    """Weighted reciprocal rank fusion of (ids best first, weight) lists: id -> fused score."""
    fused: dict[int, float] = {}
    for ids, weight in rankings:
        for rank, id_ in enumerate(ids, start=1):
            fused[id_] = fused.get(id_, 0.0) + weight / (k + rank)
    return fused


class HybridSearch:
    def __init__(self, keyword: KeywordSearch, semantic: SemanticSearch, reranker: Reranker):
        self.keyword = keyword
        self.semantic = semantic
        self.reranker = reranker

    def may_wait(self, query: Query) -> bool:
        """A rerank is an HTTP call; the semantic half may wait too."""
        return self.reranker.enabled or self.semantic.placement(query) == "thread"

    def search(self, query: Query, limits: Bounds) -> Results:
        if not query.text.strip():
            raise InvalidArgument("a hybrid search needs query text", reason=Reason.EMPTY_QUERY)
        pool = Bounds(max(POOL, 4 * limits.limit), limits.since, limits.until)
        nearest = self.semantic.nearest(query, pool)
        found = self.keyword.ranked(query, pool)
        below_id = self.semantic.below_id(query, found.recent)
        texts = {hit.record.id: hit.record for hit in found.hits if hit.record.id < below_id}
        keyword_ids = list(texts)
        semantic_ids: list[int] = []
        semantic_scores: list[float] = []
        unsearched = 0
        if nearest is not None:
            records, near = nearest
            unsearched = near.unsearched
            semantic_ids, semantic_scores = list(near.ids), list(near.scores)
            texts.update(_by_id(records, semantic_ids))
        fused = fuse([(keyword_ids, KEYWORD_WEIGHT), (semantic_ids, SEMANTIC_WEIGHT)])
        order = sorted(fused, key=lambda id_: (-fused[id_], -id_))
        reranked = self._reranked(query.text, order[:RERANK_CANDIDATES], texts)
        scores = reranked or fused
        chosen = sorted(order[:RERANK_CANDIDATES], key=lambda id_: -scores[id_])[:limits.limit]
        hits = self.keyword.in_context(query.session_id, found, {id_: scores[id_] for id_ in chosen})
        if query.explain:
            by_keyword = ranked(keyword_ids, [hit.score for hit in found.hits if hit.record.id < below_id])
            by_meaning = ranked(semantic_ids, semantic_scores)
            hits = explained(hits, {id_: _explanation(id_, by_keyword, by_meaning, fused[id_], reranked)
                                    for id_ in chosen})
        return Results(hits, unsearched)

    def _reranked(self, text: str, head: list[int], records: dict[int, Record]) -> dict[int, float] | None:
        """The reranker's score of each of the best fused candidates, when one answers in time."""
        if not self.reranker.enabled or not head:
            return None
        scores = self.reranker.scores(text, [records[id_].content for id_ in head])
        return None if scores is None else dict(zip(head, scores, strict=True))


def _explanation(id_: int, by_keyword: dict[int, tuple[int, float]], by_meaning: dict[int, tuple[int, float]],
                 fused: float, reranked: dict[int, float] | None) -> Explanation:
    keyword_rank, keyword_score = by_keyword.get(id_, (0, 0.0))
    semantic_rank, similarity = by_meaning.get(id_, (0, 0.0))
    return Explanation(keyword_rank=keyword_rank, keyword_score=keyword_score, semantic_rank=semantic_rank,
                       semantic_similarity=similarity, fused_score=fused,
                       rerank_score=None if reranked is None else reranked[id_])


def _by_id(records: list[Record], ids: Sequence[int]) -> dict[int, Record]:
    found = {}
    for id_ in ids:
        at = bisect.bisect_left(records, id_, key=lambda record: record.id)
        if at < len(records) and records[at].id == id_:
            found[id_] = records[at]
    return found
