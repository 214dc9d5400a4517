"""Moving the archive to a new index format, from its own stored messages.

A Tantivy index cannot gain a field: an index written with an older schema
refuses to open with the current one. Each format has its own directory
(`index/` for format 1, `index-v2/` and so on after it). At start, when only
an older one exists, every stored document of it, of every session, is
written into `index-vN.reindex/` with the current schema and analyzer; only
once that is committed is it renamed to `index-vN/`, and only then is the
older index deleted. A stop at any step leaves the old index or the complete
new one, and the next start finishes the job. The archive is the only copy of
compacted messages: they are copied over, never dropped, and an older index
that cannot be read is left as it is (the caller reports it damaged). Owns
the directories and the copy. Must never run while an Archive has an index
open.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import tantivy

from memsvc.archive import keywords
from memsvc.archive.integrity import ORPHANED, ORPHANED_REMEDY, REPAIR, engine_failure, has_orphaned_segments
from memsvc.core import durable

log = logging.getLogger(__name__)

FORMAT = 2
"The index format this server writes: 2 added the stored `payload` field."
WRITER_HEAP_BYTES = 64 * 1024 * 1024
COPY_BATCH = 10_000
"Documents read per query while copying: the hits of a whole large index at once would take hundreds of MB."


class Unreadable(Exception):
    """An older index that must be moved to the current format cannot be read; it was left untouched."""

    def __init__(self, index_dir: Path, problem: str, remedy: str = REPAIR):
        super().__init__(problem)
        self.index_dir = index_dir
        self.remedy = remedy


def index_dir(directory: Path, version: int) -> Path:
    return directory / ("index" if version == 1 else f"index-v{version}")


def current_index(directory: Path, schema: tantivy.Schema) -> Path:
    """The directory of the index in FORMAT, copying an older index into it first (raises Unreadable)."""
    current = index_dir(directory, FORMAT)
    older = [index_dir(directory, version) for version in range(FORMAT - 1, 0, -1)]
    fresh = current.with_name(current.name + ".reindex")
    if fresh.exists():
        durable.remove_tree(fresh)  # a copy that did not finish: start it over
    if not current.exists():
        source = next((path for path in older if path.is_dir() and _holds_an_index(path)), None)
        if source is not None:
            _upgrade(source, fresh, current, schema)
    for path in older:
        if path.exists():
            durable.remove_tree(path)
    return current


def _holds_an_index(path: Path) -> bool:
    """meta.json or segment files: anything else (a directory a crash left empty, lock files) holds nothing."""
    return (path / "meta.json").exists() or has_orphaned_segments(path)


def _upgrade(source: Path, fresh: Path, current: Path, schema: tantivy.Schema) -> None:
    if has_orphaned_segments(source):
        raise Unreadable(source, ORPHANED, ORPHANED_REMEDY)
    started = time.monotonic()
    log.info("archive moving to a new index format", extra={"from": source.name, "to": current.name})
    try:
        copied = _copy(source, fresh, schema)
    except BaseException as exc:
        if not engine_failure(exc):
            raise
        raise Unreadable(source, f"it cannot be read to move it to the new index format ({exc})") from exc
    os.replace(fresh, current)
    durable.fsync_dir(current.parent)
    log.info("archive moved to a new index format", extra={
        "messages": copied, "format": FORMAT, "seconds": round(time.monotonic() - started, 1)})


def _copy(source: Path, target: Path, schema: tantivy.Schema) -> int:
    """Every live document of `source` into a new index at `target`; returns how many."""
    old = tantivy.Index.open(str(source))  # with its own schema: the current one would be refused
    durable.ensure_dir(target)
    new = tantivy.Index(schema, path=str(target))
    new.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer())
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
    writer.commit()
    writer.wait_merging_threads()
    durable.fsync_dir(target)
    return copied
