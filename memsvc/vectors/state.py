"""One session's vector index in memory, and the steps that change it on disk.

Owns the per-session state (the live generation, the in-memory tail, which
messages have vectors, which are pending, which were deleted) and its
transitions: taking what loading.py read from disk, storing a batch of
vectors, planning and installing a generation build, deleting messages,
clearing. Three locks, always taken in this order: `load_lock` (one
loader), `file_lock` (the files), `lock` (the fields; held only for
moments, so the DerivedStore calls never wait on I/O).
Must never embed or decide policy: store.py does.
"""
from __future__ import annotations

import logging
import subprocess
import threading
import time
from pathlib import Path

import msgspec
import numpy as np

from memsvc.core import durable
from memsvc.core.records import Record
from memsvc.vectors import build, files
from memsvc.vectors.embedders.base import Embedder
from memsvc.vectors.files import Manifest, TailWriter
from memsvc.vectors.generation import Damaged, Generation
from memsvc.vectors.loading import LoadedVectors, Tail, sweep

log = logging.getLogger(__name__)

RETRY_SECONDS = (1.0, 2.0, 5.0, 15.0, 30.0, 60.0)


class BuildPlan(msgspec.Struct):
    command: list[str]
    number: int
    previous: int | None
    last_segment: int
    cut: int
    "Tail rows at the rotation: they are all in the segments the build reads."
    epoch: int
    dropped: set[int] = set()
    "Deleted messages the build leaves out."



class SessionVectors:
    def __init__(self, session_id: str, directory: Path):
        self.id = session_id
        self.directory = directory
        self.load_lock = threading.Lock()
        self.file_lock = threading.Lock()
        self.lock = threading.Lock()
        self.loaded = False
        self.epoch = 0
        "Bumped by clear(): work begun before it is discarded."
        self.recovered: list[Record] | None = None
        self.manifest: Manifest | None = None
        self.on_disk = False
        self.generation: Generation | None = None
        self.tail = Tail()
        self.segment = 1
        self.next_number = 1
        self.has_vector: set[int] = set()
        self.pending: dict[int, Record] = {}
        self.prepared: dict[int, np.ndarray] = {}
        "Vectors waiting to be stored: client-supplied, or embedded by a search."
        self.first_id = 0
        self.deleted: set[int] = set()
        "Deleted messages, their vectors maybe still in the files: searches skip them, the next build drops them."
        self._generation_dead: tuple[object, int] = (None, 0)
        self.retry_at = 0.0
        self.failures = 0
        self.building = False
        self.build_process: subprocess.Popen[bytes] | None = None

    # -- fields (callers hold `lock`) ----------------------------------------------

    def queue(self, records: list[Record]) -> None:
        for record in records:
            if record.id >= self.first_id and record.id not in self.has_vector:
                self.pending[record.id] = record

    def raise_floor(self, first_kept_id: int) -> None:
        self.first_id = max(self.first_id, first_kept_id)
        for table in (self.pending, self.prepared):
            for stale in [id_ for id_ in table if id_ < self.first_id]:
                del table[stale]

    def dead_rows(self) -> int:
        tail_rows, _ = self.tail.view()
        return int(self._dead(tail_rows).sum()) + self._dead_in_generation()

    def _dead(self, rows: np.ndarray) -> np.ndarray:
        dead: np.ndarray = rows["id"] < self.first_id
        if self.deleted:
            dead |= self.is_deleted(rows["id"])
        return dead

    def is_deleted(self, ids: np.ndarray) -> np.ndarray:
        return np.isin(ids, np.fromiter(self.deleted, dtype=np.int64, count=len(self.deleted)))

    def _dead_in_generation(self) -> int:
        """Counted once per generation, floor and deletion: the generation never changes, and this runs per
        embed batch (deletions only add to `deleted` until a build installs a new generation)."""
        if self.generation is None:
            return 0
        key = (id(self.generation), self.first_id, len(self.deleted))
        if self._generation_dead[0] != key:
            self._generation_dead = (key, int(self._dead(self.generation.rows).sum()))
        return self._generation_dead[1]

    def delete(self, ids: list[int]) -> int:
        """Forget these messages: their vectors are skipped from now on and left out by the next build;
        returns how many had one. Waits for a store in progress, which may hold some of them."""
        with self.file_lock, self.lock:
            stored = {id_ for id_ in ids if id_ in self.has_vector}
            self.has_vector -= stored
            self.deleted.update(ids)  # also those being embedded now: store() leaves them out
            for id_ in ids:
                self.pending.pop(id_, None)
                self.prepared.pop(id_, None)
            if self.recovered is not None:  # loaded later from this snapshot: it must not hold them
                self.recovered = [record for record in self.recovered if record.id not in self.deleted]
            return len(stored)

    def install(self, loaded: LoadedVectors, records: list[Record]) -> None:
        self.manifest, self.on_disk, self.generation = loaded.manifest, loaded.on_disk, loaded.generation
        self.tail, self.segment, self.next_number = loaded.tail, loaded.next_segment, loaded.next_number
        self.has_vector = loaded.ids - self.deleted
        self.deleted |= loaded.deleted
        self.first_id = max(self.first_id, records[0].id if records else 0)
        self.loaded, self.recovered = True, None
        for stored in [id_ for id_ in self.pending if id_ in self.has_vector]:
            del self.pending[stored]
        self.queue(records)

    def idle(self) -> bool:
        """Nothing in flight: the state can be dropped from memory and loaded again later."""
        if not self.file_lock.acquire(blocking=False):
            return False
        try:
            with self.lock:
                return not (self.building or self.pending or self.prepared or self.build_process)
        finally:
            self.file_lock.release()

    def backoff(self) -> float:
        with self.lock:
            delay = RETRY_SECONDS[min(self.failures, len(RETRY_SECONDS) - 1)]
            self.failures += 1
            self.retry_at = time.monotonic() + delay
            return delay

    def needs_build(self, rebuild_rows: int) -> bool:
        with self.lock:
            if not self.loaded or self.building:
                return False
            items = self.generation.info.items if self.generation is not None else 0
            damaged = self.generation is not None and self.generation.index is None
            grown = self.tail.length >= max(rebuild_rows, items // 20)
            return damaged or grown or self.dead_rows() > 0

    # -- steps that touch files ---------------------------------------------------

    def store(self, rows: np.ndarray, vectors: np.ndarray, epoch: int, embedder: Embedder) -> None:
        with self.file_lock:
            with self.lock:
                if epoch != self.epoch:
                    return
                if self.deleted:  # embedded before its message was deleted (delete() waits for file_lock)
                    keep = ~self.is_deleted(rows["id"])
                    rows, vectors = rows[keep], vectors[keep]
                    if not len(rows):
                        return
                if self.manifest is None:
                    self.manifest = Manifest(embedder=embedder.name, dimension=embedder.dimension)
                manifest, on_disk, segment = self.manifest, self.on_disk, self.segment
            if not on_disk:
                durable.make_dir(self.directory)  # never recreating a data directory deleted under the server
                files.create_manifest(self.directory, manifest)
            TailWriter(self.directory / files.tail_name(segment), manifest.dimension).append(rows, vectors)
            with self.lock:
                self.on_disk = True
                self.tail.extend(rows, vectors)
                stored = rows["id"].tolist()
                self.has_vector.update(stored)
                for id_ in stored:
                    self.pending.pop(id_, None)
                    self.prepared.pop(id_, None)
                self.failures = 0

    def plan_build(self, trees: int) -> BuildPlan | None:
        with self.file_lock, self.lock:
            if not self.loaded or self.building or self.manifest is None or not self.on_disk:
                return None
            self.building = True
            last_segment, cut = self.segment, self.tail.length
            self.segment += 1
            number, self.next_number = self.next_number, self.next_number + 1
            previous = self.generation.number if self.generation is not None else None
            tails = [segment for segment in files.tail_segments(self.directory)
                     if self.manifest.tail_from <= segment <= last_segment]
            command = build.command(self.directory, number, self.manifest.dimension, trees, self.first_id,
                                    previous, tails, dropping=bool(self.deleted))
            return BuildPlan(command, number, previous, last_segment, cut, self.epoch, set(self.deleted))

    def install_build(self, plan: BuildPlan, report: bytes) -> int:
        """Check the new generation's files, then make it live; returns its items."""
        info = build.parse_report(report)
        with self.file_lock:
            if plan.epoch != self.epoch or self.manifest is None:
                return 0
            generation = Generation.open(self.directory, info, self.manifest.dimension) if info else None
            if generation is not None and generation.index is None:
                raise Damaged(f"generation {plan.number}: its Annoy file does not match what was built")
            manifest = msgspec.structs.replace(self.manifest, generation=info, tail_from=plan.last_segment + 1)
            files.write_manifest(self.directory, manifest)
            with self.lock:
                # Concurrent searches may still hold the old generation: it is
                # unmapped when the last of them lets go, never under them.
                self.generation, self.manifest = generation, manifest
                self.tail = self.tail.since(plan.cut)
                # The new generation left out what the build dropped; the rest of the tail may still hold some.
                self.deleted -= plan.dropped - set(self.tail.view()[0]["id"].tolist())
            sweep(self.directory, manifest,
                   [segment for segment in files.tail_segments(self.directory) if segment > plan.last_segment])
        return info.items if info else 0

    def end_build(self) -> None:
        with self.lock:
            self.building = False
            self.build_process = None

    def stop_build(self) -> None:
        with self.lock:
            process = self.build_process
        if process is not None and process.poll() is None:
            process.kill()

    def clear(self) -> int:
        """Drop everything of the session, on disk and in memory; returns the vectors dropped."""
        # No load reads the files while they go (a Reset completed at start races the embedding worker).
        with self.load_lock, self.file_lock:
            with self.lock:
                dropped = self._count()
                self.epoch += 1
                self.loaded, self.recovered, self.manifest, self.on_disk = True, None, None, False
                self.generation, self.tail = None, Tail()
                self.has_vector, self.pending, self.prepared, self.deleted = set(), {}, {}, set()
                self.first_id, self.failures, self.retry_at = 0, 0, 0.0
            self.stop_build()  # after the epoch moved on: the build it ends is seen as cleared, not as failed
            durable.remove_tree(self.directory)
        return dropped

    def _count(self) -> int:
        if self.loaded:
            return self.tail.length + (self.generation.info.items if self.generation is not None else 0)
        manifest = files.read_manifest(self.directory)
        if manifest is None:
            return 0
        record_size = files.record_size(manifest.dimension)
        tails = sum((self.directory / files.tail_name(segment)).stat().st_size // record_size
                    for segment in files.tail_segments(self.directory) if segment >= manifest.tail_from)
        return tails + (manifest.generation.items if manifest.generation is not None else 0)
