"""Loading one session's vectors from disk, checked against its history.json.

Owns what a session's vector directory is taken to hold (the manifest, the
live generation, the tail segments after it, read back with damaged records
dropped), the checks against the embedder and against history.json (a
stored vector of another message than the one under its id means the index
is rebuilt; one of a deleted message is marked dead), the sweep of files no
manifest points to, and the in-memory tail the result starts from. Must
never embed nor build: state.py and store.py do.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import msgspec
import numpy as np

from memsvc.core import durable
from memsvc.core.records import Record
from memsvc.vectors import files
from memsvc.vectors.embedders.base import Embedder
from memsvc.vectors.files import ROW_DTYPE, Manifest
from memsvc.vectors.generation import Damaged, Generation

log = logging.getLogger(__name__)

_GENERATION_FILE = re.compile(r"gen-(\d+)\.")


def record_rows(records: list[Record]) -> np.ndarray:
    rows = np.zeros(len(records), dtype=ROW_DTYPE)
    rows["id"] = [record.id for record in records]
    rows["send_at"] = [record.send_at for record in records]
    rows["check"] = [files.content_check(record.content) for record in records]
    return rows


class Tail:
    """Rows appended since the generation: one writer, readers take views.

    Rows below `length` never change, so a view stays valid while the writer
    appends; growing allocates new arrays and leaves old views intact.
    """

    def __init__(self, rows: np.ndarray | None = None, vectors: np.ndarray | None = None):
        self.rows = rows if rows is not None else np.zeros(0, dtype=ROW_DTYPE)
        self.vectors = vectors if vectors is not None else np.zeros((0, 0), dtype=np.float32)
        self.length = len(self.rows)

    def extend(self, rows: np.ndarray, vectors: np.ndarray) -> None:
        needed = self.length + len(rows)
        if needed > len(self.rows) or self.vectors.shape[1] != vectors.shape[1]:
            capacity = max(64, 2 * needed)
            grown_rows = np.zeros(capacity, dtype=ROW_DTYPE)
            grown_vectors = np.zeros((capacity, vectors.shape[1]), dtype=np.float32)
            if self.length:
                grown_rows[:self.length] = self.rows[:self.length]
                grown_vectors[:self.length] = self.vectors[:self.length]
            self.rows, self.vectors = grown_rows, grown_vectors
        self.rows[self.length:needed] = rows
        self.vectors[self.length:needed] = vectors
        self.length = needed

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.rows[:self.length], self.vectors[:self.length]

    def since(self, start: int) -> Tail:
        rows, vectors = self.view()
        return Tail(rows[start:].copy(), vectors[start:].copy())


class LoadedVectors(msgspec.Struct):
    manifest: Manifest
    on_disk: bool
    generation: Generation | None
    tail: Tail
    next_segment: int
    next_number: int
    ids: set[int]
    deleted: set[int] = set()
    "Ids with a stored vector whose message history.json no longer holds (DeleteMessages)."


def _fresh(directory: Path, embedder: Embedder, session_id: str, reason: str) -> LoadedVectors:
    if reason:
        log.warning("vector index rebuilt from history", extra={"session_id": session_id, "reason": reason})
    if directory.exists():
        durable.remove_tree(directory)
    manifest = Manifest(embedder=embedder.name, dimension=embedder.dimension)
    return LoadedVectors(manifest, False, None, Tail(), 1, 1, set())


def load(directory: Path, embedder: Embedder, records: list[Record]) -> LoadedVectors:
    """The session's index as on disk, checked against the embedder and against
    `records` (history.json); anything that does not match is rebuilt."""
    session_id = directory.name
    manifest = files.read_manifest(directory)
    if manifest is None:
        present = directory.is_dir() and any(directory.iterdir())
        return _fresh(directory, embedder, session_id, "manifest missing or unreadable" if present else "")
    if (manifest.embedder, manifest.dimension) != (embedder.name, embedder.dimension):
        return _fresh(directory, embedder, session_id,
                      f"embedder changed from {manifest.embedder}/{manifest.dimension} to "
                      f"{embedder.name}/{embedder.dimension}")
    generation = None
    if manifest.generation is not None:
        try:
            generation = Generation.open(directory, manifest.generation, manifest.dimension)
        except Damaged as damage:
            log.warning("vector generation damaged; its messages are embedded again",
                        extra={"session_id": session_id, "problem": str(damage)})
        else:
            if generation.index is None:
                log.warning("Annoy file damaged; searching exactly until it is rebuilt",
                            extra={"session_id": session_id, "generation": generation.number})
    segments = [segment for segment in files.tail_segments(directory) if segment >= manifest.tail_from]
    parts = [files.read_tail(directory / files.tail_name(segment), manifest.dimension)
             for segment in segments]
    dropped = sum(part.dropped for part in parts)
    if dropped:
        log.warning("damaged tail records dropped; those messages are embedded again",
                    extra={"session_id": session_id, "count": dropped})
    rows = np.concatenate([part.rows for part in parts]) if parts else np.zeros(0, dtype=ROW_DTYPE)
    vectors = (np.concatenate([part.vectors for part in parts]) if parts
               else np.zeros((0, manifest.dimension), dtype=np.float32))
    known = generation.rows["id"] if generation is not None else np.zeros(0, dtype=np.int64)
    _, first = np.unique(rows["id"], return_index=True)
    keep = np.sort(first[~np.isin(rows["id"][first], known)])
    rows, vectors = rows[keep], vectors[keep]
    all_rows = np.concatenate([np.asarray(generation.rows), rows]) if generation is not None else rows
    deleted = _deleted_ids(all_rows, records)
    if deleted is None:
        return _fresh(directory, embedder, session_id, "vectors do not match history.json")
    numbers = [int(match.group(1)) for entry in directory.iterdir() if (match := _GENERATION_FILE.match(entry.name))]
    sweep(directory, manifest if generation is not None else None, segments)
    return LoadedVectors(manifest if generation is not None else msgspec.structs.replace(manifest, generation=None),
                         True, generation, Tail(rows, vectors), max(segments, default=manifest.tail_from - 1) + 1,
                         max(numbers, default=0) + 1, set(all_rows["id"].tolist()) - deleted, deleted)


def _deleted_ids(rows: np.ndarray, records: list[Record]) -> set[int] | None:
    """The ids of stored vectors whose message history.json no longer holds (deleted messages: dead
    until the next build drops them), or None when a stored vector belongs to another message than
    the one history.json holds under its id (a crash between a Reset and its clearing reused ids)."""
    first_id = records[0].id if records else 0
    live = rows[rows["id"] >= first_id]
    if not len(live):
        return set()
    expected = record_rows(records)
    if not len(expected):
        return None
    at = np.minimum(np.searchsorted(expected["id"], live["id"]), len(expected) - 1)
    held = expected["id"][at] == live["id"]
    same = (expected["send_at"][at] == live["send_at"]) & (expected["check"][at] == live["check"])
    if not bool(same[held].all()):
        return None
    return set(live["id"][~held].tolist())


def sweep(directory: Path, manifest: Manifest | None, live_segments: list[int]) -> None:
    """Remove files no manifest points to: a crashed build's output, consumed tail segments."""
    keep = {files.MANIFEST} | {files.tail_name(segment) for segment in live_segments}
    if manifest is not None and manifest.generation is not None:
        keep |= {expected.name for expected in manifest.generation.files}
    for entry in directory.iterdir():
        if entry.name not in keep:
            entry.unlink(missing_ok=True)

