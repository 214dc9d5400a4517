"""What a search asks and what it answers: the query, its checked bounds, and the hits.

Owns the limits (default and maximum result count, query length), what a
time range means ([since, until), or a named range back from now), and the
shape of a hit (its record, where it came from, its score, and whether it is
context around a match, and with `explain` why it was found). Must never search.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from memsvc.core.errors import InvalidArgument
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.core.units import NO_UPPER_BOUND, TIME_RANGES

DEFAULT_LIMIT = 8
MAX_LIMIT = 32
MAX_QUERY_CHARS = 8192
"An agent may search with a whole request: long, but bounded (every word is a term of the query)."

Match = Literal["semantic", "keyword", "hybrid"]
SourceName = Literal["recent", "archive"]
Tier = Literal["window", "recent", "archive"]
"Where a hit's message is held: the current window, the rest of history.json, or the archive."
Placement = Literal["loop", "pool", "thread"]
"""Where a search runs: on the event loop (shorter than any hop), on the bounded searches pool
(it computes), or on a thread of its own (it may wait on an endpoint or the disk)."""


class Query(msgspec.Struct, kw_only=True):
    session_id: str
    text: str = ""
    match: Match | None = None
    "None: the default, `mode`."
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
    require_all_words: bool = False
    "Keyword and hybrid: every word of the query must appear (a CJK run as it is)."
    with_context: bool = False
    "Keyword: each hit with its neighbours, in runs (semantic and hybrid always expand)."
    omit_payloads: bool = False
    "Hits come without their payload_json."
    explain: bool = False
    "Each match carries its Explanation."

    @property
    def mode(self) -> Match:
        """The match asked for; unnamed, hybrid (it beats both its parts, docs/retrieval.md), except that a
        query_embedding without text can only be matched by meaning."""
        if self.match is not None:
            return self.match
        return "semantic" if self.vector and not self.text.strip() else "hybrid"


class Explanation(msgspec.Struct, kw_only=True):
    """Why a match was found: its place and score in each ranking the search drew on."""

    keyword_rank: int = 0
    "1 for the best BM25 match; 0 when the keyword ranking does not hold it (or did not run)."
    keyword_score: float = 0.0
    semantic_rank: int = 0
    "1 for the nearest; 0 when the semantic ranking does not hold it (or did not run)."
    semantic_similarity: float = 0.0
    fused_score: float = 0.0
    "Hybrid: the fused score that ordered the candidates before any rerank."
    rerank_score: float | None = None
    "Hybrid: the reranker's score, when it ran."
    tier: Tier = "recent"


class Hit(msgspec.Struct):
    record: Record
    source: SourceName
    score: float = 0.0
    is_context: bool = False
    run: int = 0
    explanation: Explanation | None = None


def explained(hits: list[Hit], why: Mapping[int, Explanation]) -> list[Hit]:
    """`hits` with each match's explanation (by message id) attached; context messages get none."""
    return [msgspec.structs.replace(hit, explanation=why[hit.record.id])
            if not hit.is_context and hit.record.id in why else hit for hit in hits]


def ranked(ids: list[int], scores: list[float]) -> dict[int, tuple[int, float]]:
    """Id -> (its 1-based place, its score) in a ranking given best first."""
    return {id_: (place, score) for place, (id_, score) in enumerate(zip(ids, scores, strict=True), start=1)}


class Results(msgspec.Struct):
    hits: list[Hit]
    unsearched: int = 0
    "Semantic and hybrid: qualifying messages not searched because their embedding is pending or failing."
    omitted: int = 0
    "Hits left out, the lowest ranked, to keep the reply within max_reply_bytes (budget.py)."


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
                              reason=Reason.INVALID_LIMIT)
    if len(query.text) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters", reason=Reason.QUERY_TOO_LONG)
    if query.since < 0 or query.until < 0:
        raise InvalidArgument("since and until must not be negative", reason=Reason.INVALID_TIME_RANGE)
    if query.since or query.until:
        since, until = query.since, query.until or NO_UPPER_BOUND
        if since >= until:
            raise InvalidArgument("since must be before until", reason=Reason.INVALID_TIME_RANGE)
    else:
        if query.time_range not in TIME_RANGES:
            raise InvalidArgument(f"time_range must be one of {', '.join(TIME_RANGES)}",
                                  reason=Reason.INVALID_TIME_RANGE)
        span = TIME_RANGES[query.time_range]
        since, until = (now - span if span else 0), NO_UPPER_BOUND
    return Bounds(query.limit or DEFAULT_LIMIT, since, until)
