"""What only the PostgreSQL backend has to get right, on real servers: its
versioned schema, many servers on one database (one lesson per symptom, no
refresh lost or moved back, one purge at a time), and what a bad setting, an
outage or a refused login look like."""

from __future__ import annotations

import threading

import pytest

from memsvc.core.errors import FailedPrecondition, InvalidSetting, Unavailable
from memsvc.lessons.postgres import PostgresDatabase, PostgresLessonStore
from memsvc.lessons.postgres_schema import LATEST, PURGE_LOCK
from memsvc.lessons.service import Lessons
from tests.support import wait_for
from tests.support.lessons import DAY, T0, Clock, postgres_store, resolved
from tests.support.postgres import PASSWORD, ROLE, PostgresServer


def store(postgres: PostgresServer, database: str, password: str = PASSWORD) -> PostgresLessonStore:
    return postgres_store(postgres.dsn(database), password=password)


def schema_row(postgres: PostgresServer, database: str) -> tuple:
    with postgres.admin(database) as admin:
        return admin.execute("SELECT version, migrated_at FROM memsvc_schema WHERE component = 'lessons'").fetchone()


def test_a_new_database_gets_the_latest_schema_once(postgres, postgres_database):
    store(postgres, postgres_database).close()
    first = schema_row(postgres, postgres_database)
    assert first[0] == LATEST
    store(postgres, postgres_database).close()
    assert schema_row(postgres, postgres_database) == first  # nothing to migrate: the row is untouched
    with postgres.admin(postgres_database) as admin:
        assert admin.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'memsvc_lessons'").fetchone() == (
            ROLE,)


def test_servers_starting_together_migrate_once(postgres, postgres_database):
    ready = threading.Barrier(4)
    opened, failures = [], []

    def start() -> None:
        ready.wait()
        try:
            opened.append(store(postgres, postgres_database))
        except Exception as exc:  # the assertion below shows it
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for each in opened:
        each.close()
    assert failures == [] and len(opened) == 4
    with postgres.admin(postgres_database) as admin:
        assert admin.execute("SELECT component, version FROM memsvc_schema").fetchall() == [("lessons", LATEST)]


def test_a_schema_newer_than_this_memsvc_is_refused(postgres, postgres_database):
    store(postgres, postgres_database).close()
    with postgres.admin(postgres_database) as admin:
        admin.execute("UPDATE memsvc_schema SET version = %s", (LATEST + 1,))
    with pytest.raises(InvalidSetting, match=f"version {LATEST + 1}, newer than this memsvc's"):
        store(postgres, postgres_database)


def test_two_servers_recording_one_symptom_at_once_make_one_lesson(postgres, postgres_database, clock: Clock):
    servers = [Lessons(store(postgres, postgres_database), ttl_days=90, clock=clock) for _ in range(2)]
    ready = threading.Barrier(6)
    replies = []

    def record(lessons: Lessons) -> None:
        ready.wait()
        for _ in range(10):
            replies.append(lessons.record(resolved(symptom="deadlock detected in txn 0a1b2c3d4e")))

    threads = [threading.Thread(target=record, args=(servers[n % 2],)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len({reply.lesson.id for reply in replies}) == 1
        assert sorted(reply.refreshed for reply in replies) == [False] + [True] * 59
        (lesson,) = servers[1].list_page()[0]
        assert lesson.hit_count == 59
    finally:
        for lessons in servers:
            lessons.close()


def test_a_late_refresh_never_moves_expiry_back_and_loses_no_hit(postgres, postgres_database, clock: Clock):
    first, second = store(postgres, postgres_database), store(postgres, postgres_database)
    lesson = Lessons(first, ttl_days=90, clock=clock).record(resolved()).lesson
    ahead = first.refresh([lesson.id], T0 + 10 * DAY, T0 + 100 * DAY)[lesson.id]
    behind = second.refresh([lesson.id], T0 + 5 * DAY, T0 + 95 * DAY)[lesson.id]  # its clock read earlier
    assert (ahead.last_hit, ahead.expires_at, ahead.hit_count) == (T0 + 10 * DAY, T0 + 100 * DAY, 1)
    assert (behind.last_hit, behind.expires_at, behind.hit_count) == (T0 + 10 * DAY, T0 + 100 * DAY, 2)
    first.close()
    second.close()


def test_one_purge_runs_at_a_time(postgres, postgres_database, clock: Clock):
    lessons = Lessons(store(postgres, postgres_database), ttl_days=90, clock=clock)
    lessons.record(resolved())
    clock.advance(91)
    try:
        with postgres.admin(postgres_database) as other_server, other_server.transaction():
            other_server.execute("SELECT pg_advisory_xact_lock(%s)", (PURGE_LOCK,))
            assert lessons.purge_expired() == 0  # the other one is purging: this one does not wait or repeat it
            assert other_server.execute("SELECT count(*) FROM memsvc_lessons").fetchone() == (1,)
        assert lessons.purge_expired() == 1
    finally:
        lessons.close()


@pytest.mark.parametrize("dsn, words", [
    ("host=127.0.0.1 port", "not a PostgreSQL connection string"),
    ("postgresql://memsvc:hunter2@127.0.0.1/lessons", "holds a password"),
    ("host=127.0.0.1 password=hunter2 dbname=lessons", "holds a password"),
])
def test_a_bad_dsn_fails_the_start_and_never_echoes_it(dsn: str, words: str):
    with pytest.raises(InvalidSetting, match=words) as caught:
        PostgresDatabase(dsn, password="", pool_size=1)
    assert "hunter2" not in str(caught.value) and "port" not in str(caught.value)


@pytest.mark.parametrize("database, password, words", [
    (None, "not-the-password", "refused memsvc's login"),
    ("no_such_database", PASSWORD, "does not exist"),
])
def test_a_refused_login_or_a_missing_database_fails_the_start(postgres, postgres_database, database, password,
                                                               words):
    with pytest.raises(InvalidSetting, match=words) as caught:
        store(postgres, database or postgres_database, password)
    assert password not in str(caught.value)


def test_a_database_down_at_start_answers_unavailable_and_serves_once_it_is_back(private_postgres, clock: Clock):
    database = private_postgres.start().create_database()
    private_postgres.stop()
    lessons = Lessons(store(private_postgres, database), ttl_days=90, clock=clock)
    try:
        for call in (lambda: lessons.record(resolved()), lambda: lessons.lookup("web_fetch", "HTTP 403"),
                     lessons.list_page):
            with pytest.raises(Unavailable) as caught:
                call()
            assert caught.value.reason == "LESSONS_DATABASE_UNAVAILABLE"
        assert lessons.unavailable().reason == "LESSONS_DATABASE_UNAVAILABLE"
        private_postgres.start()
        wait_for(lambda: lessons.unavailable() is None, timeout=60)
        lesson = lessons.record(resolved()).lesson  # the schema was made when the database came back
        assert schema_row(private_postgres, database)[0] == LATEST

        private_postgres.stop()  # an outage while serving
        with pytest.raises(Unavailable) as outage:
            lessons.lookup("web_fetch", "HTTP 403 Forbidden")
        assert outage.value.reason == "LESSONS_DATABASE_UNAVAILABLE"
        private_postgres.start()
        wait_for(lambda: lessons.unavailable() is None, timeout=60)
        assert [x.id for x in lessons.lookup("web_fetch", "HTTP 403 Forbidden").lessons] == [lesson.id]
    finally:
        lessons.close()


def test_a_login_refused_while_serving_is_failed_precondition_until_fixed(private_postgres, clock: Clock):
    database = private_postgres.start().create_database()
    lessons = Lessons(store(private_postgres, database), ttl_days=90, clock=clock)
    lesson = lessons.record(resolved()).lesson
    with private_postgres.admin() as admin:
        admin.execute(f"ALTER ROLE {ROLE} PASSWORD 'rotated-elsewhere'")
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (ROLE,))
        wait_for(lambda: admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                                       (ROLE,)).fetchone() == (0,))  # terminating is asynchronous
    try:
        with pytest.raises(FailedPrecondition) as caught:
            lessons.lookup("web_fetch", "HTTP 403 Forbidden")
        assert caught.value.reason == "LESSONS_DATABASE_AUTH_FAILED"
        assert "lessons_password_file" in caught.value.message
        with private_postgres.admin() as admin:
            admin.execute(f"ALTER ROLE {ROLE} PASSWORD '{PASSWORD}'")
        wait_for(lambda: lessons.unavailable() is None, timeout=60)
        assert [x.id for x in lessons.lookup("web_fetch", "HTTP 403 Forbidden").lessons] == [lesson.id]
    finally:
        lessons.close()
