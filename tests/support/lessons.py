"""Error memory's two backends, for the tests that run against both:
`lessons_backend` is parametrized sqlite / postgres, and each gives the
server flags and settings that select it, a store of its own, and a look at
the rows it keeps (expired ones included)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memsvc.core.layout import DEFAULT_TENANT
from memsvc.core.units import NANOS_PER_DAY
from memsvc.lessons.backend import LessonStore
from memsvc.lessons.model import NewLesson
from memsvc.lessons.postgres import PostgresDatabase, PostgresLessonStore
from memsvc.lessons.sqlite import SqliteLessonStore
from tests.support.postgres import PASSWORD, PostgresServer

DAY = NANOS_PER_DAY
T0 = 1_800_000_000 * 10**9


class Clock:
    """Error memory's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now

    def advance(self, days: float) -> None:
        self.now += int(days * DAY)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def resolved(tool: str = "web_fetch", symptom: str = "HTTP 403 Forbidden from cloudflare", **fields: Any) -> NewLesson:
    return NewLesson(tool_name=tool, symptom=symptom, outcome="resolved",
                     action=fields.pop("action", "send a browser User-Agent header"), **fields)


class SqliteBackend:
    name = "sqlite"

    def __init__(self, data_dir: Path):
        self.path = data_dir / ".store" / "lessons.sqlite3"
        self.server_args: list[str] = []
        self.settings: dict[str, str] = {}

    def store(self, clock: Callable[[], int]) -> LessonStore:
        return SqliteLessonStore(self.path, clock=clock)

    def column(self, expression: str) -> list[Any]:
        with sqlite3.connect(self.path) as db:
            return [row[0] for row in db.execute(f"SELECT {expression} FROM lessons")]


class PostgresBackend:
    name = "postgres"

    def __init__(self, server: PostgresServer, database: str):
        self.server = server
        self.database = database
        self.dsn = server.dsn(database)
        self.settings = {"lessons_backend": "postgres", "lessons_dsn": self.dsn,
                         "lessons_password_file": str(server.password_file)}
        self.server_args = [f"--{name.replace('_', '-')}={value}" for name, value in self.settings.items()]

    def store(self, clock: Callable[[], int]) -> LessonStore:
        return postgres_store(self.dsn)

    def column(self, expression: str) -> list[Any]:
        with self.server.admin(self.database) as db:
            return [row[0] for row in db.execute(f"SELECT {expression} FROM memsvc_lessons")]


@pytest.fixture(params=["sqlite", "postgres"])
def lessons_backend(request: pytest.FixtureRequest, data_dir: Path) -> SqliteBackend | PostgresBackend:
    if request.param == "sqlite":
        return SqliteBackend(data_dir)
    return PostgresBackend(request.getfixturevalue("postgres"), request.getfixturevalue("postgres_database"))


class OwnPostgresStore(PostgresLessonStore):
    """A tenant's store that closes its database with it: each test's `Lessons` stands for a
    server of its own, and a server closes its database when it stops."""

    def close(self) -> None:
        self.database.close()


def postgres_store(dsn: str, *, password: str = PASSWORD, pool_size: int = 4,
                   tenant: str = DEFAULT_TENANT) -> PostgresLessonStore:
    return OwnPostgresStore(PostgresDatabase(dsn, password=password, pool_size=pool_size), tenant)
