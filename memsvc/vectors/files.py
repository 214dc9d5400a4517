"""The files of one session's vector index, and their integrity checks.

    .store/vectors/<session_id>/
      manifest.json          embedder, dimension, the live generation (each file's size and
                             sha256) and the first live tail segment
      gen-<n>.rows.npy       per item: message id, send_at, crc32 of the content
      gen-<n>.vectors.npy    float32 [items, dimension], unit rows
      gen-<n>.ann            Annoy index over those vectors (item i = row i)
      tail-<m>.log           vectors appended since, one fixed-size checksummed record each

Generation files are immutable: written under a temp name, fsynced, renamed,
and loaded only after their size and sha256 match the manifest (a truncated
Annoy file can crash the process). Tail segments are append-only; a torn or
garbled record is dropped on read, never trusted. Owns these formats. Must
never decide what is indexed (store.py) or build an index (build.py).
"""

from __future__ import annotations

import hashlib
import io
import re
import zlib
from pathlib import Path

import msgspec
import numpy as np

from memsvc.core import durable

FORMAT = 1
MANIFEST = "manifest.json"
ROW_DTYPE = np.dtype([("id", "<i8"), ("send_at", "<i8"), ("check", "<u4")])
_TAIL_NAME = re.compile(r"tail-(\d+)\.log")
_HEADER = 24  # id, send_at, check, crc


def record_size(dimension: int) -> int:
    """Bytes of one tail record."""
    return _HEADER + 4 * dimension


class FileSum(msgspec.Struct):
    name: str
    size: int
    sha256: str


class GenerationInfo(msgspec.Struct):
    number: int
    items: int
    trees: int
    files: list[FileSum]


class Manifest(msgspec.Struct, kw_only=True):
    format: int = FORMAT
    embedder: str
    dimension: int
    generation: GenerationInfo | None = None
    tail_from: int = 1
    "Tail segments numbered from here on are live; older ones went into the generation."


def content_check(content: str) -> int:
    """Ties a vector to the message it was made from (ids restart after a Reset)."""
    return zlib.crc32(content.encode("utf-8", "surrogatepass"))


def generation_names(number: int) -> tuple[str, str, str]:
    """The rows, vectors and Annoy file names of generation `number`."""
    return f"gen-{number}.rows.npy", f"gen-{number}.vectors.npy", f"gen-{number}.ann"


def tail_name(segment: int) -> str:
    return f"tail-{segment}.log"


def tail_segments(directory: Path) -> list[int]:
    found = (_TAIL_NAME.fullmatch(entry.name) for entry in directory.iterdir()) if directory.is_dir() else ()
    return sorted(int(match.group(1)) for match in found if match)


def sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def file_sum(path: Path) -> FileSum:
    return FileSum(path.name, path.stat().st_size, sha256(path))


def damaged_files(directory: Path, info: GenerationInfo) -> list[str]:
    """Names of the generation's files that are missing or differ from the manifest."""
    damaged = []
    for expected in info.files:
        path = directory / expected.name
        try:
            if path.stat().st_size != expected.size or sha256(path) != expected.sha256:
                damaged.append(expected.name)
        except FileNotFoundError:
            damaged.append(expected.name)
    return damaged


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest, or None when it is missing or unreadable (the index is then rebuilt)."""
    try:
        manifest = msgspec.json.decode((directory / MANIFEST).read_bytes(), type=Manifest)
    except (FileNotFoundError, msgspec.DecodeError):
        return None
    return manifest if manifest.format == FORMAT else None


def write_manifest(directory: Path, manifest: Manifest) -> None:
    durable.atomic_write(directory / MANIFEST, msgspec.json.encode(manifest))


def create_manifest(directory: Path, manifest: Manifest) -> None:
    """The first manifest of an empty index: created, never replacing one.

    A crash can only leave it torn before anything was indexed, and a torn
    manifest reads as missing: the (empty) index is rebuilt. Later manifests
    replace it through write_manifest.
    """
    durable.create_new(directory / MANIFEST, msgspec.json.encode(manifest))


def save_array(path: Path, array: np.ndarray) -> None:
    """An .npy file, written atomically."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    durable.atomic_write(path, buffer.getvalue())


class TailRows(msgspec.Struct):
    rows: np.ndarray
    "ROW_DTYPE"
    vectors: np.ndarray
    "float32 [rows, dimension]"
    dropped: int = 0
    "Records whose checksum failed: their messages are embedded again."


class TailWriter:
    """Appends fixed-size records to one tail segment, durably."""

    def __init__(self, path: Path, dimension: int):
        self.path = path
        self.dimension = dimension
        self.record_size = record_size(dimension)

    def append(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        durable.append_file(self.path, self.records(rows, vectors))

    def records(self, rows: np.ndarray, vectors: np.ndarray) -> bytes:
        records = np.zeros((len(rows), self.record_size), dtype=np.uint8)
        records[:, :20] = np.ascontiguousarray(rows, dtype=ROW_DTYPE).view(np.uint8).reshape(len(rows), 20)
        records[:, _HEADER:] = np.ascontiguousarray(vectors, dtype="<f4").view(np.uint8).reshape(len(rows), -1)
        for record in records:
            record[20:24] = np.frombuffer(_crc(record).to_bytes(4, "little"), dtype=np.uint8)
        return records.tobytes()


def _crc(record: np.ndarray | memoryview) -> int:
    data = memoryview(record.tobytes()) if isinstance(record, np.ndarray) else record
    return zlib.crc32(data[_HEADER:], zlib.crc32(data[:20]))


def read_tail(path: Path, dimension: int) -> TailRows:
    """Every intact record of a segment; a torn last record is cut off the file
    so that later appends stay aligned."""
    size = record_size(dimension)
    data = path.read_bytes()
    whole = len(data) - len(data) % size
    if whole != len(data):
        durable.truncate_file(path, whole)
    count = whole // size
    good = np.zeros(count, dtype=bool)
    view = memoryview(data)
    for index in range(count):
        record = view[index * size:(index + 1) * size]
        good[index] = int.from_bytes(record[20:24], "little") == _crc(record)
    raw = np.frombuffer(data, dtype=np.uint8, count=whole).reshape(count, size)
    rows = np.zeros(count, dtype=ROW_DTYPE)
    rows["id"] = raw[:, 0:8].copy().view("<i8").ravel()
    rows["send_at"] = raw[:, 8:16].copy().view("<i8").ravel()
    rows["check"] = raw[:, 16:20].copy().view("<u4").ravel()
    vectors = raw[:, _HEADER:].copy().view("<f4").reshape(count, dimension)
    return TailRows(rows[good], vectors[good], dropped=int(count - good.sum()))
