"""Hybrid search: keyword and semantic candidates fused into one ranking,
optionally reranked, then read as conversation.

Owns the candidate pools (POOL of each, far more than `limit`, so a message
ranked modestly by both can still win), the fusion (cosine plus the square
root of a share of the best BM25, weighted by how far this query's best
keyword match stands out of its list, per unit of the cosines' own spread;
chosen by leave-one-set-out against other families, see benchmarks/fusion.py),
the evidence each fused candidate came from (its place and raw score in each
list), handing the best RERANK_CANDIDATES to the reranker, and expanding the
chosen hits, archived ones with their archived neighbours.
Must never search a tier itself.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence

import msgspec

from memsvc.core.errors import InvalidArgument
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.runtime import tracing
from memsvc.search.keyword import KeywordSearch
from memsvc.search.query import Bounds, Explanation, Query, Results, explained
from memsvc.search.rerank import Reranker
from memsvc.search.semantic import SemanticSearch

POOL = 50
"Candidates taken from each of the keyword and semantic rankings (at least 4x the limit)."
RERANK_CANDIDATES = 32
"The best fused candidates the reranker reorders."
LEAST_SPREAD = 1e-3
"Cosines spread less than this count as flat: the keyword weight stays finite, and the keyword list leads."


class Ranking(msgspec.Struct):
    """One list's candidates, best first, with the scores it ranked them by (BM25, cosine)."""

    ids: list[int]
    scores: list[float]


class Candidate(msgspec.Struct):
    """One fused candidate and the evidence it was fused from: its place (1 = first) and raw score in each
    list, None where that list did not hold it."""

    id: int
    score: float
    keyword_rank: int | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None


class FusionTuning(msgspec.Struct, frozen=True):
    """The evidence fusion's constants, chosen by leave-one-set-out over RealMem and both halves of MADial
    (benchmarks/fusion.py, benchmarks/results/fusion.json). Held out, MADial Chinese chooses these, RealMem
    and MADial English 0.6 and 4 (held-out gains 1.006x to 1.072x the better list). These have a worst
    case over all sets of 1.006x against 0.6 and 4's 1.009x, less than one Chinese query apart, and they
    reach 1.05x on RealMem and English where 0.6 and 4 do not."""

    keyword_weight: float = 0.2
    """What the keyword list's evidence counts against the cosines' spread."""
    keyword_power: float = 2.0
    """How sharply a keyword list's weight falls as its best match stands out less: a list whose median
    share is 0.15 (one clear match) keeps 0.72 of keyword_weight, one whose median is 0.4 (many alike) 0.36."""


FUSION = FusionTuning()


@tracing.traced("search.fusion")
def fuse(keyword: Ranking, semantic: Ranking, tuning: FusionTuning = FUSION, semantic_from: int = 0
         ) -> list[Candidate]:
    """Keyword and semantic candidates in one ranking, best first (ties: the newer message).

    A candidate's evidence is its cosine (below 0: none) plus a weight x the square root of its BM25 as a
    share of the keyword list's best (BM25 has no scale of its own; the root keeps a match well down a
    steeply falling list in play). Each list's spread is how far its best stands above its median, in
    shares and in cosines; the weight is keyword_weight x the keyword spread ** keyword_power / the cosine
    spread. So the cosines count by their own spread for this query, and the keyword list by how clearly
    its best match stands out: a close paraphrase (a cosine far above the rest) outweighs a common word,
    while cosines that are all alike (a model that does not read the script, or nothing similar at all)
    hand the order to a keyword list with one clear match. A candidate missing from a list gets the list's
    last score, which it is at most; one semantic search cannot see (archived: ids below `semantic_from`)
    is judged by the keyword list alone, its evidence counting on the cosine scale too (its root share x
    the best cosine). A fixed weight cannot read the query (benchmarks/fusion.py: 0.15 reaches 1.05x on RealMem and
    English and falls to 0.86x keyword on Chinese, 0.5 holds Chinese and gives English 1.019x), nor can rank
    fusion (equal-weight reciprocal rank: 0.84x keyword on MADial Chinese with MiniLM).
    """
    keyword_best = keyword.scores[0] if keyword.scores and keyword.scores[0] > 0.0 else 0.0
    shares = [score / keyword_best if keyword_best else 0.0 for score in keyword.scores]
    keyword_floor = shares[-1] if shares else 0.0
    cosines = [max(0.0, score) for score in semantic.scores]
    semantic_floor = cosines[-1] if cosines else 0.0
    semantic_best = cosines[0] if cosines else 0.0
    weight = tuning.keyword_weight * _spread(shares) ** tuning.keyword_power / max(_spread(cosines), LEAST_SPREAD)
    found: dict[int, Candidate] = {}
    for rank, (id_, score) in enumerate(zip(keyword.ids, keyword.scores, strict=True), start=1):
        found[id_] = Candidate(id_, 0.0, keyword_rank=rank, keyword_score=score)
    for rank, (id_, score) in enumerate(zip(semantic.ids, semantic.scores, strict=True), start=1):
        candidate = found.setdefault(id_, Candidate(id_, 0.0))
        candidate.semantic_rank, candidate.semantic_score = rank, score
    for candidate in found.values():
        from_keyword = math.sqrt(keyword_floor if candidate.keyword_rank is None
                                 else shares[candidate.keyword_rank - 1])
        if candidate.semantic_score is not None:
            from_semantic = max(0.0, candidate.semantic_score)
        elif candidate.id < semantic_from:
            from_semantic = from_keyword * semantic_best
        else:
            from_semantic = semantic_floor
        candidate.score = weight * from_keyword + from_semantic
    return sorted(found.values(), key=lambda candidate: (-candidate.score, -candidate.id))


def _spread(scores: list[float]) -> float:
    """How far a list's best (first) stands above its median; a single score, with nothing below it, by all of
    itself; an empty list by 0."""
    if len(scores) == 1:
        return scores[0]
    return scores[0] - statistics.median(scores) if scores else 0.0


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
        earlier = [hit for hit in found.hits if hit.record.id < below_id]
        texts = {hit.record.id: hit.record for hit in earlier}
        keyword = Ranking([hit.record.id for hit in earlier], [hit.score for hit in earlier])
        semantic = Ranking([], [])
        unsearched = 0
        if nearest is not None:
            records, near = nearest
            unsearched = near.unsearched
            semantic = Ranking(near.ids, near.scores)
            texts.update(_by_id(records, near.ids))
        head = fuse(keyword, semantic, semantic_from=found.cut)[:RERANK_CANDIDATES]
        reranked = self._reranked(query.text, [candidate.id for candidate in head], texts)
        scores = reranked or {candidate.id: candidate.score for candidate in head}
        chosen = sorted(head, key=lambda candidate: -scores[candidate.id])[:limits.limit]
        hits = self.keyword.in_context(query.session_id, found, {c.id: scores[c.id] for c in chosen})
        if query.explain:
            hits = explained(hits, {candidate.id: _explanation(candidate, reranked) for candidate in chosen})
        return Results(hits, unsearched)

    def _reranked(self, text: str, head: list[int], records: dict[int, Record]) -> dict[int, float] | None:
        """The reranker's score of each of the best fused candidates, when one answers in time."""
        if not self.reranker.enabled or not head:
            return None
        scores = self.reranker.scores(text, [records[id_].content for id_ in head])
        return None if scores is None else dict(zip(head, scores, strict=True))


def _explanation(candidate: Candidate, reranked: dict[int, float] | None) -> Explanation:
    return Explanation(keyword_rank=candidate.keyword_rank or 0, keyword_score=candidate.keyword_score or 0.0,
                       semantic_rank=candidate.semantic_rank or 0,
                       semantic_similarity=candidate.semantic_score or 0.0, fused_score=candidate.score,
                       rerank_score=None if reranked is None else reranked[candidate.id])


def _by_id(records: list[Record], ids: Sequence[int]) -> dict[int, Record]:
    found = {}
    for id_ in ids:
        at = bisect.bisect_left(records, id_, key=lambda record: record.id)
        if at < len(records) and records[at].id == id_:
            found[id_] = records[at]
    return found
