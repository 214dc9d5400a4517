"""An archive built with the first analyzer (lowercase, no stemming) is re-indexed on open, losing nothing."""

import pytest

from memsvc.archive import keywords, reindex
from memsvc.archive.index import Archive, _schema
from memsvc.core.errors import FailedPrecondition
from tests.support.archives import old_archive


def parsed(archive: Archive, query: str) -> tuple[keywords.KeywordQuery, keywords.Statistics]:
    terms = keywords.parse(query)
    return terms, archive.statistics(terms)


def found(archive: Archive, session: str, query: str) -> list[int]:
    return [record.id for record, _ in archive.search(session, *parsed(archive, query), 10**6, 0, 2**63 - 1, 32)]


def test_an_old_archive_is_reindexed_from_its_own_messages(tmp_path):
    store = tmp_path / ".store"
    old_archive(store, {"s": ["we deployed the fixes", "nothing here", "沙盒測試"], "t": ["deploying later"]})
    archive = Archive(store)
    try:
        assert archive.count("s") == 3 and archive.count("t") == 1
        assert found(archive, "s", "deploy") == [1] and found(archive, "t", "deploys") == [1]
        assert found(archive, "s", "沙盒") == [3]
        contents = [r.content for r in archive.messages("s", 0, 10)]
        assert contents == ["we deployed the fixes", "nothing here", "沙盒測試"]
    finally:
        archive.close()
    assert sorted(p.name for p in (store / "archive").iterdir() if p.is_dir()) == [
        reindex.index_dir(store / "archive", keywords.ANALYZER_VERSION).name]
    reopened = Archive(store)
    try:
        assert found(reopened, "s", "deploy") == [1]
    finally:
        reopened.close()


def test_a_start_that_stopped_after_the_switch_deletes_the_old_index(tmp_path):
    store = tmp_path / ".store"
    old_archive(store, {"s": ["we deployed the fixes"]})
    directory = store / "archive"
    current = reindex.index_dir(directory, keywords.ANALYZER_VERSION)
    reindex._copy(directory / "index", current, _schema())  # stopped before the old index was deleted
    archive = Archive(store)
    try:
        assert found(archive, "s", "deploying") == [1] and archive.count("s") == 1
    finally:
        archive.close()
    assert not (directory / "index").exists()


def test_a_re_index_that_did_not_finish_starts_over(tmp_path):
    store = tmp_path / ".store"
    old_archive(store, {"s": ["we deployed the fixes", "and more"]})
    current = reindex.index_dir(store / "archive", keywords.ANALYZER_VERSION)
    current.with_name(current.name + ".reindex").mkdir()  # a copy that stopped half way
    archive = Archive(store)
    try:
        assert archive.count("s") == 2 and found(archive, "s", "deploying") == [1]
    finally:
        archive.close()


def refused_search(archive: Archive) -> str:
    with pytest.raises(FailedPrecondition) as refused:
        found(archive, "s", "deploy")
    assert refused.value.reason == "ARCHIVE_DAMAGED"
    return str(refused.value)


def test_an_old_index_without_its_meta_is_neither_re_indexed_nor_erased(tmp_path):
    store = tmp_path / ".store"
    old_archive(store, {"s": ["we deployed the fixes"]})
    old = store / "archive" / "index"
    (old / "meta.json").unlink()
    before = {path.name: path.read_bytes() for path in old.iterdir()}
    archive = Archive(store)
    try:
        assert "meta.json is missing" in str(archive.damage.problem)
        assert str(old) in refused_search(archive)
    finally:
        archive.close()
    assert {path.name: path.read_bytes() for path in old.iterdir()} == before
    assert sorted(path.name for path in (store / "archive").iterdir()) == ["index"]


def test_an_old_index_failing_its_checksum_is_kept_and_named(tmp_path):
    store = tmp_path / ".store"
    old_archive(store, {"s": ["we deployed the fixes", "and more"]})
    old = store / "archive" / "index"
    victim = max(old.glob("*.store"), key=lambda path: path.stat().st_size)
    damaged = bytearray(victim.read_bytes())
    damaged[10] ^= 1
    victim.write_bytes(bytes(damaged))
    archive = Archive(store)
    try:
        assert f"{victim.name} fails its checksum" in refused_search(archive)
    finally:
        archive.close()
    assert victim.read_bytes() == bytes(damaged)
    assert not reindex.index_dir(store / "archive", keywords.ANALYZER_VERSION).exists()
