"""One immutable generation of a session's vector index: a frozen set of
vectors with an Annoy index over them, and exact scoring.

Owns opening a generation, only after its files pass the manifest's checks
(build.py makes them), nearest-neighbour queries on it, exact when few items
qualify, which messages a query may return (`Eligible`), and picking the best
scores. Must never decide when to build or what a session holds (store.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import numpy as np
from annoy import AnnoyIndex

from memsvc.vectors import files
from memsvc.vectors.files import ROW_DTYPE, GenerationInfo

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
        rows_name, vectors_name, index_name = files.generation_names(info.number)
        damaged = files.damaged_files(directory, info)
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
        if self.extremes is not None and not eligible.covers(*self.extremes):
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
