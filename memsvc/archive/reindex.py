"""Re-indexing the archive when the analyzer changed, from its own stored messages.

Owns `analyzer.json` (the analyzer version the index in `index/` was built
with; missing means version 1) and the switch to a new analyzer: every stored
document of the old index, of every session, is written into a new index
under `index.reindex/` with the current analyzer; only once that is committed
is `index/` renamed to `index.previous/`, `index.reindex/` to `index/`, the
version recorded and the old index deleted. A crash at any step leaves either
the old index or the complete new one in place, and the next start finishes
the job. The archive is the only copy of compacted messages: they are copied
over, never dropped. Must never run while an Archive has the index open.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import msgspec
import tantivy

from memsvc.archive import keywords
from memsvc.core import durable

log = logging.getLogger(__name__)

VERSION_FILE = "analyzer.json"
FIRST_VERSION = 1
WRITER_HEAP_BYTES = 64 * 1024 * 1024


class AnalyzerVersion(msgspec.Struct):
    version: int


def ensure_current(directory: Path, schema: tantivy.Schema) -> None:
    """Leave `directory/index` built with keywords.ANALYZER_VERSION, re-indexing it if needed."""
    index_dir, fresh, previous = directory / "index", directory / "index.reindex", directory / "index.previous"
    version_path = directory / VERSION_FILE
    if previous.exists():
        # The last start stopped mid-switch. The old index was moved aside only once the new one was
        # complete, so one of the two is whole: put it in place.
        if not _complete(index_dir):
            if index_dir.exists():
                durable.remove_tree(index_dir)
            os.replace(fresh if _complete(fresh) else previous, index_dir)
            durable.fsync_dir(directory)
        if _complete(index_dir):
            _record(version_path)
        if previous.exists():
            durable.remove_tree(previous)
    if fresh.exists():
        durable.remove_tree(fresh)  # a re-index that did not finish: start it over
    if _version(version_path) == keywords.ANALYZER_VERSION:
        return
    if not (index_dir / "meta.json").exists():
        _record(version_path)  # nothing indexed yet
        return
    started = time.monotonic()
    copied = _copy(index_dir, fresh, schema)
    (fresh / _COMPLETE_MARK).write_text(str(keywords.ANALYZER_VERSION))
    durable.fsync_dir(fresh)
    os.replace(index_dir, previous)
    os.replace(fresh, index_dir)
    durable.fsync_dir(directory)
    _record(version_path)
    durable.remove_tree(previous)
    log.info("archive re-indexed for a new analyzer", extra={"messages": copied, "version": keywords.ANALYZER_VERSION,
                                                            "seconds": round(time.monotonic() - started, 1)})


_COMPLETE_MARK = ".memsvc-reindexed"
"Written into the new index once it is committed: only a complete index is ever moved into place."


def _complete(index_dir: Path) -> bool:
    """Whether `index_dir` is a finished copy made for the current analyzer."""
    mark = index_dir / _COMPLETE_MARK
    return mark.exists() and mark.read_text() == str(keywords.ANALYZER_VERSION)


def _version(path: Path) -> int:
    if not path.exists():
        return FIRST_VERSION
    return msgspec.json.decode(path.read_bytes(), type=AnalyzerVersion).version


def _record(path: Path) -> None:
    durable.atomic_write(path, msgspec.json.encode(AnalyzerVersion(keywords.ANALYZER_VERSION)))


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
    writer.commit()
    writer.wait_merging_threads()
    return len(hits)
