"""Error memory: lessons from tool failures, shared by every session.

Owns what error memory does, whichever backend stores the lessons: which
lessons are kept (only resolved outcomes), what a repeated lesson becomes,
the time to live (expiry = last hit + error_ttl_days, refreshed by every
lookup hit and repeat), purging expired lessons, and lookup (matching,
scoring, vectors), search, listing, update and delete. What a lesson is, is
model.py's; which requests are valid, validation.py's; how a lesson matches
an error text, matching.py's; storing and querying, the LessonStore's
(backend.py: sqlite.py or postgres.py).

Must never import protobuf or grpc, never log lesson text (ids and counts
only), and never return an expired lesson.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import numpy as np

from memsvc.core.errors import InvalidArgument, MemsvcError, NotFound, Unavailable
from memsvc.core.reasons import Reason
from memsvc.core.units import NANOS_PER_DAY
from memsvc.lessons.backend import LessonStore, StoredLesson
from memsvc.lessons.embedding import LessonEmbedding
from memsvc.lessons.matching import (
    MIN_SIMILARITY,
    Failure,
    classify,
    cosines,
    fold,
    normalize_symptom,
    relevance,
    render_related,
)
from memsvc.lessons.model import ERROR_TYPE_PREFIX, Lesson, NewLesson, Recorded, Related
from memsvc.lessons.validation import (
    DEFAULT_LOOKUP_LIMIT,
    DEFAULT_PAGE_SIZE,
    DEFAULT_SEARCH_LIMIT,
    MAX_ERROR_TEXT_BYTES,
    MAX_LOOKUP_LIMIT,
    MAX_PAGE_SIZE,
    MAX_QUERY_CHARS,
    MAX_SEARCH_LIMIT,
    check_id,
    check_new,
    check_size,
    check_text,
    check_tool_name,
    clamp,
    decode_token,
    encode_token,
    user_keywords,
)
from memsvc.vectors.embedders.base import Embedder

log = logging.getLogger(__name__)


class Lessons:
    """Error memory over one LessonStore, which it owns (and closes)."""

    def __init__(self, store: LessonStore, *, ttl_days: float, clock: Callable[[], int],
                 embedder: Embedder | None = None):
        self.store = store
        self.ttl = int(ttl_days * NANOS_PER_DAY)
        self.clock = clock
        self.embedding = LessonEmbedding(embedder)
        try:
            purged = self.purge_expired()
        except Unavailable as exc:  # a database down at start: error memory answers UNAVAILABLE until it is back
            log.error("lessons not purged at start", extra={"reason": exc.reason})
        else:
            log.info("lessons open", extra={"purged": purged})

    def close(self) -> None:
        self.embedding.close()
        self.store.close()

    def unavailable(self) -> MemsvcError | None:
        """Why error memory cannot answer now (its database is out of reach...), or None."""
        try:
            self.store.check()
        except MemsvcError as error:
            return error
        return None

    def purge_expired(self) -> int:
        """Delete lessons past their expiry; returns how many."""
        return self.store.purge(self.clock())

    # -- record --------------------------------------------------------------

    def record(self, new: NewLesson) -> Recorded:
        """Store a resolved lesson, or refresh the one it repeats; discard other outcomes."""
        new = check_new(new)
        if new.outcome != "resolved":
            return Recorded(None, stored=False, refreshed=False, detail=(
                f"outcome {new.outcome} is not stored: only resolved lessons are kept, "
                "so an approach that did not work is never suggested again"))
        vector = self.embedding.one(f"{new.symptom}\n{new.cause}")
        now = self.clock()

        def merge(live: Lesson | None) -> Lesson:
            if live is None:
                lesson = Lesson(id=uuid.uuid4().hex, tool_name=new.tool_name, keywords=[], symptom=new.symptom,
                                cause=new.cause, action=new.action, session_id=new.session_id, created_at=now,
                                last_hit=now, expires_at=now + self.ttl, hit_count=0)
                keywords = new.keywords
            else:  # the first symptom and session stay; the newer fix wins
                lesson = live
                keywords = user_keywords(live.keywords + new.keywords)
                lesson.cause, lesson.action = new.cause or lesson.cause, new.action
                lesson.last_hit, lesson.expires_at = max(lesson.last_hit, now), max(lesson.expires_at, now + self.ttl)
                lesson.hit_count += 1
            lesson.keywords = keywords + [ERROR_TYPE_PREFIX + classify(f"{lesson.symptom}\n{lesson.cause}")]
            return lesson

        key = (new.tool_name.casefold(), normalize_symptom(new.symptom))
        lesson, refreshed = self.store.upsert(key, merge, None if vector is None else vector.tobytes(),
                                              self.embedding.name, now)
        log.info("lesson recorded", extra={"id": lesson.id, "refreshed": refreshed})
        detail = "repeats an existing lesson: refreshed it" if refreshed else "stored as a new lesson"
        return Recorded(lesson, stored=True, refreshed=refreshed, detail=detail)

    # -- lookup --------------------------------------------------------------

    def lookup(self, tool_name: str, error_text: str, limit: int = 0) -> Related:
        """The lessons of `tool_name` related to `error_text`, best first; each hit's TTL is refreshed.

        Related means: the lesson's symptom and the error text contain one another, one of
        its keywords occurs in the text, they share enough words (CJK: character pairs),
        they fall in the same error class, or their embeddings are at least MIN_SIMILARITY
        apart in cosine. Each adds to the score. With no error text, every lesson of the
        tool is related, most recently hit first.
        """
        tool_name = check_tool_name(tool_name)
        check_size("error_text", error_text, MAX_ERROR_TEXT_BYTES)
        limit = clamp(limit, DEFAULT_LOOKUP_LIMIT, MAX_LOOKUP_LIMIT)
        stored = self.store.of_tool(tool_name.casefold(), self.clock())
        if error_text.strip():
            similarity = self._similarities(error_text, stored)
            failure = Failure.of(error_text)
            scored = [(score, row.lesson) for row in stored
                      if (score := relevance(row.lesson, failure) + similarity.get(row.lesson.id, 0.0)) > 0]
        else:
            scored = [(0.0, row.lesson) for row in stored]
        scored.sort(key=lambda pair: (pair[0], pair[1].last_hit, pair[1].id), reverse=True)
        hits = self._refresh([lesson for _, lesson in scored[:limit]])
        return Related(hits, render_related(tool_name, hits))

    def _refresh(self, hits: list[Lesson]) -> list[Lesson]:
        """Renew the TTL of each hit, best first still; lessons deleted or purged meanwhile are dropped."""
        if not hits:
            return hits
        now = self.clock()
        renewed = self.store.refresh([lesson.id for lesson in hits], now, now + self.ttl)
        kept = []
        for lesson in hits:
            if (renewal := renewed.get(lesson.id)) is not None:
                lesson.last_hit, lesson.expires_at, lesson.hit_count = (renewal.last_hit, renewal.expires_at,
                                                                        renewal.hit_count)
                kept.append(lesson)
        return kept

    def _similarities(self, error_text: str, stored: list[StoredLesson]) -> dict[str, float]:
        """Cosine of the error text with each lesson at or above MIN_SIMILARITY; {} without an embedder."""
        query = self.embedding.one(error_text)
        if query is None:
            return {}
        vectors: dict[str, np.ndarray] = {}
        stale: list[Lesson] = []
        for row in stored:
            if row.vector is not None and row.vector_model == self.embedding.name and len(row.vector) == query.nbytes:
                vectors[row.lesson.id] = np.frombuffer(row.vector, dtype=np.float32)
            else:
                stale.append(row.lesson)
        if stale:
            vectors.update(self._reembed(stale))
        if not vectors:
            return {}
        scores = cosines(query, np.stack(list(vectors.values())))
        return {lesson_id: float(score) for lesson_id, score in zip(vectors, scores, strict=True)
                if score >= MIN_SIMILARITY}

    def _reembed(self, lessons: list[Lesson]) -> dict[str, np.ndarray]:
        """Embed lessons stored without a current vector (embedder changed or failed earlier) and keep them."""
        vectors = self.embedding.vectors([f"{lesson.symptom}\n{lesson.cause}" for lesson in lessons])
        if vectors is None:
            return {}
        self.store.set_vectors({lesson.id: vector.tobytes() for lesson, vector in zip(lessons, vectors, strict=True)},
                               self.embedding.name)
        return {lesson.id: vector for lesson, vector in zip(lessons, vectors, strict=True)}

    # -- search, list, update, delete ----------------------------------------

    def search(self, query: str, limit: int = 0) -> list[Lesson]:
        """Lessons of any tool whose tool name, keywords, symptom, cause or action contain
        `query` (case-insensitive), best first: a match in the tool name or a keyword counts
        most, then the symptom, then cause and action; ties go to the most recently hit."""
        folded = fold(query)
        if not folded:
            raise InvalidArgument("query is empty: give a keyword to search for", reason=Reason.EMPTY_QUERY)
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters", reason=Reason.QUERY_TOO_LONG)
        limit = clamp(limit, DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)
        scored = []  # the backend narrows by the folded haystack; the fields decide here
        for lesson in self.store.containing(folded, self.clock()):
            fields = ((3, lesson.tool_name), (3, " ".join(lesson.keywords)), (2, lesson.symptom),
                      (1, lesson.cause), (1, lesson.action))
            score = sum(weight for weight, text in fields if folded in fold(text))
            if score:
                scored.append((score, lesson.last_hit, lesson.id, lesson))
        scored.sort(key=lambda item: item[:3], reverse=True)
        return [item[3] for item in scored[:limit]]

    def list_page(self, page_size: int = 0, page_token: str = "", tool_name: str = "") -> tuple[list[Lesson], str]:
        """One page of live lessons, newest first; the token is where the next page starts."""
        page_size = clamp(page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        tool_key = check_tool_name(tool_name).casefold() if tool_name else ""
        after = decode_token(page_token) if page_token else None
        rows = self.store.page(self.clock(), tool_key, after, page_size + 1)
        lessons = rows[:page_size]
        return lessons, encode_token(lessons[-1].created_at, lessons[-1].id) if len(rows) > page_size else ""

    def update_action(self, lesson_id: str, action: str) -> Lesson:
        """Rewrite a lesson's action; its TTL, hits and everything else stay as they were."""
        check_id(lesson_id)
        action = check_text("action", action, Reason.ACTION_REQUIRED)
        lesson = self._found(self.store.set_action(lesson_id, action, self.clock()), lesson_id)
        log.info("lesson updated", extra={"id": lesson_id})
        return lesson

    def delete(self, lesson_id: str) -> Lesson:
        check_id(lesson_id)
        lesson = self._found(self.store.delete(lesson_id, self.clock()), lesson_id)
        log.info("lesson deleted", extra={"id": lesson_id})
        return lesson

    @staticmethod
    def _found(lesson: Lesson | None, lesson_id: str) -> Lesson:
        if lesson is None:
            raise NotFound(f"no error record with id {lesson_id!r} (never stored, deleted or expired)",
                           reason=Reason.ERROR_RECORD_NOT_FOUND)
        return lesson
