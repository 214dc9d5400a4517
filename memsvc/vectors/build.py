"""Building a generation of a session's vector index, in a child process.

`python -m memsvc.vectors.build` runs at the lowest CPU priority so that a
build's CPU time never holds the server's GIL nor starves its requests. It
reads the previous generation and the tail segments, writes the new
generation's files (temp name, fsync, rename) and reports their sizes and
checksums on stdout for the manifest. Must never touch the manifest: the
server checks the files and installs the generation (state.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import msgspec
import numpy as np
from annoy import AnnoyIndex

from memsvc.core import durable
from memsvc.vectors import files
from memsvc.vectors.files import ROW_DTYPE, GenerationInfo


def command(directory: Path, number: int, dimension: int, trees: int, first_id: int,
            previous: int | None, tails: list[int], dropping: bool = False) -> list[str]:
    """The child process that builds generation `number` from the previous one and tail segments;
    `dropping`: it reads the ids of deleted messages to leave out from its stdin (drop_input)."""
    argv = [sys.executable, "-m", "memsvc.vectors.build", str(directory), "--number", str(number),
            "--dimension", str(dimension), "--trees", str(trees), "--first-id", str(first_id)]
    if previous is not None:
        argv += ["--previous", str(previous)]
    for segment in tails:
        argv += ["--tail", str(segment)]
    if dropping:
        argv.append("--drop-from-stdin")  # any number of ids: an argument has a size limit
    return argv


def drop_input(dropped: set[int]) -> bytes:
    return msgspec.json.encode(sorted(dropped))


def parse_report(stdout: bytes) -> GenerationInfo | None:
    """The child's report: the new generation, or None when nothing was left to index."""
    return msgspec.json.decode(stdout, type=GenerationInfo | None)


def _inputs(directory: Path, dimension: int, previous: int | None, tails: list[int]
            ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rows, vectors = [], []
    if previous is not None:
        rows_name, vectors_name, _ = files.generation_names(previous)
        rows.append(np.load(directory / rows_name, allow_pickle=False))
        vectors.append(np.load(directory / vectors_name, allow_pickle=False))
    for segment in tails:
        path = directory / files.tail_name(segment)
        if path.exists():
            tail = files.read_tail(path, dimension)
            rows.append(tail.rows)
            vectors.append(tail.vectors)
    return rows, vectors


def build(directory: Path, number: int, dimension: int, trees: int, first_id: int, previous: int | None,
          tails: list[int], dropped: list[int] | None = None) -> GenerationInfo | None:
    parts, vector_parts = _inputs(directory, dimension, previous, tails)
    rows = np.concatenate(parts) if parts else np.zeros(0, dtype=ROW_DTYPE)
    vectors = np.concatenate(vector_parts) if vector_parts else np.zeros((0, dimension), dtype=np.float32)
    kept = rows["id"] >= first_id
    if dropped:
        kept &= ~np.isin(rows["id"], np.asarray(dropped, dtype=np.int64))
    live = np.flatnonzero(kept)
    _, first_seen = np.unique(rows["id"][live], return_index=True)  # sorted by id; a repeated id keeps its first
    chosen = live[first_seen]
    rows, vectors = rows[chosen], np.ascontiguousarray(vectors[chosen], dtype=np.float32)
    if not len(rows):
        return None
    rows_name, vectors_name, index_name = files.generation_names(number)
    files.save_array(directory / rows_name, rows)
    files.save_array(directory / vectors_name, vectors)
    temporary = directory / f".{index_name}.tmp"
    index = AnnoyIndex(dimension, "angular")
    index.set_seed(number)
    index.on_disk_build(str(temporary))
    for item, vector in enumerate(vectors):
        index.add_item(item, vector.tolist())
    index.build(trees, n_jobs=1)
    index.unload()
    durable.publish(temporary, directory / index_name)
    sums = [files.file_sum(directory / name) for name in (rows_name, vectors_name, index_name)]
    return GenerationInfo(number=number, items=len(rows), trees=trees, files=sums)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsvc.vectors.build", description=__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--number", type=int, required=True)
    parser.add_argument("--dimension", type=int, required=True)
    parser.add_argument("--trees", type=int, required=True)
    parser.add_argument("--first-id", type=int, required=True)
    parser.add_argument("--previous", type=int)
    parser.add_argument("--tail", type=int, action="append", default=[])
    parser.add_argument("--drop-from-stdin", action="store_true",
                        help="read a JSON list of message ids (deleted messages) to leave out")
    args = parser.parse_args(argv)
    dropped = msgspec.json.decode(sys.stdin.buffer.read(), type=list[int]) if args.drop_from_stdin else None
    info = build(args.directory, args.number, args.dimension, args.trees, args.first_id, args.previous, args.tail,
                 dropped)
    sys.stdout.buffer.write(msgspec.json.encode(info))
    return 0


if __name__ == "__main__":
    # Lowest CPU priority: on a small machine a build must yield to the server's requests.
    os.nice(19)
    sys.exit(main())
