"""One immutable generation of a session's vector index: a frozen set of
vectors with an Annoy index over them.

Owns building a generation, in a child process (`python -m memsvc.annoygen`)
so that the build's CPU time never holds the server's GIL; opening one, only
after its files pass the manifest's checks; and nearest-neighbour queries on
it, exact when few items qualify. Must never decide when to build or what a
session holds (vectors.py).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import msgspec
import numpy as np
from annoy import AnnoyIndex

from . import durable, vectorfiles
from .vectorfiles import ROW_DTYPE, GenerationInfo

EXACT_ITEMS = 20_000
"Up to this many items a single-threaded exact scan is faster than Annoy (and never wrong)."
EXACT_SUBSET = 4096
"Up to this many qualifying items of a larger generation, an exact scan of just them beats Annoy."


class Damaged(Exception):
    """A generation's files failed their checks; it must be rebuilt, never loaded."""


class Eligible(msgspec.Struct, frozen=True):
    """Which messages a query may return: ids in [first_id, below_id), sent in [since, until)."""

    first_id: int
    below_id: int
    since: int
    until: int

    def mask(self, rows: np.ndarray) -> np.ndarray:
        ids, sent = rows["id"], rows["send_at"]
        return (ids >= self.first_id) & (ids < self.below_id) & (sent >= self.since) & (sent < self.until)

    def admits(self, id_: int, send_at: int) -> bool:
        return self.first_id <= id_ < self.below_id and self.since <= send_at < self.until

    def covers(self, low_id: int, high_id: int, earliest: int, latest: int) -> bool:
        """True when every row within these extremes qualifies."""
        return (low_id >= self.first_id and high_id < self.below_id
                and earliest >= self.since and latest < self.until)


class Scored(msgspec.Struct):
    ids: np.ndarray
    scores: np.ndarray


def best(ids: np.ndarray, scores: np.ndarray, limit: int) -> Scored:
    """The `limit` highest scores, best first; ties go to the newer message."""
    if len(ids) > limit:
        keep = np.argpartition(-scores, limit - 1)[:limit]
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((-ids, -scores))
    return Scored(ids[order], scores[order])


def exact(rows: np.ndarray, vectors: np.ndarray, query: np.ndarray, limit: int, eligible: Eligible) -> Scored:
    mask = eligible.mask(rows)
    if not mask.any():
        return Scored(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    if mask.all():  # the common case: no copy of the vectors
        return best(np.asarray(rows["id"]), vectors @ query, limit)
    chosen = np.flatnonzero(mask)
    return best(np.asarray(rows["id"][chosen]), vectors[chosen] @ query, limit)


class Generation:
    def __init__(self, info: GenerationInfo, rows: np.ndarray, vectors: np.ndarray, index: AnnoyIndex | None):
        self.info = info
        self.rows = rows
        self.vectors = vectors
        self.index = index
        "None while only the Annoy file is damaged: queries scan exactly until the rebuild lands."
        ids, sent = rows["id"], rows["send_at"]
        self.extremes = (int(ids.min()), int(ids.max()), int(sent.min()), int(sent.max())) if len(rows) else None

    @property
    def number(self) -> int:
        return self.info.number

    @classmethod
    def open(cls, directory: Path, info: GenerationInfo, dimension: int) -> Generation:
        """Check every file against the manifest, then map it. Raises Damaged.

        Rows and vectors that pass while the Annoy file does not are still
        served (exactly): the caller rebuilds the index from them.
        """
        rows_name, vectors_name, index_name = vectorfiles.generation_names(info.number)
        damaged = vectorfiles.damaged_files(directory, info)
        if rows_name in damaged or vectors_name in damaged:
            raise Damaged(f"generation {info.number}: {', '.join(damaged)} failed the manifest check")
        try:
            rows = np.load(directory / rows_name, mmap_mode="r", allow_pickle=False)
            vectors = np.load(directory / vectors_name, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            raise Damaged(f"generation {info.number}: {exc}") from None
        if rows.dtype != ROW_DTYPE or vectors.shape != (info.items, dimension) or len(rows) != info.items:
            raise Damaged(f"generation {info.number}: shapes do not match the manifest")
        index = None
        if index_name not in damaged:
            index = AnnoyIndex(dimension, "angular")
            index.load(str(directory / index_name))
            if index.get_n_items() != info.items:
                index.unload()
                index = None
        return cls(info, rows, vectors, index)

    def nearest(self, query: np.ndarray, limit: int, eligible: Eligible, search_k: int) -> Scored:
        if self.index is None or len(self.rows) <= EXACT_ITEMS:
            return exact(self.rows, self.vectors, query, limit, eligible)
        share = 1.0
        if not eligible.covers(*self.extremes):
            qualifying = int(eligible.mask(self.rows).sum())
            if qualifying <= EXACT_SUBSET:
                return exact(self.rows, self.vectors, query, limit, eligible)
            share = qualifying / len(self.rows)
        wanted = min(len(self.rows), math.ceil(limit / share * 1.5))
        items, distances = self.index.get_nns_by_vector(query.tolist(), wanted, search_k=max(search_k, wanted),
                                                         include_distances=True)
        chosen = np.asarray(items, dtype=np.int64)
        # Annoy's angular distance is sqrt(2 - 2 cos) between unit vectors.
        scores = 1.0 - np.square(np.asarray(distances, dtype=np.float32)) / 2.0
        keep = eligible.mask(self.rows[chosen])
        if keep.sum() < limit and wanted < len(self.rows):
            return exact(self.rows, self.vectors, query, limit, eligible)
        return best(np.asarray(self.rows["id"][chosen[keep]]), scores[keep], limit)


# -- building (the child process) ----------------------------------------------

def command(directory: Path, number: int, dimension: int, trees: int, first_id: int,
            previous: int | None, tails: list[int]) -> list[str]:
    """The child process that builds generation `number` from the previous one and tail segments."""
    argv = [sys.executable, "-m", "memsvc.annoygen", str(directory), "--number", str(number),
            "--dimension", str(dimension), "--trees", str(trees), "--first-id", str(first_id)]
    if previous is not None:
        argv += ["--previous", str(previous)]
    for segment in tails:
        argv += ["--tail", str(segment)]
    return argv


def parse_report(stdout: bytes) -> GenerationInfo | None:
    """The child's report: the new generation, or None when nothing was left to index."""
    return msgspec.json.decode(stdout, type=GenerationInfo | None)


def _inputs(directory: Path, dimension: int, previous: int | None, tails: list[int]
            ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rows, vectors = [], []
    if previous is not None:
        rows_name, vectors_name, _ = vectorfiles.generation_names(previous)
        rows.append(np.load(directory / rows_name, allow_pickle=False))
        vectors.append(np.load(directory / vectors_name, allow_pickle=False))
    for segment in tails:
        path = directory / vectorfiles.tail_name(segment)
        if path.exists():
            tail = vectorfiles.read_tail(path, dimension)
            rows.append(tail.rows)
            vectors.append(tail.vectors)
    return rows, vectors


def build(directory: Path, number: int, dimension: int, trees: int, first_id: int, previous: int | None,
          tails: list[int]) -> GenerationInfo | None:
    parts, vector_parts = _inputs(directory, dimension, previous, tails)
    rows = np.concatenate(parts) if parts else np.zeros(0, dtype=ROW_DTYPE)
    vectors = np.concatenate(vector_parts) if vector_parts else np.zeros((0, dimension), dtype=np.float32)
    live = np.flatnonzero(rows["id"] >= first_id)
    _, first_seen = np.unique(rows["id"][live], return_index=True)  # sorted by id; a repeated id keeps its first
    chosen = live[first_seen]
    rows, vectors = rows[chosen], np.ascontiguousarray(vectors[chosen], dtype=np.float32)
    if not len(rows):
        return None
    rows_name, vectors_name, index_name = vectorfiles.generation_names(number)
    vectorfiles.save_array(directory / rows_name, rows)
    vectorfiles.save_array(directory / vectors_name, vectors)
    temporary = directory / f".{index_name}.tmp"
    index = AnnoyIndex(dimension, "angular")
    index.set_seed(number)
    index.on_disk_build(str(temporary))
    for item, vector in enumerate(vectors):
        index.add_item(item, vector.tolist())
    index.build(trees, n_jobs=1)
    index.unload()
    vectorfiles.publish(temporary, directory / index_name)
    durable.fsync_dir(directory)
    files = [vectorfiles.file_sum(directory / name) for name in (rows_name, vectors_name, index_name)]
    return GenerationInfo(number=number, items=len(rows), trees=trees, files=files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsvc.annoygen", description=__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--number", type=int, required=True)
    parser.add_argument("--dimension", type=int, required=True)
    parser.add_argument("--trees", type=int, required=True)
    parser.add_argument("--first-id", type=int, required=True)
    parser.add_argument("--previous", type=int)
    parser.add_argument("--tail", type=int, action="append", default=[])
    args = parser.parse_args(argv)
    info = build(args.directory, args.number, args.dimension, args.trees, args.first_id, args.previous, args.tail)
    sys.stdout.buffer.write(msgspec.json.encode(info))
    return 0


if __name__ == "__main__":
    # Lowest CPU priority: on a small machine a build must yield to the server's requests.
    os.nice(19)
    sys.exit(main())
