"""The full-text archive: every message ever appended, in Tantivy.

Owns `.store/archive/` (the Tantivy index in `index-v2/`, see reindex.py, and `cutoffs.json`
holding each session's compact cutoff `start_at`), the one thread that writes the index (tantivy-py's
IndexWriter is not thread-safe), batched commits, and keyword queries over
archived messages. It is the source of truth for messages compacted out of
history.json, and derived (re-indexed on open) for those still in it. Must
never block an Append: writes are queued and committed in the background.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path

import msgspec
import tantivy

from memsvc.archive import keywords, reindex
from memsvc.core import durable, failpoints
from memsvc.core.errors import Unavailable
from memsvc.core.records import Record
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.runtime import metrics

log = logging.getLogger(__name__)

WRITER_HEAP_BYTES = 64 * 1024 * 1024
TIME_FILTER_IN_MEMORY = 64
"Up to this many matches, a time range is checked on the stored messages instead of by a range query."


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("session", tokenizer_name="raw", stored=True)  # raw: deletable by term
    builder.add_unsigned_field("id", stored=True, indexed=True, fast=True)
    builder.add_integer_field("send_at", stored=True, indexed=True, fast=True)
    builder.add_text_field("role", tokenizer_name="raw", stored=True)
    builder.add_text_field("sender", tokenizer_name="raw", stored=True)
    builder.add_text_field("content", tokenizer_name=keywords.ANALYZER_NAME, stored=True)
    return builder.build()


class Cutoffs(msgspec.Struct):
    start_at: dict[str, int] = {}
    "Session id -> compact cutoff (send time of the first message left in history.json)."


class _Op(msgspec.Struct):
    kind: str
    "add | reconcile | clear | commit (commit now, without waiting for more)"
    session_id: str
    records: list[Record] = []


class Archive:
    """Implements window.derived.DerivedStore and ArchiveOfRecord."""

    def __init__(self, store_dir: Path, commit_interval: float = 0.05):
        self.directory = store_dir / "archive"
        self.commit_interval = commit_interval
        self.schema = _schema()
        durable.ensure_dir(self.directory)
        index_dir = reindex.current_index(self.directory, self.schema)
        durable.ensure_dir(index_dir)
        self.index = tantivy.Index(self.schema, path=str(index_dir))
        self.index.register_tokenizer(keywords.ANALYZER_NAME, keywords.analyzer())
        self.meta_path = self.directory / "cutoffs.json"
        self.meta = (msgspec.json.decode(self.meta_path.read_bytes(), type=Cutoffs) if self.meta_path.exists()
                     else Cutoffs())
        self._meta_lock = threading.Lock()
        self._queue: queue.Queue[_Op | None] = queue.Queue()
        self._queued = 0
        self._committed = 0
        self._progress = threading.Condition()
        self._failure: Exception | None = None
        self._batch_ids: dict[str, set[int]] = {}
        "Ids added by the batch being applied, not yet visible to searchers."
        self._writer = self.index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        self._thread = threading.Thread(target=self._run, name="archive-writer", daemon=True)
        self._thread.start()
        metrics.gauge("archive_queue_depth", "Archive operations queued but not committed.",
                      lambda: self._queued - self._committed)
        metrics.total("archive_committed_operations_total", "Archive operations committed.",
                      lambda: self._committed)

    # -- DerivedStore ----------------------------------------------------------

    def recover(self, session_id: str, records: list[Record]) -> None:
        if records:
            self._enqueue(_Op("reconcile", session_id, records))

    def appended(self, session_id: str, records: list[Record]) -> None:
        self._enqueue(_Op("add", session_id, records))

    def compacted(self, session_id: str, first_kept_id: int, start_at: int) -> None:
        with self._meta_lock:
            self.meta.start_at[session_id] = start_at
            durable.atomic_write(self.meta_path, msgspec.json.encode(self.meta))

    def closed(self, session_id: str) -> None:
        """Nothing of a session is held in memory here."""

    def cleared(self, session_id: str) -> int:
        self.flush()
        count = self._count(session_id)
        self._enqueue(_Op("clear", session_id))
        self.flush()
        with self._meta_lock:
            if self.meta.start_at.pop(session_id, None) is not None:
                durable.atomic_write(self.meta_path, msgspec.json.encode(self.meta))
        return count

    # -- writing ---------------------------------------------------------------

    def _enqueue(self, op: _Op) -> None:
        with self._progress:
            self._queued += 1
        self._queue.put(op)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything queued so far is committed and searchable.

        Failing commits are retried meanwhile; only when they still fail at
        the timeout does the caller get an error.
        """
        self._enqueue(_Op("commit", ""))
        with self._progress:
            target = self._queued
            if self._progress.wait_for(lambda: self._committed >= target, timeout):
                return
            if self._failure is not None:
                raise Unavailable(f"the archive cannot commit ({self._failure}); retry later",
                                  reason="ARCHIVE_UNAVAILABLE")
            raise Unavailable("the archive is behind; retry later", reason="ARCHIVE_BEHIND")

    def close(self) -> None:
        """Commit everything queued, then release the index."""
        self._queue.put(None)
        self._thread.join()
        self._writer.wait_merging_threads()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            deadline = time.monotonic() + self.commit_interval
            while batch[-1] is not None and batch[-1].kind != "commit" and (left := deadline - time.monotonic()) > 0:
                try:
                    batch.append(self._queue.get(timeout=left))
                except queue.Empty:
                    break
            if None in batch:
                stopping = True
            ops = [op for op in batch if op is not None]
            self._apply_until_committed(ops)

    def _apply_until_committed(self, ops: list[_Op]) -> None:
        """Apply and commit `ops`, retrying (never dropping) while the disk refuses."""
        delay = 0.1
        while True:
            self._batch_ids = {}
            try:
                for op in ops:
                    self._apply(op)
                failpoints.hit("archive.commit")
                self._writer.commit()
                self.index.reload()
            except (ValueError, OSError) as exc:
                log.error("archive commit failed; retrying", extra={"error": str(exc), "ops": len(ops)})
                with self._progress:
                    self._failure = exc
                    self._progress.notify_all()
                self._writer.rollback()
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            with self._progress:
                self._failure = None
                self._committed += len(ops)
                self._progress.notify_all()
            return

    def _apply(self, op: _Op) -> None:
        if op.kind == "add":
            self._add(op.session_id, op.records)
        elif op.kind == "reconcile":
            present = self._present_ids(op.session_id, op.records[0].id, op.records[-1].id)
            present |= self._batch_ids.get(op.session_id, set())
            missing = [record for record in op.records if record.id not in present]
            if missing:
                log.info("archive re-indexing", extra={"session": op.session_id, "messages": len(missing)})
                self._add(op.session_id, missing)
        elif op.kind == "clear":
            # Deletes reach only documents added before them, so later adds of this batch survive.
            self._writer.delete_documents_by_term("session", op.session_id)
            self._batch_ids.pop(op.session_id, None)

    def _add(self, session_id: str, records: list[Record]) -> None:
        self._batch_ids.setdefault(session_id, set()).update(record.id for record in records)
        for record in records:
            document = tantivy.Document()
            document.add_text("session", session_id)
            document.add_unsigned("id", record.id)
            document.add_integer("send_at", record.send_at)
            document.add_text("role", record.role)
            document.add_text("sender", record.sender)
            document.add_text("content", record.content)
            self._writer.add_document(document)

    # -- reading ---------------------------------------------------------------

    def _session(self, session_id: str) -> tantivy.Query:
        return tantivy.Query.term_query(self.schema, "session", session_id)

    def _id_range(self, lowest: int, highest: int) -> tantivy.Query:
        return tantivy.Query.range_query(self.schema, "id", tantivy.FieldType.Unsigned, lowest, highest)

    def _count(self, session_id: str) -> int:
        return _total(self.index.searcher().search(self._session(session_id), limit=1, count=True))

    def _present_ids(self, session_id: str, lowest: int, highest: int) -> set[int]:
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, self._session(session_id)),
                                             (tantivy.Occur.Must, self._id_range(lowest, highest))])
        searcher = self.index.searcher()
        total = _total(searcher.search(query, limit=1, count=True))
        if total == 0:
            return set()
        hits = searcher.search(query, limit=total, count=False).hits
        return {searcher.doc(address)["id"][0] for _, address in hits}

    def messages(self, session_id: str, after_id: int, below_id: int) -> list[Record]:
        """Archived messages with after_id < id < below_id, oldest first."""
        if below_id - after_id <= 1:
            return []
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, self._session(session_id)),
                                             (tantivy.Occur.Must, self._id_range(after_id + 1, below_id - 1))])
        searcher = self.index.searcher()
        total = _total(searcher.search(query, limit=1, count=True))
        if total == 0:
            return []
        hits = searcher.search(query, limit=total, count=False, order_by_field="id", order=tantivy.Order.Asc).hits
        return [_record(searcher.doc(address)) for _, address in hits]

    def count(self, session_id: str) -> int:
        """Archived messages of a session (committed ones)."""
        return self._count(session_id)

    def search(self, session_id: str, query: keywords.KeywordQuery, statistics: keywords.Statistics, below_id: int,
               since: int, until: int, limit: int) -> list[tuple[Record, float]]:
        """The best `limit` archived messages with id < below_id matching `query`, by BM25 with the idf of
        `statistics` (keywords.term_score's scale)."""
        if below_id <= 1 or not query:
            return []
        # The session and id bounds only filter: scoring 0, they leave BM25 alone (recent messages lack them).
        clauses = [(tantivy.Occur.Must, tantivy.Query.const_score_query(self._session(session_id), 0.0)),
                   (tantivy.Occur.Must, tantivy.Query.const_score_query(self._id_range(0, below_id - 1), 0.0))]
        clauses += [(tantivy.Occur.Must, self._term(term, statistics)) for term in query.required]
        ranked = [(tantivy.Occur.Should, self._term(term, statistics)) for term in query.optional]
        if query.required:
            clauses += ranked
        elif ranked:
            # Nested, so that at least one optional term must match.
            clauses.append((tantivy.Occur.Must, tantivy.Query.boolean_query(ranked)))
        searcher = self.index.searcher()
        if since <= 0 and until >= NO_UPPER_BOUND:
            hits = searcher.search(tantivy.Query.boolean_query(clauses), limit=limit, count=False).hits
            return [(_record(searcher.doc(address)), score) for score, address in hits]
        # A range over send_at scans its column for the whole index; when the terms match few
        # messages of the session it is cheaper to read those and check their times.
        few = searcher.search(tantivy.Query.boolean_query(clauses), limit=TIME_FILTER_IN_MEMORY, count=True)
        if _total(few) <= TIME_FILTER_IN_MEMORY:
            found = [(_record(searcher.doc(address)), score) for score, address in few.hits]
            return [(record, score) for record, score in found if since <= record.send_at < until][:limit]
        clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(tantivy.Query.range_query(
            self.schema, "send_at", tantivy.FieldType.Integer, since, until, include_upper=False), 0.0)))
        hits = searcher.search(tantivy.Query.boolean_query(clauses), limit=limit, count=False).hits
        return [(_record(searcher.doc(address)), score) for score, address in hits]

    def _term(self, term: keywords.Term, statistics: keywords.Statistics) -> tantivy.Query:
        if len(term.tokens) == 1:
            query = tantivy.Query.term_query(self.schema, "content", term.tokens[0])
        else:
            query = tantivy.Query.phrase_query(self.schema, "content", list(term.tokens))
        return tantivy.Query.boost_query(query, statistics.boost(term))

    def statistics(self, query: keywords.KeywordQuery) -> keywords.Statistics:
        """Document frequency of each token of `query` and the number of documents: BM25's idf, for both tiers."""
        searcher = self.index.searcher()
        tokens = {token for term in query.terms for token in term.tokens}
        return keywords.Statistics({token: searcher.doc_freq("content", token) for token in tokens},
                                   searcher.num_docs)

    def start_at(self, session_id: str) -> int:
        return self.meta.start_at.get(session_id, 0)


def _record(document: tantivy.Document) -> Record:
    return Record(id=document["id"][0], role=document["role"][0], content=document["content"][0],
                  send_at=document["send_at"][0], sender=document.get_first("sender") or "")


def _total(result: tantivy.SearchResult) -> int:
    """The number of matches of a search run with count=True (tantivy-py's stubs leave the attribute out)."""
    return int(result.count)  # type: ignore[attr-defined]
