"""Error memory's PostgreSQL schema, versioned, and how memsvc brings a
database up to it.

Owns the tables (`memsvc_lessons`, and `memsvc_schema`, the version each
memsvc component's tables are at), the migrations in order, and the advisory
locks' keys. Migrations run in one transaction under an advisory lock, so
servers starting together never race and a migration that fails leaves
nothing half done; a database newer than this memsvc is refused, never
written. Must never hold the queries on lessons (postgres.py does).

A new schema version is one more entry at the end of MIGRATIONS, never an
edit of an applied one.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg.rows import TupleRow

from memsvc.core.errors import FailedPrecondition
from memsvc.core.reasons import Reason

log = logging.getLogger(__name__)

COMPONENT = "lessons"
PURGE_LOCK = 0x6D656D7376630001
"Advisory lock keys: 'memsvc' in ASCII, then which lock. One purge at a time."
MIGRATION_LOCK = 0x6D656D7376630002
"One migration at a time."

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: the lessons. Free text (symptom, cause, action, keywords) is a JSON document, `body`: a text
       # column cannot hold NUL, JSON escapes it. symptom_key is a digest: a btree entry has a size limit.
        """CREATE TABLE memsvc_lessons (
            id text COLLATE "C" PRIMARY KEY,
            tool_name text NOT NULL,
            tool_key text NOT NULL,
            symptom_key text NOT NULL,
            body json NOT NULL,
            session_id text NOT NULL,
            created_at bigint NOT NULL,
            last_hit bigint NOT NULL,
            expires_at bigint NOT NULL,
            hit_count bigint NOT NULL,
            vector bytea,
            vector_model text NOT NULL,
            haystack text NOT NULL)""",
        "CREATE UNIQUE INDEX memsvc_lessons_by_symptom ON memsvc_lessons (tool_key, symptom_key)",
        "CREATE INDEX memsvc_lessons_by_age ON memsvc_lessons (created_at DESC, id DESC)",
        "CREATE INDEX memsvc_lessons_by_expiry ON memsvc_lessons (expires_at)",
    ),
    (  # 2: tenants. Every lesson is its tenant's: a symptom is unique within a tenant, lists and searches are
       # kept to one. Lessons recorded before are the default tenant's (a server without tenants_file).
        """ALTER TABLE memsvc_lessons ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT 'default'""",
        "DROP INDEX memsvc_lessons_by_symptom",
        "CREATE UNIQUE INDEX memsvc_lessons_by_symptom ON memsvc_lessons (tenant, tool_key, symptom_key)",
        "DROP INDEX memsvc_lessons_by_age",
        "CREATE INDEX memsvc_lessons_by_age ON memsvc_lessons (tenant, created_at DESC, id DESC)",
        "ALTER TABLE memsvc_lessons ALTER COLUMN tenant DROP DEFAULT",
    ),
)
LATEST = len(MIGRATIONS)


def migrate(conn: psycopg.Connection[TupleRow]) -> int:
    """Bring the database to LATEST; returns the version it was at (0: new). Raises
    FailedPrecondition LESSONS_SCHEMA_TOO_NEW when a newer memsvc has migrated it."""
    with conn.transaction():
        # A migration of a large table takes what it takes, and so does waiting for another server's.
        conn.execute("SET LOCAL statement_timeout = 0")
        conn.execute("SET LOCAL lock_timeout = 0")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS memsvc_schema (component text PRIMARY KEY, version integer NOT NULL, "
                     "migrated_at timestamptz NOT NULL DEFAULT now())")
        row = conn.execute("SELECT version FROM memsvc_schema WHERE component = %s", (COMPONENT,)).fetchone()
        found = 0 if row is None else int(row[0])
        if found > LATEST:
            raise FailedPrecondition(f"the lesson database's schema is version {found}, newer than this memsvc's "
                                     f"({LATEST}): run the newer memsvc, or point lessons_dsn at another database",
                                     reason=Reason.LESSONS_SCHEMA_TOO_NEW)
        for statements in MIGRATIONS[found:]:
            for statement in statements:
                conn.execute(statement)
        if found < LATEST:
            conn.execute("INSERT INTO memsvc_schema (component, version) VALUES (%s, %s) ON CONFLICT (component) "
                         "DO UPDATE SET version = EXCLUDED.version, migrated_at = now()", (COMPONENT, LATEST))
    if found < LATEST:
        log.info("lesson database migrated", extra={"from_version": found, "to_version": LATEST})
    return found
