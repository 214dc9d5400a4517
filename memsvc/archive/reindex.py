"""Re-indexing the archive when the analyzer changed, from its own stored messages.

Owns where the index of each analyzer version lives (`index/` for version 1,
`index-v2/` and so on after it) and the switch to a new one: every stored
document of the newest older index, of every session, is written into
`index-vN.reindex/` with the current analyzer; only once that is committed,
and holds as many documents as the old one, is it renamed to `index-vN/`, and
only then are the older indexes deleted. A stop at any step leaves the old
index or the complete new one, and the next start finishes the job. The
archive is the only copy of compacted messages: they are copied over, never
dropped. An older index that is damaged (integrity.py: orphaned segments, a
failed checksum) or that cannot be copied (a full disk) is refused, kept
exactly as it is and named in the error (`Refused`), so the archive reports
it as damage while the rest of the server serves. Must never run while an
Archive has an index open, and never read or write a session's other stores:
a Reset or removal interrupted before the switch is completed on the new
index, by window/lifecycle.py, like any other.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import tantivy

from memsvc.archive import integrity, keywords
from memsvc.core import durable, failpoints

log = logging.getLogger(__name__)

WRITER_HEAP_BYTES = 64 * 1024 * 1024
COPY_REMEDY = ("free disk space if the disk is full (the copy needs about as much again as the old index) and "
               "start memsvc again: the re-index then starts over")


class Refused(Exception):
    """An older index that is not re-indexed: nothing was deleted, and `problem` says why."""

    def __init__(self, index_dir: Path, problem: str, remedy: str):
        super().__init__(problem)
        self.index_dir = index_dir
        self.problem = problem
        self.remedy = remedy


def index_dir(directory: Path, version: int) -> Path:
    return directory / ("index" if version == 1 else f"index-v{version}")


def current_index(directory: Path, schema: tantivy.Schema) -> Path:
    """The directory of the index built with keywords.ANALYZER_VERSION, re-indexing an older one into it.

    Raises Refused (having deleted nothing) when the older index is damaged or cannot be copied.
    """
    current = index_dir(directory, keywords.ANALYZER_VERSION)
    older = [index_dir(directory, version) for version in range(keywords.ANALYZER_VERSION - 1, 0, -1)]
    fresh = current.with_name(current.name + ".reindex")
    if fresh.exists():
        durable.remove_tree(fresh)  # a copy that did not finish: start it over
    if not current.exists():
        source = next((path for path in older if path.exists()), None)
        if source is not None:
            _switch(source, fresh, current, schema)
    for path in older:
        if path.exists():
            durable.remove_tree(path)
    return current


def _switch(source: Path, fresh: Path, current: Path, schema: tantivy.Schema) -> None:
    """Copy `source` into `fresh` and rename it to `current`, or raise Refused with `source` untouched."""
    if integrity.has_orphaned_segments(source):
        raise Refused(source, f"{integrity.ORPHANED} (nor re-indexed)", integrity.ORPHANED_REMEDY)
    if not (source / "meta.json").exists():
        return  # created, never committed: nothing to copy
    problem = integrity.damage(source)
    if problem is not None:
        raise Refused(source, f"{problem}; it was neither re-indexed for the new analyzer nor erased",
                      integrity.REPAIR)
    started = time.monotonic()
    try:
        copied = _copy(source, fresh, schema)
    except BaseException as exc:
        if not integrity.engine_failure(exc):
            raise
        durable.remove_tree(fresh)
        raise Refused(source, f"re-indexing it for the new analyzer failed ({exc}); it is kept as it was",
                      COPY_REMEDY) from exc
    os.replace(fresh, current)
    durable.fsync_dir(current.parent)
    log.info("archive re-indexed for a new analyzer", extra={
        "messages": copied, "version": keywords.ANALYZER_VERSION, "seconds": round(time.monotonic() - started, 1)})


def _copy(source: Path, target: Path, schema: tantivy.Schema) -> int:
    """Every live document of `source` into a new index at `target`, analyzed anew; returns how many."""
    old = tantivy.Index(schema, path=str(source))
    durable.ensure_dir(target)
    new = tantivy.Index(schema, path=str(target))
    new.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer())
    writer = new.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
    searcher = old.searcher()
    hits = searcher.search(tantivy.Query.all_query(), limit=max(1, searcher.num_docs), count=False).hits
    for _, address in hits:
        writer.add_document(searcher.doc(address))
    failpoints.hit("archive.reindex.copied")
    writer.commit()
    writer.wait_merging_threads()
    new.reload()
    if new.searcher().num_docs != searcher.num_docs:
        raise ValueError(f"the copy holds {new.searcher().num_docs} of {searcher.num_docs} messages")
    return len(hits)
