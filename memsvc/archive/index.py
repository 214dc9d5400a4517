"""The full-text archive: every message ever appended, in Tantivy.

Owns `.store/archive/` (the Tantivy index in `index-v4/`, moved there from an
older analyzer or schema by reindex.py, and `cutoffs.json` holding each
session's compact cutoff `start_at`), opening the index,
handing changes to its one writer thread (writer.py: batched commits), and
keyword queries over archived messages. It is the source of truth for
messages compacted out of history.json, and derived (re-indexed on open) for
those still in it. Must never block an Append: writes are queued and
committed in the background.

A damaged index (integrity.py) is never opened over or retried without end:
it is reported (`damage`, the health port, a metric), and every call that
needs it is refused with FAILED_PRECONDITION `ARCHIVE_DAMAGED` while the
rest of the server keeps serving. Garbage in cutoffs.json is kept aside.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar, cast

import msgspec
import tantivy

from memsvc.archive import keywords, reindex
from memsvc.archive.integrity import ORPHANED, ORPHANED_REMEDY, Damage, engine_failure, has_orphaned_segments
from memsvc.archive.writer import CLOSE_SECONDS, Op, Writer
from memsvc.core import durable, failpoints
from memsvc.core.errors import FailedPrecondition, MemsvcError, Unavailable
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.runtime import metrics

log = logging.getLogger(__name__)

WRITER_HEAP_BYTES = 64 * 1024 * 1024
TIME_FILTER_IN_MEMORY = 256
"Up to this many matches, a time range is checked on their send_at column instead of by a range query."


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("session", tokenizer_name="raw", stored=True)  # raw: deletable by term
    builder.add_unsigned_field("id", stored=True, indexed=True, fast=True)
    builder.add_integer_field("send_at", stored=True, indexed=True, fast=True)
    builder.add_text_field("role", tokenizer_name="raw", stored=True)
    builder.add_text_field("sender", tokenizer_name="raw", stored=True)
    builder.add_text_field("content", tokenizer_name=keywords.ANALYZER_NAME, stored=True)
    builder.add_bytes_field("payload", stored=True)  # stored only: never searched
    return builder.build()


class Cutoffs(msgspec.Struct):
    start_at: dict[str, int] = {}
    "Session id -> compact cutoff (send time of the first message left in history.json)."


P = ParamSpec("P")
R = TypeVar("R")


def _reading(method: Callable[Concatenate[Archive, P], R]) -> Callable[Concatenate[Archive, P], R]:
    """A query of the index: refused once it is damaged; when Tantivy fails, the files are checked."""

    def guarded(self: Archive, *args: P.args, **kwargs: P.kwargs) -> R:
        self.damage.check()
        try:
            return method(self, *args, **kwargs)
        except MemsvcError:
            raise
        except BaseException as exc:
            if engine_failure(exc) and self.damage.look():
                self.damage.check()
            raise  # the files are intact: a bug, reported as one

    return cast("Callable[Concatenate[Archive, P], R]", functools.wraps(method)(guarded))


class Archive:
    """Implements window.derived.DerivedStore and ArchiveOfRecord."""

    def __init__(self, store_dir: Path, commit_interval: float = 0.05):
        self.directory = store_dir / "archive"
        durable.ensure_dir(self.directory)
        self.schema = _schema()
        refused: reindex.Refused | None = None
        try:
            index_dir = reindex.current_index(self.directory, self.schema)
        except reindex.Refused as exc:
            refused, index_dir = exc, exc.index_dir  # the older index, kept as it was
        self.index_dir = index_dir
        self.damage = Damage(index_dir)
        self.meta_path = self.directory / "cutoffs.json"
        self.meta = self._read_cutoffs()
        self._meta_lock = threading.Lock()
        self.index: tantivy.Index
        "Set only when the index opened; every query checks `damage` before it is reached."
        self._writer: Writer | None = None
        opened = None
        if refused is not None:
            self.damage.found(refused.problem, remedy=refused.remedy)
        else:
            durable.ensure_dir(index_dir)
            opened = self._open(index_dir)
        if opened is not None:
            self.index = opened[0]
            self._writer = Writer(*opened, commit_interval, self.damage, self._count, self._present_ids,
                                  self._messages_with_ids)
        metrics.gauge("archive_damaged", "1 while the archive index is damaged and refused, else 0.",
                      lambda: self.damage.problem is not None)

    def _open(self, index_dir: Path) -> tuple[tantivy.Index, tantivy.IndexWriter] | None:
        """The index and its writer, or None when it is damaged (then its files are left as they are)."""
        if has_orphaned_segments(index_dir):
            # Tantivy would start an empty index over them and garbage-collect them.
            self.damage.found(ORPHANED, remedy=ORPHANED_REMEDY)
            return None
        try:
            index = reindex.open_index(index_dir, self.schema)
            return index, index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        except BaseException as exc:
            if not engine_failure(exc):
                raise
            self.damage.found(f"it cannot be opened ({exc})")
            return None

    def _read_cutoffs(self) -> Cutoffs:
        """cutoffs.json, or no cutoffs when it is missing or unreadable (the original is kept aside)."""
        try:
            data = self.meta_path.read_bytes()
        except FileNotFoundError:
            return Cutoffs()
        try:
            return msgspec.json.decode(data, type=Cutoffs)
        except msgspec.DecodeError as exc:
            kept = self.meta_path.with_name(f"{self.meta_path.name}.damaged-{time.time_ns()}")
            durable.atomic_write(kept, data)
            log.error("unreadable archive cutoffs kept aside; starting without them", extra={
                "path": str(self.meta_path), "kept_copy": kept.name, "error": str(exc),
                "effect": "nothing is lost: only Compact's start_at reads 0 for sessions whose history.json is "
                          "empty"})
            return Cutoffs()

    def check_writable(self, session_id: str | None = None) -> None:
        """Raise ARCHIVE_DAMAGED (or UNAVAILABLE once closing) if a change handed over now cannot commit,
        and ARCHIVE_SESSION_SET_ASIDE when the session's messages could not be stored."""
        self.damage.check()
        if self._writer is not None and self._writer.closing:
            raise Unavailable("the server is shutting down; retry on the next one", reason=Reason.SHUTTING_DOWN)
        if session_id is not None:
            self._refuse_set_aside(session_id)

    def set_aside(self) -> dict[str, str]:
        """Sessions whose messages the writer could not store -> why."""
        return dict(self._writer.set_aside) if self._writer is not None else {}

    def _refuse_set_aside(self, session_id: str) -> None:
        why = self._writer.set_aside.get(session_id) if self._writer is not None else None
        if why is not None:
            raise FailedPrecondition(
                f"the archive could not store messages of session {session_id!r} ({why}) and refuses its archive "
                "until it is reset or removed; other sessions are not affected",
                reason=Reason.ARCHIVE_SESSION_SET_ASIDE)

    # -- DerivedStore ----------------------------------------------------------

    def recover(self, session_id: str, records: list[Record]) -> None:
        if records:
            self._enqueue(Op("reconcile", session_id, records))

    def appended(self, session_id: str, records: list[Record]) -> None:
        self._enqueue(Op("add", session_id, records))

    def compacted(self, session_id: str, first_kept_id: int, start_at: int) -> None:
        with self._meta_lock:
            self.meta.start_at[session_id] = start_at
            durable.atomic_write(self.meta_path, msgspec.json.encode(self.meta))

    def closed(self, session_id: str) -> None:
        """Nothing of a session is held in memory here."""

    def cleared(self, session_id: str) -> int:
        """Delete the session's messages, committed before this returns; how many were deleted."""
        self.check_writable()
        op = Op("clear", session_id)
        self._enqueue(op)
        self.flush()
        failpoints.hit("archive.cleared")
        if self._writer is not None:
            self._writer.forgive(session_id)
        with self._meta_lock:
            if self.meta.start_at.pop(session_id, None) is not None:
                durable.atomic_write(self.meta_path, msgspec.json.encode(self.meta))
        return op.cleared

    def deleted(self, session_id: str, ids: list[int]) -> int:
        """Delete these messages of the session, committed before this returns; how many were deleted."""
        self.check_writable()
        op = Op("delete", session_id, ids=ids)
        self._enqueue(op)
        self.flush()
        failpoints.hit("archive.deleted")
        return op.cleared

    # -- writing ---------------------------------------------------------------

    def _enqueue(self, op: Op) -> None:
        # Once damaged nothing is queued: messages still in history.json are re-indexed after the repair.
        if self._writer is not None and self.damage.problem is None:
            self._writer.enqueue(op)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until everything queued so far is committed and searchable.

        Failing commits are retried meanwhile; only when they still fail at
        the timeout does the caller get an error. A damaged index fails at once.
        """
        self.check_writable()
        assert self._writer is not None  # no writer only when damaged
        self._writer.flush(timeout)

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Commit everything queued (trying for at most `timeout`), then release the index."""
        if self._writer is not None:
            self._writer.close(timeout)

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

    @_reading
    def messages(self, session_id: str, after_id: int, below_id: int, limit: int | None = None,
                 newest_first: bool = False) -> list[Record]:
        """Archived messages with after_id < id < below_id, oldest first; with `limit`, only the
        first (or `newest_first`, the last) `limit` of them."""
        self._refuse_set_aside(session_id)
        if below_id - after_id <= 1:
            return []
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, self._session(session_id)),
                                             (tantivy.Occur.Must, self._id_range(after_id + 1, below_id - 1))])
        records = self._in_id_order(query, limit, newest_first)
        return records[::-1] if newest_first else records

    @_reading
    def stored(self, session_id: str, ids: list[int]) -> list[Record]:
        """The archived messages with these ids, oldest first."""
        self._refuse_set_aside(session_id)
        if not ids:
            return []
        return self._in_id_order(self._messages_with_ids(session_id, ids))

    def _messages_with_ids(self, session_id: str, ids: list[int]) -> tantivy.Query:
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, self._session(session_id)),
                                            (tantivy.Occur.Must, tantivy.Query.term_set_query(self.schema, "id", ids))])

    def _in_id_order(self, query: tantivy.Query, limit: int | None = None, descending: bool = False) -> list[Record]:
        searcher = self.index.searcher()
        if limit is None:
            limit = _total(searcher.search(query, limit=1, count=True))
        if limit <= 0:
            return []
        hits = searcher.search(query, limit=limit, count=False, order_by_field="id",
                               order=tantivy.Order.Desc if descending else tantivy.Order.Asc).hits
        return [_record(searcher.doc(address)) for _, address in hits]

    @_reading
    def count(self, session_id: str, below_id: int | None = None) -> int:
        """Archived messages of a session (committed ones); with `below_id`, only those with a lower id."""
        self._refuse_set_aside(session_id)
        if below_id is None:
            return self._count(session_id)
        if below_id <= 1:
            return 0
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, self._session(session_id)),
                                             (tantivy.Occur.Must, self._id_range(1, below_id - 1))])
        return _total(self.index.searcher().search(query, limit=1, count=True))

    @_reading
    def search(self, session_id: str, query: keywords.KeywordQuery, statistics: keywords.Statistics, below_id: int,
               since: int, until: int, limit: int) -> list[tuple[Record, float]]:
        """The best `limit` archived messages with id < below_id matching `query`, by BM25 with the idf of
        `statistics` (keywords.term_score's scale)."""
        self._refuse_set_aside(session_id)
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
            # The times from their column: only the messages kept are read from the document store.
            times = searcher.fast_field_values("send_at", [address for _, address in few.hits])
            kept = [hit for hit, at in zip(few.hits, times, strict=True) if at is not None and since <= at < until]
            return [(_record(searcher.doc(address)), score) for score, address in kept[:limit]]
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

    @_reading
    def statistics(self, query: keywords.KeywordQuery) -> keywords.Statistics:
        """Document frequency of each token of `query` and the number of documents: BM25's idf, for both tiers."""
        searcher = self.index.searcher()
        tokens = {token for term in query.terms for token in term.tokens}
        return keywords.Statistics({token: searcher.doc_freq("content", token) for token in tokens},
                                   searcher.num_docs)

    def start_at(self, session_id: str) -> int:
        return self.meta.start_at.get(session_id, 0)


def _record(document: tantivy.Document) -> Record:
    payload = document.get_first("payload")
    return Record(id=document["id"][0], role=document["role"][0], content=document["content"][0],
                  send_at=document["send_at"][0], sender=document.get_first("sender") or "",
                  payload=payload.decode() if payload else "")


def _total(result: tantivy.SearchResult) -> int:
    """The number of matches of a search run with count=True (tantivy-py's stubs leave the attribute out)."""
    return int(result.count)  # type: ignore[attr-defined]
