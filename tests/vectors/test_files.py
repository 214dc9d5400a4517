"""The vector index's files on disk: the manifest, tail segments and the checks
that keep a damaged file from ever being trusted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memsvc.vectors import files
from memsvc.vectors.files import ROW_DTYPE, FileSum, GenerationInfo, Manifest, TailWriter


def rows_of(ids: list[int]) -> np.ndarray:
    rows = np.zeros(len(ids), dtype=ROW_DTYPE)
    rows["id"] = ids
    rows["send_at"] = [1_000 + id_ for id_ in ids]
    rows["check"] = [files.content_check(f"message {id_}") for id_ in ids]
    return rows


def unit_vectors(count: int, dimension: int = 8, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_manifest_round_trips_and_a_torn_or_foreign_one_reads_as_missing(tmp_path: Path):
    assert files.read_manifest(tmp_path) is None
    manifest = Manifest(embedder="builtin-v1", dimension=8, tail_from=3)
    files.create_manifest(tmp_path, manifest)
    assert files.read_manifest(tmp_path) == manifest
    with pytest.raises(FileExistsError):
        files.create_manifest(tmp_path, manifest)  # the first manifest never replaces one
    (tmp_path / files.MANIFEST).write_bytes(b'{"format": 1, "embedder": "bu')
    assert files.read_manifest(tmp_path) is None
    (tmp_path / files.MANIFEST).write_bytes(b'{"format": 99, "embedder": "x", "dimension": 8}')
    assert files.read_manifest(tmp_path) is None


def test_tail_records_round_trip_in_order(tmp_path: Path):
    path = tmp_path / files.tail_name(1)
    writer = TailWriter(path, 8)
    vectors = unit_vectors(5)
    writer.append(rows_of([1, 2, 3]), vectors[:3])
    writer.append(rows_of([4, 5]), vectors[3:])
    tail = files.read_tail(path, 8)
    assert tail.rows["id"].tolist() == [1, 2, 3, 4, 5] and tail.dropped == 0
    assert np.array_equal(tail.vectors, vectors) and np.array_equal(tail.rows, rows_of([1, 2, 3, 4, 5]))
    assert path.stat().st_size == 5 * files.record_size(8)


def test_a_torn_last_record_is_cut_off_so_later_appends_stay_aligned(tmp_path: Path):
    path = tmp_path / files.tail_name(1)
    TailWriter(path, 8).append(rows_of([1, 2]), unit_vectors(2))
    with path.open("ab") as handle:
        handle.write(b"\x07" * 17)  # a crash in the middle of the third record
    assert files.read_tail(path, 8).rows["id"].tolist() == [1, 2]
    assert path.stat().st_size == 2 * files.record_size(8)
    TailWriter(path, 8).append(rows_of([3]), unit_vectors(1, seed=3))
    assert files.read_tail(path, 8).rows["id"].tolist() == [1, 2, 3]


def test_a_garbled_record_is_dropped_and_counted_never_trusted(tmp_path: Path):
    path = tmp_path / files.tail_name(1)
    TailWriter(path, 8).append(rows_of([1, 2, 3]), unit_vectors(3))
    data = bytearray(path.read_bytes())
    data[files.record_size(8) + 30] ^= 0xFF  # a bit flip inside the second record's vector
    path.write_bytes(bytes(data))
    tail = files.read_tail(path, 8)
    assert tail.rows["id"].tolist() == [1, 3] and tail.dropped == 1


def test_tail_segments_are_listed_in_number_order(tmp_path: Path):
    for segment in (10, 2, 1):
        (tmp_path / files.tail_name(segment)).write_bytes(b"")
    (tmp_path / "tail-x.log").write_bytes(b"")
    assert files.tail_segments(tmp_path) == [1, 2, 10]
    assert files.tail_segments(tmp_path / "missing") == []


def test_damaged_files_names_every_missing_resized_or_changed_file(tmp_path: Path):
    names = files.generation_names(4)
    for name in names:
        (tmp_path / name).write_bytes(name.encode() * 10)
    info = GenerationInfo(number=4, items=1, trees=2, files=[files.file_sum(tmp_path / name) for name in names])
    assert files.damaged_files(tmp_path, info) == []
    rows_name, vectors_name, index_name = names
    (tmp_path / rows_name).unlink()
    (tmp_path / vectors_name).write_bytes(b"short")
    same_size = bytearray((tmp_path / index_name).read_bytes())
    same_size[0] ^= 1
    (tmp_path / index_name).write_bytes(bytes(same_size))
    assert files.damaged_files(tmp_path, info) == list(names)


def test_file_sum_is_size_and_sha256(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    assert files.file_sum(path) == FileSum("f", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")


def test_arrays_are_saved_atomically_and_load_back(tmp_path: Path):
    rows = rows_of([7, 8])
    files.save_array(tmp_path / "rows.npy", rows)
    assert np.array_equal(np.load(tmp_path / "rows.npy"), rows)
    assert not list(tmp_path.glob(".*.tmp"))


def test_content_check_ties_a_vector_to_its_text():
    assert files.content_check("hello") == files.content_check("hello")
    assert files.content_check("hello") != files.content_check("hello!")
    assert files.content_check("\udc80 lone surrogate") >= 0  # stored content may hold one
