"""Re-indexing the archive when the analyzer changed, from its own stored messages.

Owns where the index of each analyzer version lives (`index/` for version 1,
`index-v2/` and so on after it) and the switch to a new one: every stored
document of the newest older index, of every session, is written into
`index-vN.reindex/` with the current analyzer; only once that is committed is
it renamed to `index-vN/`, and only then are the older indexes deleted. A
stop at any step leaves the old index or the complete new one, and the next
start finishes the job. The archive is the only copy of compacted messages:
they are copied over, never dropped. Must never run while an Archive has an
index open.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import tantivy

from memsvc.archive import keywords
from memsvc.core import durable

log = logging.getLogger(__name__)

WRITER_HEAP_BYTES = 64 * 1024 * 1024


def index_dir(directory: Path, version: int) -> Path:
    return directory / ("index" if version == 1 else f"index-v{version}")


def current_index(directory: Path, schema: tantivy.Schema) -> Path:
    """The directory of the index built with keywords.ANALYZER_VERSION, re-indexing an older one into it."""
    current = index_dir(directory, keywords.ANALYZER_VERSION)
    older = [index_dir(directory, version) for version in range(keywords.ANALYZER_VERSION - 1, 0, -1)]
    fresh = current.with_name(current.name + ".reindex")
    if fresh.exists():
        durable.remove_tree(fresh)  # a copy that did not finish: start it over
    if not current.exists():
        source = next((path for path in older if (path / "meta.json").exists()), None)
        if source is not None:
            started = time.monotonic()
            copied = _copy(source, fresh, schema)
            os.replace(fresh, current)
            durable.fsync_dir(directory)
            log.info("archive re-indexed for a new analyzer", extra={
                "messages": copied, "version": keywords.ANALYZER_VERSION,
                "seconds": round(time.monotonic() - started, 1)})
    for path in older:
        if path.exists():
            durable.remove_tree(path)
    return current


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
