"""Damage in the archive's Tantivy files: found by their footers' checksums, never opened over."""

from pathlib import Path

import pytest

from memsvc.archive import integrity, keywords
from memsvc.archive.index import Archive
from memsvc.core.errors import FailedPrecondition
from memsvc.core.records import Record


@pytest.fixture
def index(tmp_path: Path) -> Path:
    archive = Archive(tmp_path / ".store", commit_interval=0.01)
    for batch in range(3):
        archive.appended("s", [Record(id=batch * 10 + n + 1, role="user", content=f"sandbox {n}", send_at=1)
                               for n in range(10)])
        archive.flush()
    archive.cleared("nobody")
    archive.close()
    return archive.index_dir


def test_an_intact_index_has_no_damage(index: Path):
    assert integrity.damage(index) is None
    assert not integrity.has_orphaned_segments(index)


def test_a_changed_byte_fails_its_checksum(index: Path):
    victim = max(index.glob("*.store"), key=lambda path: path.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[10] ^= 1
    victim.write_bytes(bytes(data))
    assert integrity.damage(index) == f"{victim.name} fails its checksum"


def test_a_missing_segment_file_and_a_missing_meta_are_named(index: Path):
    victim = next(index.glob("*.term"))
    victim.unlink()
    assert integrity.damage(index) == f"segment file {victim.name} is missing"
    (index / "meta.json").unlink()
    assert integrity.damage(index) == "meta.json is missing"
    assert integrity.has_orphaned_segments(index)


def test_an_archive_over_orphaned_segments_touches_nothing_and_refuses_what_needs_it(index: Path):
    (index / "meta.json").unlink()
    before = {path.name: path.read_bytes() for path in index.iterdir()}
    archive = Archive(index.parent.parent, commit_interval=0.01)
    try:
        assert "meta.json is missing" in str(archive.damage.problem)
        archive.appended("s", [Record(id=99, role="user", content="dropped, still in history.json", send_at=1)])
        for call in (lambda: archive.search("s", keywords.parse("sandbox"), 100, 0, 2**63 - 1, 8),
                     lambda: archive.messages("s", 0, 100), archive.flush, lambda: archive.cleared("s")):
            with pytest.raises(FailedPrecondition) as refused:
                call()
            assert refused.value.reason == "ARCHIVE_DAMAGED"
    finally:
        archive.close()
    assert {path.name: path.read_bytes() for path in index.iterdir()} == before
