"""Moving the archive to the current index version, from its own stored messages.

A Tantivy index can neither gain a field (an index written with an older
schema refuses to open with the current one) nor change how it analyzed the
words it holds. So each version has its own directory: `index/` (1: the first
releases), `index-v2/` (2: the stored `payload` field, with the first
analyzer), `index-v3/` (3: the payload and keywords.py's stemming analyzer),
`index-v4/` (4: the same, its stored documents in small blocks, DOC_STORE),
and so on after it. A change to the schema, to keywords.analyzer() or to
DOC_STORE needs a new VERSION. At start, when the current directory holds no committed index,
the newest older one is opened with its own schema and every stored document
of it, of every session, with all its fields, is written into
`index-vN.reindex/` with the current schema and analyzer; only once that is
committed (Tantivy syncs the files it commits) and holds as many documents as
the old one is it renamed to `index-vN/` and the rename synced, and only then
are the older indexes deleted. A stop at any step leaves the old index whole
(an unfinished copy is deleted and made again) or the complete new one (the
older ones are then deleted), and the next start finishes the job.

The archive is the only copy of compacted messages: they are copied over,
never dropped. Segment files are never deleted from a directory without
`meta.json` (integrity.ORPHANED): such an older index is refused if it is the
one to copy, and left in place, logged, once a newer one is committed. An
older index that is damaged (a failed checksum) or that cannot be copied (a
full disk) is refused, kept exactly as it is and named in the error
(`Refused`), so the archive reports it as damage while the rest of the server
serves. Owns the directories and the copy. Must never run while an Archive
has an index open, and never read or write a session's other stores (a
Reset or removal interrupted before the move is completed on the new index
by window/lifecycle.py, like any other); cutoffs.json is not an index's and
stays as it is.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import msgspec
import tantivy

from memsvc.archive import keywords
from memsvc.archive.integrity import ORPHANED, ORPHANED_REMEDY, REPAIR, damage, engine_failure, has_orphaned_segments
from memsvc.core import durable, failpoints

log = logging.getLogger(__name__)

VERSION = 4
"""The index this server writes: 2 added the stored `payload` field, 3 keywords.py's stemming analyzer,
4 DOC_STORE."""
DOC_STORE = {"docstore_compression": "lz4", "docstore_blocksize": 2048}
"""How Tantivy lays out stored documents (its IndexSettings, kept in meta.json). Each hit of a search is
read from its block, decompressed whole: 2 KiB blocks read a stored message in ~5 us where Tantivy's
default 16 KiB took ~11 us (10 hits: half a keyword query), for a document store ~19% larger."""
WRITER_HEAP_BYTES = 64 * 1024 * 1024
COPY_BATCH = 10_000
"Documents read per query while copying: the hits of a whole large index at once would take hundreds of MB."
COPY_REMEDY = ("free disk space if the disk is full (the copy needs about as much again as the old index) and "
               "start memsvc again: the move then starts over")


class Refused(Exception):
    """An older index that is not moved to the current version: nothing was deleted, and `problem` says why."""

    def __init__(self, index_dir: Path, problem: str, remedy: str = REPAIR):
        super().__init__(problem)
        self.index_dir = index_dir
        self.problem = problem
        self.remedy = remedy


def index_dir(directory: Path, version: int) -> Path:
    return directory / ("index" if version == 1 else f"index-v{version}")


def current_index(directory: Path, schema: tantivy.Schema) -> Path:
    """The directory of the index of VERSION, moving the newest older index into it first.

    Raises Refused (having deleted nothing) when the older index is damaged or cannot be copied.
    """
    durable.sweep_deleted(directory)  # an older index or unfinished copy whose deletion a kill interrupted
    current = index_dir(directory, VERSION)
    older = [index_dir(directory, version) for version in range(VERSION - 1, 0, -1)]
    if not _committed(current) and not (current.is_dir() and has_orphaned_segments(current)):
        source = next((path for path in older if path.is_dir() and _holds_an_index(path)), None)
        if source is not None:
            _move(source, current, schema)
    if _committed(current):
        for path in older:
            _remove_older(path)
    return current


def open_index(path: Path, schema: tantivy.Schema) -> tantivy.Index:
    """The index at `path`, made with DOC_STORE's layout if it holds none yet.

    tantivy-py creates an index with Tantivy's default settings only; they can be changed in meta.json
    while the index holds no segment, and Tantivy then writes every segment with them (merges too).
    """
    index = tantivy.Index(schema, path=str(path))  # Tantivy says what is wrong with a damaged meta.json
    meta_path = path / "meta.json"
    meta = msgspec.json.decode(meta_path.read_bytes())
    if not meta["segments"] and meta["index_settings"] != {**meta["index_settings"], **DOC_STORE}:
        meta["index_settings"].update(DOC_STORE)  # also when a kill came between the two writes
        durable.atomic_write(meta_path, msgspec.json.encode(meta))
        index = tantivy.Index(schema, path=str(path))
    index.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer())
    return index


def _committed(path: Path) -> bool:
    return (path / "meta.json").exists()


def _holds_an_index(path: Path) -> bool:
    """meta.json or segment files: anything else (a directory a crash left empty, lock files) holds nothing."""
    return _committed(path) or has_orphaned_segments(path)


def _remove_older(path: Path) -> None:
    if not path.exists():
        return
    if has_orphaned_segments(path):
        log.warning("an older archive index without its meta.json is left in place", extra={
            "index": str(path), "effect": "nothing: the current index does not need it",
            "what_to_do": "delete it once you are sure no backup of its meta.json is to be put back"})
        return
    durable.remove_tree(path)


def _move(source: Path, current: Path, schema: tantivy.Schema) -> None:
    """Copy `source` into a fresh directory and rename it to `current`, or raise Refused with `source` untouched."""
    if has_orphaned_segments(source):
        raise Refused(source, f"{ORPHANED} (nor moved to the current index version)", ORPHANED_REMEDY)
    problem = damage(source)
    if problem is not None:
        raise Refused(source, f"{problem}; it was neither moved to the current index version nor erased")
    fresh = current.with_name(current.name + ".reindex")
    durable.remove_tree(fresh)  # a copy that did not finish, of `source`, still whole: start it over
    started = time.monotonic()
    log.info("archive moving to the current index version", extra={"from": source.name, "to": current.name})
    try:
        copied = _copy(source, fresh, schema)
    except BaseException as exc:
        if not engine_failure(exc):
            raise
        durable.remove_tree(fresh)
        raise Refused(source, f"moving it to the current index version failed ({exc}); it is kept as it was",
                      COPY_REMEDY) from exc
    os.replace(fresh, current)
    durable.fsync_dir(current.parent)
    failpoints.hit("archive.reindex.renamed")
    log.info("archive moved to the current index version", extra={
        "messages": copied, "version": VERSION, "seconds": round(time.monotonic() - started, 1)})


def _copy(source: Path, target: Path, schema: tantivy.Schema) -> int:
    """Every live document of `source`, every field, into a new index at `target`, analyzed anew; how many."""
    old = tantivy.Index.open(str(source))  # with its own schema: the current one would be refused
    durable.ensure_dir(target)
    new = open_index(target, schema)
    writer = new.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
    searcher = old.searcher()
    everything = tantivy.Query.all_query()
    copied = 0
    while copied < searcher.num_docs:
        hits = searcher.search(everything, limit=COPY_BATCH, offset=copied, count=False).hits
        if not hits:
            break
        for _, address in hits:
            writer.add_document(searcher.doc(address))
        copied += len(hits)
    failpoints.hit("archive.reindex.copied")
    writer.commit()
    writer.wait_merging_threads()
    durable.fsync_dir(target)
    new.reload()
    if new.searcher().num_docs != searcher.num_docs:
        raise ValueError(f"the copy holds {new.searcher().num_docs} of {searcher.num_docs} messages")
    return copied
