"""Whether the archive's Tantivy files are intact, and what to tell a person when they are not.

Tantivy ends every file it writes with a footer holding a CRC32 of the
bytes before it (the footer's JSON, its length and a magic number), and
lists the live segments in `meta.json`. A segment file that fails its
checksum or is missing, or segment files with no `meta.json` (Tantivy would
start an empty index over them and garbage-collect them), is damage no retry
can fix. Owns that check, an index's damage once found (`Damage`, shared
by the archive's readers and its writer), and the error every refused call
carries. Must never write or repair a file: a person decides what to do
with a damaged index.
"""

from __future__ import annotations

import logging
import struct
import threading
import zlib
from pathlib import Path

import msgspec

from memsvc.core.errors import FailedPrecondition
from memsvc.core.reasons import Reason

log = logging.getLogger(__name__)

FOOTER_MAGIC = 1337
FOOTER_TAIL = struct.Struct("<II")
"After the footer's JSON: its length and the magic number, little-endian u32s."
SEGMENT_FILES = ("idx", "pos", "term", "store", "fast", "fieldnorm")
"The files every segment of memsvc's schema has (indexed text with positions, stored and fast fields)."
READ_CHUNK = 1 << 20
MERGE_RETRIES = 3
"A merge may delete a segment's files while they are read: meta.json is read again this often."


class _Deletes(msgspec.Struct):
    opstamp: int


class _Segment(msgspec.Struct):
    segment_id: str
    deletes: _Deletes | None = None


class _Meta(msgspec.Struct):
    segments: list[_Segment]


def has_orphaned_segments(index_dir: Path) -> bool:
    """Segment files but no meta.json: opening would start an empty index and erase them."""
    if (index_dir / "meta.json").exists():
        return False
    return any(path.suffix.lstrip(".") in SEGMENT_FILES + ("del",) for path in index_dir.iterdir())


def damage(index_dir: Path) -> str | None:
    """What is wrong with the committed index in `index_dir` (naming the file), or None if it is intact."""
    missing = ""
    for _ in range(MERGE_RETRIES):
        try:
            meta = msgspec.json.decode((index_dir / "meta.json").read_bytes(), type=_Meta)
        except FileNotFoundError:
            return "meta.json is missing"
        except (OSError, msgspec.DecodeError) as exc:
            return f"meta.json cannot be read ({exc})"
        try:
            for segment in meta.segments:
                for path in _files(index_dir, segment):
                    problem = _checked(path)
                    if problem:
                        return problem
            return None
        except FileNotFoundError as exc:
            missing = Path(str(exc.filename)).name  # or merged away meanwhile: look again
    return f"segment file {missing} is missing"


def _files(index_dir: Path, segment: _Segment) -> list[Path]:
    stem = segment.segment_id.replace("-", "")
    files = [index_dir / f"{stem}.{extension}" for extension in SEGMENT_FILES]
    if segment.deletes is not None:
        files.append(index_dir / f"{stem}.{segment.deletes.opstamp}.del")
    return files


def _checked(path: Path) -> str:
    """Empty if `path` matches the checksum in its footer, else what is wrong."""
    with path.open("rb") as file:
        size = file.seek(0, 2)
        if size < FOOTER_TAIL.size:
            return f"{path.name} is truncated ({size} bytes)"
        file.seek(size - FOOTER_TAIL.size)
        length, magic = FOOTER_TAIL.unpack(file.read(FOOTER_TAIL.size))
        body = size - FOOTER_TAIL.size - length
        if magic != FOOTER_MAGIC or body < 0:
            return f"{path.name} has no valid footer"
        file.seek(body)
        try:
            expected = msgspec.json.decode(file.read(length))["crc"]
        except (msgspec.DecodeError, KeyError, TypeError):
            return f"{path.name} has an unreadable footer"
        file.seek(0)
        crc, left = 0, body
        while left:
            chunk = file.read(min(READ_CHUNK, left))
            if not chunk:
                return f"{path.name} is truncated"
            crc, left = zlib.crc32(chunk, crc), left - len(chunk)
    return "" if crc == expected else f"{path.name} fails its checksum"


ORPHANED = "meta.json is missing beside its segment files; they were not opened, so nothing is erased"
ORPHANED_REMEDY = ("stop memsvc, put back meta.json from a backup and start memsvc again (or move the index "
                   "directory aside: the archive is then rebuilt from history.json, without the messages "
                   "compacted out of it)")
REPAIR = ("stop memsvc, restore the index directory from a backup (or move it aside: the archive is then "
          "rebuilt from history.json, without the messages compacted out of it) and start memsvc again")


def engine_failure(exc: BaseException) -> bool:
    """Tantivy reports its errors as ValueError, and a Rust panic as pyo3's PanicException, a BaseException."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


class Damage:
    """What is wrong with one index directory, once found; it stays found until the server restarts."""

    def __init__(self, index_dir: Path):
        self.index_dir = index_dir
        self.problem: str | None = None
        "Why the index cannot be used (naming the file), or None while it can."
        self.remedy = REPAIR
        self._checking = threading.Lock()
        self._intact_at: tuple[int, int] | None = None
        "meta.json's (mtime, size) when the files were last found intact: another failure then is no damage."

    def found(self, problem: str, remedy: str = REPAIR) -> None:
        with self._checking:
            first = self.problem is None
            if first:
                self.problem, self.remedy = problem, remedy
        if first:
            log.error("archive unusable: refusing what needs it, serving the rest", extra={
                "index": str(self.index_dir), "problem": problem, "what_to_do": remedy})

    def look(self) -> bool:
        """Check the files after Tantivy failed (once per state of meta.json); True if they are damaged."""
        with self._checking:
            if self.problem is not None:
                return True
            try:
                meta = (self.index_dir / "meta.json").stat()
                state: tuple[int, int] | None = (meta.st_mtime_ns, meta.st_size)
            except OSError:
                state = None
            if state is not None and state == self._intact_at:
                return False
            problem = damage(self.index_dir)
            if problem is None:
                self._intact_at = state
                return False
        self.found(problem)
        return True

    def check(self) -> None:
        """Raise FAILED_PRECONDITION `ARCHIVE_DAMAGED` once damage was found."""
        if self.problem is not None:
            raise FailedPrecondition(
                f"the archive index {self.index_dir} is unusable: {self.problem}. Keyword search, Compact, Reset "
                "and RemoveSession are refused until it is repaired; history, semantic search and error memory "
                f"keep working. To repair: {self.remedy}", reason=Reason.ARCHIVE_DAMAGED)
