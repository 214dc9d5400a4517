"""What only the SQLite backend does: its file is WAL with full sync, and a damaged file is kept aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsvc.lessons.service import Lessons
from memsvc.lessons.sqlite import SqliteLessonStore
from tests.support.lessons import T0, Clock, resolved


@pytest.fixture
def path(data_dir: Path) -> Path:
    return data_dir / ".store" / "lessons.sqlite3"


def test_the_file_is_wal_with_full_sync(path: Path, clock: Clock):
    store = SqliteLessonStore(path, clock=clock)
    try:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()


def test_a_damaged_store_is_kept_aside_and_a_new_one_started(path: Path, clock: Clock):
    path.parent.mkdir(parents=True)
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    lessons = Lessons(SqliteLessonStore(path, clock=clock), ttl_days=90, clock=clock)
    assert lessons.record(resolved()).stored
    lessons.close()
    assert [p.name for p in path.parent.glob("lessons.sqlite3.damaged-*")] == [f"lessons.sqlite3.damaged-{T0}"]
