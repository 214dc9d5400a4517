"""The archive's move to the current index version at start: an index of the first releases (version 1:
no payload field, the first analyzer), of version 2 (payloads, the first analyzer) or of version 3 (the
stemming analyzer, Tantivy's default 16 KiB blocks of stored documents) is copied, every document with
every field, into `index-v4/`, analyzed anew and stored in DOC_STORE's blocks; a stop at any step loses
nothing."""

from pathlib import Path

import msgspec
import pytest
import tantivy

from memsvc.archive import keywords, reindex
from memsvc.archive.index import Archive, Cutoffs, _schema
from memsvc.core.errors import FailedPrecondition
from memsvc.core.records import Record
from tests.support.archives import FRAMEWORK, PAYLOAD, numbered, old_archive, old_index


def parsed(archive: Archive, query: str) -> tuple[keywords.KeywordQuery, keywords.Statistics]:
    terms = keywords.parse(query)
    return terms, archive.statistics(terms)


def found(archive: Archive, session: str, query: str) -> list[int]:
    return [record.id for record, _ in archive.search(session, *parsed(archive, query), 10**6, 0, 2**63 - 1, 32)]


def index_dirs(store: Path) -> list[str]:
    return sorted(path.name for path in (store / "archive").iterdir() if path.is_dir())


CURRENT = reindex.index_dir(Path(), reindex.VERSION).name


def settings(index_dir: Path) -> dict[str, object]:
    meta = msgspec.json.decode((index_dir / "meta.json").read_bytes())
    assert isinstance(meta, dict)
    return dict(meta["index_settings"])


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_index_is_moved_with_every_field_and_analyzed_anew(tmp_path: Path, version: int):
    store = tmp_path / ".store"
    old_index(store, version, {"f": FRAMEWORK, "g": numbered(3)}, deleted={"g": [2]} if version >= 2 else None)
    cutoffs = store / "archive" / "cutoffs.json"
    cutoffs.write_bytes(msgspec.json.encode(Cutoffs({"f": 104})))
    archive = Archive(store, commit_interval=0.01)
    try:
        moved = archive.messages("f", 0, 100)
        expected = FRAMEWORK if version >= 2 else [msgspec.structs.replace(r, payload="") for r in FRAMEWORK]
        assert moved == expected, "ids, roles, senders, times, contents and payloads byte for byte"
        assert archive.stored("f", [3])[0].payload.encode() == (PAYLOAD.encode() if version >= 2 else b"")
        assert [r.id for r in archive.messages("g", 0, 100)] == ([1, 3] if version >= 2 else [1, 2, 3])
        assert found(archive, "f", "deploying") == [2], "stemmed by the current analyzer"
        assert found(archive, "f", "沙盒") == [5]
        assert archive.start_at("f") == 104, "the cutoffs are the archive's, not the index's: kept"
        archive.appended("f", [Record(id=6, role="tool", content="new", send_at=106, payload="{}")])
        archive.flush()
        assert archive.stored("f", [6])[0].payload == "{}"
    finally:
        archive.close()
    assert index_dirs(store) == [CURRENT]
    assert settings(store / "archive" / CURRENT) == reindex.DOC_STORE
    reopened = Archive(store, commit_interval=0.01)
    try:
        assert found(reopened, "f", "deploy") == [2] and reopened.count("f") == 6
    finally:
        reopened.close()


def test_a_new_index_stores_documents_in_small_blocks_even_after_a_kill_between_its_first_writes(
        tmp_path: Path):
    store = tmp_path / ".store"
    current = store / "archive" / CURRENT
    current.mkdir(parents=True)
    tantivy.Index(_schema(), path=str(current))  # what a kill right after Tantivy made the index leaves
    assert settings(current)["docstore_blocksize"] == 16384, "Tantivy's default"
    archive = Archive(store, commit_interval=0.01)
    try:
        archive.appended("s", [Record(id=1, role="user", content="we deployed the fixes", send_at=1)])
        archive.flush()
        assert found(archive, "s", "deploy") == [1]
    finally:
        archive.close()
    assert settings(current) == reindex.DOC_STORE, "kept by every commit after it"


def test_more_documents_than_one_copy_batch_are_each_moved_once(tmp_path: Path):
    store = tmp_path / ".store"
    old_index(store, 1, {"a": numbered(reindex.COPY_BATCH + 7), "b": numbered(3)})
    archive = Archive(store, commit_interval=0.01)
    try:
        assert archive.count("a") == reindex.COPY_BATCH + 7 and archive.count("b") == 3
        assert [r.id for r in archive.messages("a", 0, reindex.COPY_BATCH + 8)] == list(
            range(1, reindex.COPY_BATCH + 8)), "each message once"
    finally:
        archive.close()


def test_of_a_version_1_and_a_version_2_index_the_newer_is_moved_and_both_are_removed(tmp_path: Path):
    store = tmp_path / ".store"
    # A version-2 server stopped after its own move, before it deleted index/.
    old_archive(store, {"s": ["stale copy"]}, version=1)
    old_index(store, 2, {"s": FRAMEWORK})
    archive = Archive(store, commit_interval=0.01)
    try:
        assert archive.messages("s", 0, 100) == FRAMEWORK
    finally:
        archive.close()
    assert index_dirs(store) == [CURRENT]


def test_a_start_that_stopped_after_the_switch_deletes_the_old_index(tmp_path: Path):
    store = tmp_path / ".store"
    old_archive(store, {"s": ["we deployed the fixes"]})
    old_archive(tmp_path / "other", {"s": ["a second old index"]}, version=2)
    directory = store / "archive"
    reindex._copy(directory / "index", directory / CURRENT, _schema())  # stopped before the old index was deleted
    (tmp_path / "other/archive/index-v2").rename(directory / ".deleting-index-v2")  # stopped while deleting it
    archive = Archive(store, commit_interval=0.01)
    try:
        assert found(archive, "s", "deploying") == [1] and archive.count("s") == 1
    finally:
        archive.close()
    assert index_dirs(store) == [CURRENT]


@pytest.mark.parametrize("meta", [None, b"{half written"])
def test_a_copy_that_did_not_finish_starts_over_from_the_old_index(tmp_path: Path, meta: bytes | None):
    store = tmp_path / ".store"
    old_archive(store, {"s": ["we deployed the fixes", "and more"]}, version=2)
    unfinished = store / "archive" / f"{CURRENT}.reindex"
    unfinished.mkdir()
    if meta is not None:
        (unfinished / "meta.json").write_bytes(meta)
    archive = Archive(store, commit_interval=0.01)
    try:
        assert archive.count("s") == 2 and found(archive, "s", "deploying") == [1]
    finally:
        archive.close()
    assert index_dirs(store) == [CURRENT]


def refused_search(archive: Archive) -> str:
    with pytest.raises(FailedPrecondition) as refused:
        found(archive, "s", "deploy")
    assert refused.value.reason == "ARCHIVE_DAMAGED"
    return str(refused.value)


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_index_without_its_meta_is_neither_moved_nor_erased(tmp_path: Path, version: int):
    store = tmp_path / ".store"
    old = old_archive(store, {"s": ["we deployed the fixes"]}, version=version)
    (old / "meta.json").unlink()
    before = {path.name: path.read_bytes() for path in old.iterdir()}
    archive = Archive(store, commit_interval=0.01)
    try:
        assert "meta.json is missing" in str(archive.damage.problem)
        assert str(old) in refused_search(archive)
    finally:
        archive.close()
    assert {path.name: path.read_bytes() for path in old.iterdir()} == before
    assert index_dirs(store) == [old.name]


def test_an_old_index_failing_its_checksum_is_kept_and_named(tmp_path: Path):
    store = tmp_path / ".store"
    old = old_archive(store, {"s": ["we deployed the fixes", "and more"]})
    victim = max(old.glob("*.store"), key=lambda path: path.stat().st_size)
    damaged = bytearray(victim.read_bytes())
    damaged[10] ^= 1
    victim.write_bytes(bytes(damaged))
    archive = Archive(store, commit_interval=0.01)
    try:
        assert f"{victim.name} fails its checksum" in refused_search(archive)
    finally:
        archive.close()
    assert victim.read_bytes() == bytes(damaged)
    assert index_dirs(store) == ["index"]


def test_an_older_index_without_its_meta_beside_a_current_one_is_left_in_place(tmp_path: Path):
    store = tmp_path / ".store"
    old = old_archive(store, {"s": ["we deployed the fixes"]})
    directory = store / "archive"
    reindex._copy(old, directory / CURRENT, _schema())
    (old / "meta.json").unlink()
    before = {path.name: path.read_bytes() for path in old.iterdir()}
    archive = Archive(store, commit_interval=0.01)
    try:
        assert found(archive, "s", "deploying") == [1]
    finally:
        archive.close()
    assert {path.name: path.read_bytes() for path in old.iterdir()} == before, "segment files are never deleted"
