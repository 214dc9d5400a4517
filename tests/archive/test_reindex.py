"""The archive's move to a new index format: an older index's documents copied at start, never lost."""

from pathlib import Path

import pytest

from memsvc.archive import keywords, reindex
from memsvc.archive.index import Archive
from memsvc.core.errors import FailedPrecondition
from memsvc.core.records import Record
from tests.support.old_data import format_1


def test_an_older_index_is_copied_into_the_current_format_and_then_removed(tmp_path: Path):
    store = tmp_path / ".store"
    # More documents than one copy batch, in two sessions.
    old = format_1(store, {"a": reindex.COPY_BATCH + 7, "b": 3})
    archive = Archive(store, commit_interval=0.01)
    try:
        assert archive.index_dir.name == f"index-v{reindex.FORMAT}" and not old.exists()
        assert archive.count("a") == reindex.COPY_BATCH + 7 and archive.count("b") == 3
        assert [r.id for r in archive.messages("a", 0, reindex.COPY_BATCH + 8)] == list(
            range(1, reindex.COPY_BATCH + 8)), "each message once"
        assert [r.id for r, _ in archive.search("b", keywords.parse("sandbox"), 10, 0, 2**63 - 1, 5)] != []
        archive.appended("b", [Record(id=4, role="tool", content="with a payload", send_at=4, payload='{"k": 1}')])
        archive.flush()
        assert archive.stored("b", [3, 4])[0].payload == "" and archive.stored("b", [4])[0].payload == '{"k": 1}'
    finally:
        archive.close()


def test_a_copy_a_kill_interrupted_is_started_over_from_the_old_index(tmp_path: Path):
    store = tmp_path / ".store"
    old = format_1(store, {"a": 5})
    unfinished = store / "archive" / f"index-v{reindex.FORMAT}.reindex"
    unfinished.mkdir()
    (unfinished / "meta.json").write_text("{half written")
    archive = Archive(store, commit_interval=0.01)
    try:
        assert archive.count("a") == 5 and not unfinished.exists() and not old.exists()
    finally:
        archive.close()


def test_an_older_index_that_cannot_be_read_is_left_untouched_and_reported(tmp_path: Path):
    store = tmp_path / ".store"
    old = format_1(store, {"a": 5})
    (old / "meta.json").unlink()  # segment files without meta.json
    before = sorted(path.name for path in old.iterdir())
    archive = Archive(store, commit_interval=0.01)
    try:
        assert archive.damage.problem is not None and "meta.json" in archive.damage.problem
        assert sorted(path.name for path in old.iterdir()) == before
        assert not (store / "archive" / f"index-v{reindex.FORMAT}").exists()
        with pytest.raises(FailedPrecondition) as refused:
            archive.count("a")
        assert refused.value.reason == "ARCHIVE_DAMAGED"
    finally:
        archive.close()
