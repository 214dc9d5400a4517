"""Error memory: lessons from tool failures, shared by every session.

Owns `.store/lessons.sqlite3` (SQLite in WAL mode with synchronous=FULL, so a
recorded lesson is on disk before the reply), what a lesson is and which
inputs are valid, which lessons are kept (only resolved outcomes), dedup of a
repeated lesson, the time to live (expiry = last hit + error_ttl_days,
refreshed by every lookup hit), purging expired lessons, lookup, search,
listing, update and delete. How a lesson matches an error text is
lesson_match.py's.

Must never import protobuf or grpc, never log lesson text (ids and counts
only), and never return an expired lesson.
"""

from __future__ import annotations

import array
import base64
import binascii
import logging
import re
import sqlite3
import threading
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import msgspec

from . import durable
from .errors import InvalidArgument, MemsvcError, NotFound, ResourceExhausted, Unavailable
from .lesson_match import (
    ERROR_TYPE_PREFIX,
    MIN_SIMILARITY,
    Failure,
    classify,
    cosine,
    fold,
    normalize_symptom,
    relevance,
    render_related,
)
from .sessions import check_session_id

log = logging.getLogger(__name__)

NANOS_PER_DAY = 86_400 * 1_000_000_000
OUTCOMES = ("resolved", "failed", "abandoned")
MAX_TOOL_NAME_CHARS = 128
MAX_TEXT_BYTES = 16 * 1024
"Largest symptom, cause or action."
MAX_ERROR_TEXT_BYTES = 64 * 1024
"Largest error text a lookup may carry."
MAX_KEYWORDS = 32
MAX_KEYWORD_CHARS = 128
MAX_QUERY_CHARS = 1024
DEFAULT_LOOKUP_LIMIT, MAX_LOOKUP_LIMIT = 3, 32
DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT = 8, 32
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 500


class Embedder(Protocol):
    """What lessons need of an embedding provider (embedders.Embedder is one)."""

    name: str
    "Identity of the vector space; a lesson embedded under another name is embedded again."

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class NewLesson(msgspec.Struct, kw_only=True):
    tool_name: str
    symptom: str
    outcome: str
    "resolved, failed or abandoned; empty when the caller did not say."
    action: str = ""
    cause: str = ""
    keywords: list[str] = msgspec.field(default_factory=list)
    session_id: str = ""


class Lesson(msgspec.Struct, kw_only=True):
    id: str
    tool_name: str
    keywords: list[str]
    "The caller's keywords and the automatic error_type:<class>."
    symptom: str
    cause: str
    action: str
    session_id: str
    created_at: int
    last_hit: int
    expires_at: int
    "All three UTC Unix nanoseconds."
    hit_count: int

    @property
    def error_type(self) -> str:
        return next((k[len(ERROR_TYPE_PREFIX):] for k in self.keywords if k.startswith(ERROR_TYPE_PREFIX)), "other")


class Recorded(msgspec.Struct):
    lesson: Lesson | None
    stored: bool
    refreshed: bool
    detail: str


class Related(msgspec.Struct):
    lessons: list[Lesson]
    related_errors: str


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


def _lesson(row: tuple) -> Lesson:
    return Lesson(id=row[0], tool_name=row[1], keywords=_keywords_decoder.decode(row[2]), symptom=row[3],
                  cause=row[4], action=row[5], session_id=row[6], created_at=row[7], last_hit=row[8],
                  expires_at=row[9], hit_count=row[10])


def _haystack(lesson: Lesson) -> str:
    """Every searchable field, folded, for SearchErrors to narrow its scan."""
    return "\n".join(fold(text) for text in (lesson.tool_name, " ".join(lesson.keywords), lesson.symptom,
                                               lesson.cause, lesson.action))


def _healthy(db: sqlite3.Connection) -> bool:
    try:
        return db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.DatabaseError:
        return False


def _storage_error(exc: sqlite3.Error, what: str) -> MemsvcError:
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return ResourceExhausted(f"disk full while {what}; nothing was stored, free space and retry",
                                 reason="DISK_FULL")
    return Unavailable(f"storage error while {what}; nothing was changed, retry later", reason="STORAGE_ERROR")


class Lessons:
    """The lesson store. One connection, one writer at a time (`_lock`)."""

    def __init__(self, path: Path, *, ttl_days: float, clock: Callable[[], int], embedder: Embedder | None = None):
        self.path = path
        self.ttl = int(ttl_days * NANOS_PER_DAY)
        self.clock = clock
        self.embedder = embedder
        self.embedder_name = "" if embedder is None else embedder.name
        self._lock = threading.Lock()
        durable.ensure_dir(path.parent)
        self._db = self._open()
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
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                log.error("lessons storage error", extra={"while": what, "error": type(exc).__name__})
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise _storage_error(exc, what) from exc

    def purge_expired(self) -> int:
        """Delete lessons past their expiry; returns how many."""
        with self._transaction("purging expired lessons") as db:
            return db.execute("DELETE FROM lessons WHERE expires_at <= ?", (self.clock(),)).rowcount

    # -- record --------------------------------------------------------------

    def record(self, new: NewLesson) -> Recorded:
        """Store a resolved lesson, or refresh the one it repeats; discard other outcomes."""
        tool_name, symptom = _check_new(new)
        if new.outcome != "resolved":
            return Recorded(None, stored=False, refreshed=False, detail=(
                f"outcome {new.outcome} is not stored: only resolved lessons are kept, "
                "so an approach that did not work is never suggested again"))
        keywords = _user_keywords(new.keywords)
        vector = self._embed_one(f"{symptom}\n{new.cause}")
        now = self.clock()
        with self._transaction("recording a lesson") as db:
            db.execute("DELETE FROM lessons WHERE expires_at <= ?", (now,))
            key = (tool_name.casefold(), normalize_symptom(symptom))
            row = db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE tool_key = ? AND symptom_key = ?", key).fetchone()
            if row is None:
                lesson = Lesson(id=uuid.uuid4().hex, tool_name=tool_name, keywords=[], symptom=symptom,
                                cause=new.cause, action=new.action, session_id=new.session_id, created_at=now,
                                last_hit=now, expires_at=now + self.ttl, hit_count=0)
            else:
                lesson = _lesson(row)
                keywords = _user_keywords(lesson.keywords + keywords)
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
        tool_name = _check_tool_name(tool_name)
        _check_size("error_text", error_text, MAX_ERROR_TEXT_BYTES)
        limit = _clamp(limit, DEFAULT_LOOKUP_LIMIT, MAX_LOOKUP_LIMIT)
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

    def _similarities(self, error_text: str, lessons: list[Lesson], rows: list[tuple]) -> dict[str, float]:
        """Cosine of the error text with each lesson at or above MIN_SIMILARITY; {} without an embedder."""
        query = self._embed_one(error_text)
        if query is None:
            return {}
        vectors: dict[str, array.array] = {}
        stale: list[Lesson] = []
        for lesson, row in zip(lessons, rows):
            stored = row[-2]
            if stored is not None and row[-1] == self.embedder_name and len(stored) == len(query) * 4:
                vectors[lesson.id] = array.array("f", stored)
            else:
                stale.append(lesson)
        if stale:
            vectors.update(self._reembed(stale))
        scores = {lesson_id: cosine(query, vector) for lesson_id, vector in vectors.items()}
        return {lesson_id: score for lesson_id, score in scores.items() if score >= MIN_SIMILARITY}

    def _reembed(self, lessons: list[Lesson]) -> dict[str, array.array]:
        """Embed lessons stored without a current vector (embedder changed or failed earlier) and keep them."""
        vectors = self._embed([f"{lesson.symptom}\n{lesson.cause}" for lesson in lessons])
        if vectors is None:
            return {}
        with self._transaction("storing lesson vectors") as db:
            for lesson, vector in zip(lessons, vectors):
                db.execute("UPDATE lessons SET vector = ?, vector_model = ? WHERE id = ?",
                           (vector.tobytes(), self.embedder_name, lesson.id))
        return {lesson.id: vector for lesson, vector in zip(lessons, vectors)}

    def _embed(self, texts: list[str]) -> list[array.array] | None:
        if self.embedder is None:
            return None
        try:
            vectors = self.embedder.embed(texts)
        except Exception as exc:  # noqa: BLE001 - whatever the embedder raises, keyword relevance still answers
            log.warning("lesson embedding failed; keyword lookup only", extra={"error": type(exc).__name__})
            return None
        return [array.array("f", vector) for vector in vectors]

    def _embed_one(self, text: str) -> array.array | None:
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
        limit = _clamp(limit, DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)
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
        page_size = _clamp(page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        where, args = ["expires_at > ?"], [self.clock()]
        if tool_name:
            where.append("tool_key = ?")
            args.append(_check_tool_name(tool_name).casefold())
        if page_token:
            created_at, last_id = _decode_token(page_token)
            where.append("(created_at < ? OR (created_at = ? AND id < ?))")
            args += [created_at, created_at, last_id]
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE {' AND '.join(where)} "
                                    "ORDER BY created_at DESC, id DESC LIMIT ?", (*args, page_size + 1)).fetchall()
        lessons = [_lesson(row) for row in rows[:page_size]]
        return lessons, _encode_token(lessons[-1]) if len(rows) > page_size else ""

    def update_action(self, lesson_id: str, action: str) -> Lesson:
        """Rewrite a lesson's action; its TTL, hits and everything else stay as they were."""
        _check_id(lesson_id)
        action = _check_text("action", action)
        with self._transaction("updating a lesson") as db:
            lesson = self._live(db, lesson_id)
            lesson.action = action
            db.execute("UPDATE lessons SET action = ?, haystack = ? WHERE id = ?",
                       (action, _haystack(lesson), lesson_id))
        log.info("lesson updated", extra={"id": lesson_id})
        return lesson

    def delete(self, lesson_id: str) -> Lesson:
        _check_id(lesson_id)
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


# -- validation and helpers ------------------------------------------------------

def _check_new(new: NewLesson) -> tuple[str, str]:
    tool_name = _check_tool_name(new.tool_name)
    if not new.outcome:
        raise InvalidArgument("outcome is required: resolved, failed or abandoned", reason="OUTCOME_REQUIRED")
    if new.outcome not in OUTCOMES:
        raise InvalidArgument(f"outcome must be one of {', '.join(OUTCOMES)}", reason="INVALID_OUTCOME")
    symptom = _check_text("symptom", new.symptom)
    _check_size("cause", new.cause, MAX_TEXT_BYTES)
    if new.outcome == "resolved":
        _check_text("action", new.action)
    else:
        _check_size("action", new.action, MAX_TEXT_BYTES)
    if new.session_id:
        check_session_id(new.session_id)
    if len(new.keywords) > MAX_KEYWORDS:
        raise InvalidArgument(f"{len(new.keywords)} keywords; at most {MAX_KEYWORDS}", reason="TOO_MANY_KEYWORDS")
    for keyword in new.keywords:
        if len(keyword) > MAX_KEYWORD_CHARS:
            raise InvalidArgument(f"a keyword is longer than {MAX_KEYWORD_CHARS} characters",
                                  reason="KEYWORD_TOO_LONG")
    return tool_name, symptom


def _check_tool_name(tool_name: str) -> str:
    tool_name = tool_name.strip()
    if not tool_name:
        raise InvalidArgument("tool_name is required", reason="TOOL_NAME_REQUIRED")
    if len(tool_name) > MAX_TOOL_NAME_CHARS or any(unicodedata.category(c)[0] == "C" for c in tool_name):
        raise InvalidArgument(f"tool_name must be 1-{MAX_TOOL_NAME_CHARS} printable characters",
                              reason="INVALID_TOOL_NAME")
    return tool_name


def _check_text(field: str, text: str) -> str:
    if not text.strip():
        raise InvalidArgument(f"{field} is required and must not be blank", reason=f"{field.upper()}_REQUIRED")
    _check_size(field, text, MAX_TEXT_BYTES)
    return text.strip()


def _check_size(field: str, text: str, limit: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise InvalidArgument(f"{field} is {size} bytes; at most {limit}", reason="FIELD_TOO_LARGE",
                              metadata={"field": field})


def _check_id(lesson_id: str) -> None:
    if not lesson_id:
        raise InvalidArgument("id is required", reason="ERROR_ID_REQUIRED")
    if len(lesson_id) > 64:
        raise InvalidArgument("id is not an error record id", reason="INVALID_ERROR_ID")


def _user_keywords(keywords: list[str]) -> list[str]:
    """Trimmed, blank and automatic ones dropped, case-insensitive duplicates dropped, order kept."""
    kept: dict[str, str] = {}
    for keyword in keywords:
        keyword = keyword.strip()
        if keyword and not keyword.casefold().startswith(ERROR_TYPE_PREFIX):
            kept.setdefault(keyword.casefold(), keyword)
    return list(kept.values())[:MAX_KEYWORDS]


def _clamp(value: int, default: int, most: int) -> int:
    return min(value or default, most)


def _encode_token(lesson: Lesson) -> str:
    return base64.urlsafe_b64encode(f"{lesson.created_at}.{lesson.id}".encode()).decode().rstrip("=")


def _decode_token(token: str) -> tuple[int, str]:
    try:
        created_at, last_id = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().split(".")
        if not re.fullmatch(r"[0-9a-f]{32}", last_id):
            raise ValueError(last_id)
        return int(created_at), last_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgument("page_token is not one this server issued; start again with an empty token",
                              reason="INVALID_PAGE_TOKEN") from None
