"""Error memory's shared store: PostgreSQL (lessons_backend = postgres), for
many servers on one database.

Owns the connection pool (psycopg 3 and psycopg_pool), shared by every
tenant's store (`PostgresDatabase`), the queries, each kept to its tenant's
rows (`PostgresLessonStore`: a lesson of one tenant is never read, changed or
matched for another), and what keeps each call right when servers share the
database: a recording
holds its symptom's row (SELECT ... FOR UPDATE, a unique index and INSERT
... ON CONFLICT), so two servers recording one symptom at once make one
lesson; hits are counted in SQL and expiry only moves forward, so no refresh
is lost; a refresh locks rows in id order and the purge skips locked rows,
so no two calls deadlock; one purge runs at a time, under an advisory lock.
Implements backend.LessonStore: stores and queries, nothing more. The
schema is postgres_schema.py's, what an error means postgres_errors.py's.

A database out of reach at start does not stop the server: the session
tiers never need it, so error memory answers UNAVAILABLE and reports its
health NOT_SERVING until the database is back, then brings the schema up to
date. A refused login, a missing database or a schema newer than this
memsvc fail the start instead (InvalidSetting, exit 2): waiting fixes none
of them. Between tries on a database found out of reach, calls fail at once
for RETRY_SECONDS rather than each waiting for a connection.

Must never log or return the password, or lesson text.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import msgspec
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout

from memsvc.core.errors import FailedPrecondition, InvalidSetting, MemsvcError, Unavailable
from memsvc.core.reasons import Reason
from memsvc.lessons.backend import Merge, Renewal, StoredLesson, SymptomKey, haystack
from memsvc.lessons.model import Lesson
from memsvc.lessons.postgres_errors import cause, database_error
from memsvc.lessons.postgres_schema import PURGE_LOCK, migrate

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 5
"Longest one connection attempt takes (unless lessons_dsn sets connect_timeout)."
POOL_WAIT_SECONDS = 2.0
"Longest a call waits for a pooled connection."
RECONNECT_SECONDS = 10.0
"How long the pool retries one lost connection (with backoff) before starting afresh: bounds the wait once it is back."
RETRY_SECONDS = 2.0
"After the database was found out of reach, calls fail at once this long before one tries again."
SESSION_SETTINGS = ("SET statement_timeout = '10s'", "SET lock_timeout = '5s'")
"A stuck database or a held lock answers UNAVAILABLE in bounded time, never holds a call."

_COLUMNS = "id, tool_name, body::text, session_id, created_at, last_hit, expires_at, hit_count"
_WRITTEN = ("tenant, id, tool_name, tool_key, symptom_key, body, session_id, created_at, last_hit, expires_at, "
            "hit_count, vector, vector_model, haystack")
_PLACES = "%s, %s, %s, %s, %s, %s::json, %s, %s, %s, %s, %s, %s, %s, %s"

Connection = psycopg.Connection[TupleRow]


class _Body(msgspec.Struct):
    """A lesson's free text, stored as JSON: PostgreSQL text cannot hold NUL, a JSON escape can."""

    keywords: list[str]
    symptom: str
    cause: str
    action: str


_body_decoder = msgspec.json.Decoder(_Body)


def _lesson(row: tuple[Any, ...]) -> Lesson:
    body = _body_decoder.decode(row[2])
    return Lesson(id=row[0], tool_name=row[1], keywords=body.keywords, symptom=body.symptom, cause=body.cause,
                  action=body.action, session_id=row[3], created_at=row[4], last_hit=row[5], expires_at=row[6],
                  hit_count=row[7])


def _body(lesson: Lesson) -> str:
    return msgspec.json.encode(_Body(lesson.keywords, lesson.symptom, lesson.cause, lesson.action)).decode()


def _searchable(text: str) -> str:
    """Haystack and needle without NUL: dropping one character from both keeps every match."""
    return text.replace("\x00", "")


def _possible(lesson_id: str) -> bool:
    """Whether a lesson may have this id: none holds a NUL, which a text parameter cannot carry."""
    return "\x00" not in lesson_id


def _key(key: SymptomKey) -> tuple[str, str]:
    tool_key, symptom = key
    return tool_key, hashlib.sha256(symptom.encode("utf-8", "surrogatepass")).hexdigest()


def _configure(conn: Connection) -> None:
    for statement in SESSION_SETTINGS:
        conn.execute(statement)


class PostgresDatabase:
    """The database every tenant's lessons share: its pool, its schema, whether it answers."""

    def __init__(self, dsn: str, *, password: str, pool_size: int):
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError:  # its text quotes the string, which may hold secrets
            raise InvalidSetting("lessons_dsn is not a PostgreSQL connection string: libpq key=value pairs "
                                 "or a postgresql:// URI") from None
        if "password" in params:
            raise InvalidSetting("lessons_dsn holds a password: put it in lessons_password_file or "
                                 "MEMSVC_LESSONS_PASSWORD, which memsvc never logs")
        self._dsn = dsn
        self._kwargs: dict[str, Any] = {"autocommit": True, "application_name": "memsvc"}
        if "connect_timeout" not in params:
            self._kwargs["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        if password:
            self._kwargs["password"] = password
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            dsn, kwargs=self._kwargs, min_size=1, max_size=pool_size, open=False, configure=_configure,
            check=ConnectionPool.check_connection, timeout=POOL_WAIT_SECONDS, reconnect_timeout=RECONNECT_SECONDS,
            name="memsvc-lessons")
        self._migrated = False
        self._migration_lock = threading.Lock()
        self._failure: MemsvcError | None = None
        self._retry_at = 0.0
        self._prepare()
        self._pool.open(wait=False)

    def _prepare(self) -> None:
        """Migrate at start, on a connection of its own, so a refused login fails the start with its cause."""
        try:
            with psycopg.connect(self._dsn, **self._kwargs) as conn:
                self._migrate(conn)
        except psycopg.Error as exc:
            error = database_error(exc, "preparing the lesson database")
            if error is None:
                raise
            if isinstance(error, FailedPrecondition):
                raise InvalidSetting(f"{error.message} ({cause(exc)})") from None
            self._failed(error, cause(exc))
        except MemsvcError as error:  # a schema newer than this memsvc
            raise InvalidSetting(error.message) from None

    def _migrate(self, conn: Connection) -> None:
        with self._migration_lock:
            if not self._migrated:
                migrate(conn)
                self._migrated = True

    def close(self) -> None:
        self._pool.close()

    # -- connections and their failures ----------------------------------------

    @contextmanager
    def connection(self, what: str) -> Iterator[Connection]:
        failure = self._failure
        if failure is not None and time.monotonic() < self._retry_at:
            raise type(failure)(failure.message, reason=failure.reason)
        try:
            with self._pool.connection() as conn:
                if not self._migrated:
                    self._migrate(conn)
                yield conn
        except PoolTimeout:
            raise self._unreachable(what) from None
        except psycopg.Error as exc:
            error = database_error(exc, what)
            if error is None:  # a bug of ours: INTERNAL, logged without the data the database's text may quote
                raise RuntimeError(f"lesson database error {type(exc).__name__} ({exc.sqlstate}) "
                                   f"while {what}") from None
            log.warning("lesson database error", extra={"while": what, "reason": error.reason, "cause": cause(exc)})
            raise error from None
        if self._failure is not None:
            self._failure = None
            log.info("lesson database reachable again")

    def _unreachable(self, what: str) -> MemsvcError:
        """No pooled connection in time: a connection of its own tells whether the database is
        down (then calls fail fast for a while) or only busy."""
        try:
            psycopg.connect(self._dsn, **self._kwargs).close()
        except psycopg.Error as exc:
            error = database_error(exc, what) or Unavailable(
                f"error memory's database cannot be reached while {what}; retry later",
                reason=Reason.LESSONS_DATABASE_UNAVAILABLE)
            self._failed(error, cause(exc))
            return error
        return Unavailable(f"no connection to error memory's database came free in {POOL_WAIT_SECONDS:g} s "
                           f"while {what}; retry later", reason=Reason.LESSONS_DATABASE_UNAVAILABLE)

    def _failed(self, error: MemsvcError, why: str) -> None:
        if self._failure is None:
            log.error("lesson database out of reach; error memory refuses calls until it answers again",
                      extra={"reason": error.reason, "cause": why})
        self._failure = error
        self._retry_at = time.monotonic() + RETRY_SECONDS

    def check(self) -> None:
        with self.connection("checking the lesson database") as conn:
            conn.execute("SELECT 1")

class PostgresLessonStore:
    """One tenant's lessons in the shared database: every query is kept to `tenant`'s rows."""

    def __init__(self, database: PostgresDatabase, tenant: str):
        self.database = database
        self.tenant = tenant

    def close(self) -> None:
        """Nothing of the tenant's own to release: the database closes once, with the server."""

    def check(self) -> None:
        self.database.check()

    # -- the LessonStore calls ---------------------------------------------------

    def purge(self, now: int) -> int:
        with self.database.connection("purging expired lessons") as conn, conn.transaction():
            locked = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (PURGE_LOCK,)).fetchone()
            if locked is None or not locked[0]:
                return 0  # another server is purging
            return conn.execute("DELETE FROM memsvc_lessons WHERE id IN (SELECT id FROM memsvc_lessons "
                                "WHERE tenant = %s AND expires_at <= %s FOR UPDATE SKIP LOCKED)",
                                (self.tenant, now)).rowcount

    def upsert(self, key: SymptomKey, merge: Merge, vector: bytes | None, vector_model: str,
               now: int) -> tuple[Lesson, bool]:
        tool_key, symptom_key = _key(key)
        with self.database.connection("recording a lesson") as conn:
            while True:
                with conn.transaction():
                    conn.execute("DELETE FROM memsvc_lessons WHERE tenant = %s AND tool_key = %s AND symptom_key = %s "
                                 "AND expires_at <= %s", (self.tenant, tool_key, symptom_key, now))
                    row = conn.execute(f"SELECT {_COLUMNS} FROM memsvc_lessons WHERE tenant = %s AND tool_key = %s "
                                       "AND symptom_key = %s FOR UPDATE",
                                       (self.tenant, tool_key, symptom_key)).fetchone()
                    lesson = merge(None if row is None else _lesson(row))
                    values = (self.tenant, lesson.id, lesson.tool_name, tool_key, symptom_key, _body(lesson),
                              lesson.session_id, lesson.created_at, lesson.last_hit, lesson.expires_at,
                              lesson.hit_count, vector, vector_model, _searchable(haystack(lesson)))
                    if row is not None:
                        conn.execute(f"UPDATE memsvc_lessons SET ({_WRITTEN}) = ({_PLACES}) "
                                     "WHERE tenant = %s AND id = %s", (*values, self.tenant, lesson.id))
                        break
                    inserted = conn.execute(f"INSERT INTO memsvc_lessons ({_WRITTEN}) VALUES ({_PLACES}) "
                                            "ON CONFLICT (tenant, tool_key, symptom_key) DO NOTHING RETURNING id",
                                            values)
                    if inserted.fetchone() is not None:
                        break
                # another server recorded this symptom first: merge into theirs
        try:  # in a transaction of its own: inside this one, its row locks could deadlock with a refresh
            self.purge(now)
        except MemsvcError as error:  # the lesson is stored; the purge job comes back for the rest
            log.warning("lessons not purged after a recording", extra={"reason": error.reason})
        return lesson, row is not None

    def of_tool(self, tool_key: str, now: int) -> list[StoredLesson]:
        with self.database.connection("looking lessons up") as conn:
            rows = conn.execute(f"SELECT {_COLUMNS}, vector, vector_model FROM memsvc_lessons "
                                "WHERE tenant = %s AND tool_key = %s AND expires_at > %s",
                                (self.tenant, tool_key, now)).fetchall()
        return [StoredLesson(_lesson(row), row[-2], row[-1]) for row in rows]

    def refresh(self, lesson_ids: Sequence[str], now: int, expires_at: int) -> dict[str, Renewal]:
        with self.database.connection("refreshing lessons") as conn:
            rows = conn.execute(
                "WITH hit AS (SELECT id FROM memsvc_lessons WHERE tenant = %(tenant)s AND id = ANY(%(ids)s) "
                "AND expires_at > %(now)s "
                "ORDER BY id FOR UPDATE) "
                "UPDATE memsvc_lessons AS lesson SET last_hit = GREATEST(lesson.last_hit, %(now)s), "
                "expires_at = GREATEST(lesson.expires_at, %(expires_at)s), hit_count = lesson.hit_count + 1 "
                "FROM hit WHERE lesson.id = hit.id RETURNING lesson.id, lesson.last_hit, lesson.expires_at, "
                "lesson.hit_count", {"tenant": self.tenant, "ids": list(lesson_ids), "now": now,
                                     "expires_at": expires_at}).fetchall()
        return {row[0]: Renewal(*row[1:]) for row in rows}

    def set_vectors(self, vectors: Mapping[str, bytes], vector_model: str) -> None:
        with self.database.connection("storing lesson vectors") as conn:
            conn.cursor().executemany("UPDATE memsvc_lessons SET vector = %s, vector_model = %s "
                                      "WHERE tenant = %s AND id = %s",
                                      [(vector, vector_model, self.tenant, lesson_id)
                                       for lesson_id, vector in vectors.items()])

    def containing(self, folded: str, now: int) -> list[Lesson]:
        with self.database.connection("searching lessons") as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM memsvc_lessons WHERE tenant = %s AND expires_at > %s "
                                "AND strpos(haystack, %s) > 0", (self.tenant, now, _searchable(folded))).fetchall()
        return [_lesson(row) for row in rows]

    def page(self, now: int, tool_key: str, after: tuple[int, str] | None, limit: int) -> list[Lesson]:
        where: list[str] = ["tenant = %s", "expires_at > %s"]
        args: list[int | str] = [self.tenant, now]
        if tool_key:
            where.append("tool_key = %s")
            args.append(tool_key)
        if after is not None:
            where.append("(created_at, id) < (%s, %s)")
            args += list(after)
        with self.database.connection("listing lessons") as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM memsvc_lessons WHERE {' AND '.join(where)} "
                                "ORDER BY created_at DESC, id DESC LIMIT %s", (*args, limit)).fetchall()
        return [_lesson(row) for row in rows]

    def set_action(self, lesson_id: str, action: str, now: int) -> Lesson | None:
        if not _possible(lesson_id):
            return None
        with self.database.connection("updating a lesson") as conn, conn.transaction():
            row = conn.execute(f"SELECT {_COLUMNS} FROM memsvc_lessons WHERE tenant = %s AND id = %s "
                               "AND expires_at > %s FOR UPDATE", (self.tenant, lesson_id, now)).fetchone()
            if row is None:
                return None
            lesson = _lesson(row)
            lesson.action = action
            conn.execute("UPDATE memsvc_lessons SET body = %s::json, haystack = %s WHERE tenant = %s AND id = %s",
                         (_body(lesson), _searchable(haystack(lesson)), self.tenant, lesson_id))
        return lesson

    def delete(self, lesson_id: str, now: int) -> Lesson | None:
        if not _possible(lesson_id):
            return None
        with self.database.connection("deleting a lesson") as conn:
            row = conn.execute(f"DELETE FROM memsvc_lessons WHERE tenant = %s AND id = %s AND expires_at > %s "
                               f"RETURNING {_COLUMNS}", (self.tenant, lesson_id, now)).fetchone()
        return None if row is None else _lesson(row)
