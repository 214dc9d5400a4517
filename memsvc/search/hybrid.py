"""Hybrid search: keyword and semantic candidates fused into one ranking.

Owns the fusion (reciprocal rank: a hit's share from each list is
1 / (RRF_K + rank)), the candidate pools, and how fused hits read as
conversation (recent hits expanded; archived hits each a run of its own,
ahead of the recent runs). Must never search a tier itself.
"""

from __future__ import annotations

from memsvc.core.errors import InvalidArgument
from memsvc.search.expansion import expand
from memsvc.search.keyword import KeywordSearch
from memsvc.search.query import MAX_LIMIT, Bounds, Hit, Query, Results
from memsvc.search.semantic import SemanticSearch
from memsvc.vectors.store import Nearest

RRF_K = 60
"Reciprocal-rank fusion constant: a hit's share is 1 / (RRF_K + rank)."


class HybridSearch:
    def __init__(self, keyword: KeywordSearch, semantic: SemanticSearch):
        self.keyword = keyword
        self.semantic = semantic

    def search(self, query: Query, limits: Bounds) -> Results:
        """Keyword and semantic hits fused by reciprocal rank, then expanded.

        Archive hits (older than history.json) have no neighbours here: each
        is a run of its own, ahead of the recent runs.
        """
        if not query.text.strip():
            raise InvalidArgument("a hybrid search needs query text", reason="EMPTY_QUERY")
        pool = Bounds(min(MAX_LIMIT, 2 * limits.limit), limits.since, limits.until)
        found = self.semantic.nearest(query, pool)
        records, nearest = found if found is not None else ([], Nearest([], [], 0))
        below_id = self.semantic.below_id(query, records)
        fused: dict[tuple[str, int], float] = {}
        recent: dict[int, Hit] = {}
        archived: dict[int, Hit] = {}
        for rank, hit in enumerate(self.keyword.search(query, pool)):
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
