"""Error memory: lessons from tool failures, shared by every session.

Owns `.store/lessons.sqlite3` (SQLite in WAL mode with synchronous=FULL, so a
recorded lesson is on disk before the reply), which
lessons are kept (only resolved outcomes), dedup of a repeated lesson, the
time to live (expiry = last hit + error_ttl_days, refreshed by every lookup
hit), purging expired lessons, lookup, search, listing, update and delete.
What a lesson is, is model.py's; which requests are valid, validation.py's;
how a lesson matches an error text, matching.py's.

Must never import protobuf or grpc, never log lesson text (ids and counts
only), never return an expired lesson, and never answer that a lesson was
stored when its file was deleted under the server (SQLite would write on
into the unlinked file: checked before every commit).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from memsvc.core import durable
from memsvc.core.errors import InvalidArgument, NotFound, storage_error
from memsvc.core.units import NANOS_PER_DAY
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

EMBED_WAIT_SECONDS = 2.0
"Longest a lookup or record waits for the embedding provider before answering by keywords alone."


_SCHEMA = """
CREATE TABLE IF NOT EXISTS lessons (
    id TEXT PRIMARY KEY, tool_name TEXT NOT NULL, tool_key TEXT NOT NULL, symptom_key TEXT NOT NULL,
    keywords TEXT NOT NULL, symptom TEXT NOT NULL, cause TEXT NOT NULL, action TEXT NOT NULL,
    session_id TEXT NOT NULL, created_at INTEGER NOT NULL, last_hit INTEGER NOT NULL,
    expires_at INTEGER NOT NULL, hit_count INTEGER NOT NULL, vector BLOB, vector_model TEXT,
    haystack TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS lessons_by_symptom ON lessons (tool_key, symptom_key);
CREATE INDEX IF NOT EXISTS lessons_by_age ON lessons (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS lessons_by_expiry ON lessons (expires_at);
"""
_COLUMNS = "id, tool_name, keywords, symptom, cause, action, session_id, created_at, last_hit, expires_at, hit_count"
_keywords_decoder = msgspec.json.Decoder(list[str])


Row = tuple[Any, ...]
"One row of the lessons table, as sqlite3 gives it."


def _lesson(row: Row) -> Lesson:
    return Lesson(id=row[0], tool_name=row[1], keywords=_keywords_decoder.decode(row[2]), symptom=row[3],
                  cause=row[4], action=row[5], session_id=row[6], created_at=row[7], last_hit=row[8],
                  expires_at=row[9], hit_count=row[10])


def _haystack(lesson: Lesson) -> str:
    """Every searchable field, folded, for SearchErrors to narrow its scan."""
    return "\n".join(fold(text) for text in (lesson.tool_name, " ".join(lesson.keywords), lesson.symptom,
                                               lesson.cause, lesson.action))


def _healthy(db: sqlite3.Connection) -> bool:
    try:
        return bool(db.execute("PRAGMA quick_check").fetchone()[0] == "ok")
    except sqlite3.DatabaseError:
        return False


class Lessons:
    """The lesson store. One connection, one writer at a time (`_lock`)."""

    def __init__(self, path: Path, *, ttl_days: float, clock: Callable[[], int], embedder: Embedder | None = None):
        self.path = path
        self.ttl = int(ttl_days * NANOS_PER_DAY)
        self.clock = clock
        self.embedder = embedder
        self.embedder_name = "" if embedder is None else embedder.name
        self._embedder_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lessons-embed")
        self._embedding: Future[np.ndarray] | None = None
        self._embedding_lock = threading.Lock()
        self._lock = threading.Lock()
        durable.ensure_dir(path.parent)
        self._db = self._open()
        self._files = durable.DataPaths([path.parent, path])
        purged = self.purge_expired()
        log.info("lessons open", extra={"purged": purged})

    def _open(self) -> sqlite3.Connection:
        existed = self.path.exists()
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        if existed and not _healthy(db):
            db.close()
            stamp = self.clock()
            for suffix in ("", "-wal", "-shm"):  # a stale WAL must not be replayed into the new file
                damaged = self.path.with_name(self.path.name + suffix)
                if damaged.exists():
                    damaged.rename(self.path.with_name(f"{self.path.name}.damaged-{stamp}{suffix}"))
            log.error("lessons store damaged; kept aside, starting empty", extra={"kept_as": f"damaged-{stamp}"})
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")  # a committed lesson survives power loss, not only kill -9
        db.executescript(_SCHEMA)
        durable.fsync_dir(self.path.parent)  # the new database and WAL file names are durable too
        return db

    def close(self) -> None:
        self._embedder_thread.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                    self._files.check()
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                log.error("lessons storage error", extra={"while": what, "error": type(exc).__name__})
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise storage_error(exc, what) from exc

    def purge_expired(self) -> int:
        """Delete lessons past their expiry; returns how many."""
        with self._transaction("purging expired lessons") as db:
            return db.execute("DELETE FROM lessons WHERE expires_at <= ?", (self.clock(),)).rowcount

    # -- record --------------------------------------------------------------

    def record(self, new: NewLesson) -> Recorded:
        """Store a resolved lesson, or refresh the one it repeats; discard other outcomes."""
        new = check_new(new)
        if new.outcome != "resolved":
            return Recorded(None, stored=False, refreshed=False, detail=(
                f"outcome {new.outcome} is not stored: only resolved lessons are kept, "
                "so an approach that did not work is never suggested again"))
        keywords = new.keywords
        vector = self._embed_one(f"{new.symptom}\n{new.cause}")
        now = self.clock()
        with self._transaction("recording a lesson") as db:
            db.execute("DELETE FROM lessons WHERE expires_at <= ?", (now,))
            key = (new.tool_name.casefold(), normalize_symptom(new.symptom))
            row = db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE tool_key = ? AND symptom_key = ?", key).fetchone()
            if row is None:
                lesson = Lesson(id=uuid.uuid4().hex, tool_name=new.tool_name, keywords=[], symptom=new.symptom,
                                cause=new.cause, action=new.action, session_id=new.session_id, created_at=now,
                                last_hit=now, expires_at=now + self.ttl, hit_count=0)
            else:
                lesson = _lesson(row)
                keywords = user_keywords(lesson.keywords + keywords)
                lesson.cause, lesson.action = new.cause or lesson.cause, new.action
                lesson.last_hit, lesson.expires_at, lesson.hit_count = now, now + self.ttl, lesson.hit_count + 1
            lesson.keywords = keywords + [ERROR_TYPE_PREFIX + classify(f"{lesson.symptom}\n{lesson.cause}")]
            db.execute(f"INSERT OR REPLACE INTO lessons ({_COLUMNS}, tool_key, symptom_key, vector, vector_model, "
                       "haystack) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (lesson.id, lesson.tool_name, msgspec.json.encode(lesson.keywords), lesson.symptom,
                        lesson.cause, lesson.action, lesson.session_id, lesson.created_at, lesson.last_hit,
                        lesson.expires_at, lesson.hit_count, *key, None if vector is None else vector.tobytes(),
                        self.embedder_name, _haystack(lesson)))
        log.info("lesson recorded", extra={"id": lesson.id, "refreshed": row is not None})
        detail = "repeats an existing lesson: refreshed it" if row is not None else "stored as a new lesson"
        return Recorded(lesson, stored=True, refreshed=row is not None, detail=detail)

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
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS}, vector, vector_model FROM lessons WHERE tool_key = ? AND expires_at > ?",
                (tool_name.casefold(), self.clock())).fetchall()
        candidates = [_lesson(row) for row in rows]
        if error_text.strip():
            similarity = self._similarities(error_text, candidates, rows)
            failure = Failure.of(error_text)
            scored = [(score, lesson) for lesson in candidates
                      if (score := relevance(lesson, failure) + similarity.get(lesson.id, 0.0)) > 0]
        else:
            scored = [(0.0, lesson) for lesson in candidates]
        scored.sort(key=lambda pair: (pair[0], pair[1].last_hit, pair[1].id), reverse=True)
        hits = self._refresh([lesson for _, lesson in scored[:limit]])
        return Related(hits, render_related(tool_name, hits))

    def _refresh(self, hits: list[Lesson]) -> list[Lesson]:
        """Renew the TTL of each hit; lessons deleted meanwhile are dropped."""
        if not hits:
            return hits
        now = self.clock()
        kept = []
        with self._transaction("refreshing lessons") as db:
            for lesson in hits:
                changed = db.execute("UPDATE lessons SET last_hit = ?, expires_at = ?, hit_count = hit_count + 1 "
                                     "WHERE id = ? AND expires_at > ?", (now, now + self.ttl, lesson.id, now))
                if changed.rowcount:
                    lesson.last_hit, lesson.expires_at, lesson.hit_count = now, now + self.ttl, lesson.hit_count + 1
                    kept.append(lesson)
        return kept

    def _similarities(self, error_text: str, lessons: list[Lesson], rows: list[Row]) -> dict[str, float]:
        """Cosine of the error text with each lesson at or above MIN_SIMILARITY; {} without an embedder."""
        query = self._embed_one(error_text)
        if query is None:
            return {}
        vectors: dict[str, np.ndarray] = {}
        stale: list[Lesson] = []
        for lesson, row in zip(lessons, rows, strict=True):
            stored = row[-2]
            if stored is not None and row[-1] == self.embedder_name and len(stored) == query.nbytes:
                vectors[lesson.id] = np.frombuffer(stored, dtype=np.float32)
            else:
                stale.append(lesson)
        if stale:
            vectors.update(self._reembed(stale))
        if not vectors:
            return {}
        scores = cosines(query, np.stack(list(vectors.values())))
        return {lesson_id: float(score) for lesson_id, score in zip(vectors, scores, strict=True)
                if score >= MIN_SIMILARITY}

    def _reembed(self, lessons: list[Lesson]) -> dict[str, np.ndarray]:
        """Embed lessons stored without a current vector (embedder changed or failed earlier) and keep them."""
        vectors = self._embed([f"{lesson.symptom}\n{lesson.cause}" for lesson in lessons])
        if vectors is None:
            return {}
        with self._transaction("storing lesson vectors") as db:
            for lesson, vector in zip(lessons, vectors, strict=True):
                db.execute("UPDATE lessons SET vector = ?, vector_model = ? WHERE id = ?",
                           (vector.tobytes(), self.embedder_name, lesson.id))
        return {lesson.id: vector for lesson, vector in zip(lessons, vectors, strict=True)}

    def _embed(self, texts: list[str]) -> np.ndarray | None:
        """(len(texts), dimension) float32, or None without a working embedder.

        A provider that hangs must not hold a lookup: the call gets EMBED_WAIT_SECONDS,
        and while an earlier call is still out no new one is started.
        """
        if self.embedder is None:
            return None
        with self._embedding_lock:
            if self._embedding is not None and not self._embedding.done():
                log.warning("lesson embedding still waiting on the provider; keyword lookup only")
                return None
            self._embedding = self._embedder_thread.submit(self.embedder.vectors, texts)
            running = self._embedding
        try:
            vectors = running.result(timeout=EMBED_WAIT_SECONDS)
        except Exception as exc:
            log.warning("lesson embedding failed; keyword lookup only", extra={"error": type(exc).__name__})
            return None
        return np.asarray(vectors, dtype=np.float32)

    def _embed_one(self, text: str) -> np.ndarray | None:
        vectors = self._embed([text])
        return None if vectors is None else vectors[0]

    # -- search, list, update, delete ----------------------------------------

    def search(self, query: str, limit: int = 0) -> list[Lesson]:
        """Lessons of any tool whose tool name, keywords, symptom, cause or action contain
        `query` (case-insensitive), best first: a match in the tool name or a keyword counts
        most, then the symptom, then cause and action; ties go to the most recently hit."""
        folded = fold(query)
        if not folded:
            raise InvalidArgument("query is empty: give a keyword to search for", reason="EMPTY_QUERY")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters", reason="QUERY_TOO_LONG")
        limit = clamp(limit, DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)
        with self._lock:  # the folded haystack narrows the scan in SQLite; the fields decide below
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE expires_at > ? AND instr(haystack, ?)",
                                    (self.clock(), folded)).fetchall()
        scored = []
        for lesson in map(_lesson, rows):
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
        where: list[str] = ["expires_at > ?"]
        args: list[int | str] = [self.clock()]
        if tool_name:
            where.append("tool_key = ?")
            args.append(check_tool_name(tool_name).casefold())
        if page_token:
            created_at, last_id = decode_token(page_token)
            where.append("(created_at < ? OR (created_at = ? AND id < ?))")
            args += [created_at, created_at, last_id]
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE {' AND '.join(where)} "
                                    "ORDER BY created_at DESC, id DESC LIMIT ?", (*args, page_size + 1)).fetchall()
        lessons = [_lesson(row) for row in rows[:page_size]]
        return lessons, encode_token(lessons[-1].created_at, lessons[-1].id) if len(rows) > page_size else ""

    def update_action(self, lesson_id: str, action: str) -> Lesson:
        """Rewrite a lesson's action; its TTL, hits and everything else stay as they were."""
        check_id(lesson_id)
        action = check_text("action", action)
        with self._transaction("updating a lesson") as db:
            lesson = self._live(db, lesson_id)
            lesson.action = action
            db.execute("UPDATE lessons SET action = ?, haystack = ? WHERE id = ?",
                       (action, _haystack(lesson), lesson_id))
        log.info("lesson updated", extra={"id": lesson_id})
        return lesson

    def delete(self, lesson_id: str) -> Lesson:
        check_id(lesson_id)
        with self._transaction("deleting a lesson") as db:
            lesson = self._live(db, lesson_id)
            db.execute("DELETE FROM lessons WHERE id = ?", (lesson_id,))
        log.info("lesson deleted", extra={"id": lesson_id})
        return lesson

    def _live(self, db: sqlite3.Connection, lesson_id: str) -> Lesson:
        row = db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE id = ? AND expires_at > ?",
                         (lesson_id, self.clock())).fetchone()
        if row is None:
            raise NotFound(f"no error record with id {lesson_id!r} (never stored, deleted or expired)",
                           reason="ERROR_RECORD_NOT_FOUND")
        return _lesson(row)
