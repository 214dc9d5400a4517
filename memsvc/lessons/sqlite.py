"""Error memory's own store: `.store/lessons.sqlite3`, one server's (lessons_backend = sqlite).

Owns the SQLite file: WAL mode with synchronous=FULL, so a recorded lesson is
on disk before the reply; a damaged file kept aside and a new one started;
one connection, one writer at a time. Implements backend.LessonStore: stores
and queries, nothing more (service.py decides what a lesson becomes).

Must never import protobuf or grpc, never log lesson text (ids and counts
only), never return an expired lesson, and never answer that a lesson was
stored when its file was deleted under the server (SQLite would write on
into the unlinked file: checked before every commit).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from memsvc.core import durable
from memsvc.core.errors import storage_error
from memsvc.lessons.backend import Merge, Renewal, StoredLesson, SymptomKey, haystack
from memsvc.lessons.model import Lesson

log = logging.getLogger(__name__)

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


def _healthy(db: sqlite3.Connection) -> bool:
    try:
        return bool(db.execute("PRAGMA quick_check").fetchone()[0] == "ok")
    except sqlite3.DatabaseError:
        return False


class SqliteLessonStore:
    """The lesson table in one SQLite file. One connection, one writer at a time (`_lock`)."""

    def __init__(self, path: Path, *, clock: Callable[[], int]):
        self.path = path
        self.clock = clock
        "Only stamps the name of a damaged file kept aside."
        self._lock = threading.Lock()
        durable.ensure_dir(path.parent)
        self._db = self._open()
        self._files = durable.DataPaths([path.parent, path])

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

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for a read, refused once the file was deleted or replaced: an open
        connection would still answer from the deleted file while every write is refused."""
        with self._lock:
            self._files.check()
            yield self._db

    def check(self) -> None:
        """UNAVAILABLE `DATA_DIR_MISSING` once the file is gone; other errors come with each call."""
        self._files.check()

    def purge(self, now: int) -> int:
        with self._transaction("purging expired lessons") as db:
            return db.execute("DELETE FROM lessons WHERE expires_at <= ?", (now,)).rowcount

    def upsert(self, key: SymptomKey, merge: Merge, vector: bytes | None, vector_model: str,
               now: int) -> tuple[Lesson, bool]:
        with self._transaction("recording a lesson") as db:
            db.execute("DELETE FROM lessons WHERE expires_at <= ?", (now,))
            row = db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE tool_key = ? AND symptom_key = ?", key).fetchone()
            lesson = merge(None if row is None else _lesson(row))
            db.execute(f"INSERT OR REPLACE INTO lessons ({_COLUMNS}, tool_key, symptom_key, vector, vector_model, "
                       "haystack) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (lesson.id, lesson.tool_name, msgspec.json.encode(lesson.keywords), lesson.symptom,
                        lesson.cause, lesson.action, lesson.session_id, lesson.created_at, lesson.last_hit,
                        lesson.expires_at, lesson.hit_count, *key, vector, vector_model, haystack(lesson)))
        return lesson, row is not None

    def of_tool(self, tool_key: str, now: int) -> list[StoredLesson]:
        with self._reading() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS}, vector, vector_model FROM lessons WHERE tool_key = ? AND expires_at > ?",
                (tool_key, now)).fetchall()
        return [StoredLesson(_lesson(row), row[-2], row[-1] or "") for row in rows]

    def refresh(self, lesson_ids: Sequence[str], now: int, expires_at: int) -> dict[str, Renewal]:
        renewed = {}
        with self._transaction("refreshing lessons") as db:
            for lesson_id in lesson_ids:
                row = db.execute("UPDATE lessons SET last_hit = max(last_hit, ?), expires_at = max(expires_at, ?), "
                                 "hit_count = hit_count + 1 WHERE id = ? AND expires_at > ? "
                                 "RETURNING last_hit, expires_at, hit_count",
                                 (now, expires_at, lesson_id, now)).fetchone()
                if row is not None:
                    renewed[lesson_id] = Renewal(*row)
        return renewed

    def set_vectors(self, vectors: Mapping[str, bytes], vector_model: str) -> None:
        with self._transaction("storing lesson vectors") as db:
            db.executemany("UPDATE lessons SET vector = ?, vector_model = ? WHERE id = ?",
                           [(vector, vector_model, lesson_id) for lesson_id, vector in vectors.items()])

    def containing(self, folded: str, now: int) -> list[Lesson]:
        with self._reading() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE expires_at > ? AND instr(haystack, ?)",
                              (now, folded)).fetchall()
        return [_lesson(row) for row in rows]

    def page(self, now: int, tool_key: str, after: tuple[int, str] | None, limit: int) -> list[Lesson]:
        where: list[str] = ["expires_at > ?"]
        args: list[int | str] = [now]
        if tool_key:
            where.append("tool_key = ?")
            args.append(tool_key)
        if after is not None:
            created_at, last_id = after
            where.append("(created_at < ? OR (created_at = ? AND id < ?))")
            args += [created_at, created_at, last_id]
        with self._reading() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE {' AND '.join(where)} "
                              "ORDER BY created_at DESC, id DESC LIMIT ?", (*args, limit)).fetchall()
        return [_lesson(row) for row in rows]

    def set_action(self, lesson_id: str, action: str, now: int) -> Lesson | None:
        with self._transaction("updating a lesson") as db:
            lesson = self._live(db, lesson_id, now)
            if lesson is not None:
                lesson.action = action
                db.execute("UPDATE lessons SET action = ?, haystack = ? WHERE id = ?",
                           (action, haystack(lesson), lesson_id))
        return lesson

    def delete(self, lesson_id: str, now: int) -> Lesson | None:
        with self._transaction("deleting a lesson") as db:
            lesson = self._live(db, lesson_id, now)
            if lesson is not None:
                db.execute("DELETE FROM lessons WHERE id = ?", (lesson_id,))
        return lesson

    @staticmethod
    def _live(db: sqlite3.Connection, lesson_id: str, now: int) -> Lesson | None:
        row = db.execute(f"SELECT {_COLUMNS} FROM lessons WHERE id = ? AND expires_at > ?", (lesson_id, now)).fetchone()
        return None if row is None else _lesson(row)
