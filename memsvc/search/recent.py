"""The terms of a session's recent messages, indexed in memory for keyword search.

Owns a small inverted index per open session (term -> positions in
`session.records` and counts, and each message's length in terms), built with
the archive's analyzer the first time a session is searched and extended as
messages are appended; a compaction or a reset (a new records list) starts it
over. Lets a keyword search score only the recent messages that hold a query
term, on the archive's BM25 scale. Must never change a session: it only reads
`session.records`.
"""

from __future__ import annotations

import threading
import weakref
from array import array
from collections import Counter

from memsvc.archive import keywords
from memsvc.core.records import Record
from memsvc.window.session import Session


class _Postings:
    """Positions in the records list and the number of times the term occurs there."""

    __slots__ = ("counts", "positions")

    def __init__(self) -> None:
        self.positions = array("I")
        self.counts = array("I")


class RecentTerms:
    """The inverted index of one records list."""

    def __init__(self, records: list[Record]):
        self.records = records
        self.lengths = array("I")
        self.postings: dict[str, _Postings] = {}
        self.total_tokens = 0
        self._lock = threading.Lock()

    def catch_up(self) -> None:
        """Index the records appended since the last call (records only grow at their end)."""
        with self._lock:
            for position in range(len(self.lengths), len(self.records)):
                tokens = keywords.tokenize(self.records[position].content)
                for token, count in Counter(tokens).items():
                    postings = self.postings.get(token)
                    if postings is None:
                        postings = self.postings[token] = _Postings()
                    postings.positions.append(position)
                    postings.counts.append(count)
                self.lengths.append(len(tokens))
                self.total_tokens += len(tokens)

    def doc_freq(self, token: str) -> int:
        postings = self.postings.get(token)
        return 0 if postings is None else len(postings.positions)

    @property
    def average_tokens(self) -> float:
        return self.total_tokens / max(1, len(self.lengths))

    def frequencies(self, term: keywords.Term, tokenized: dict[int, list[str]]) -> dict[int, int]:
        """Position -> occurrences of `term`, for the indexed records holding it.

        A phrase is checked on the records' tokens, kept in `tokenized` for the next phrase of the query.
        """
        if len(term.tokens) == 1:
            postings = self.postings.get(term.tokens[0])
            return {} if postings is None else dict(zip(postings.positions, postings.counts, strict=True))
        holding: set[int] | None = None
        for token in term.tokens:
            postings = self.postings.get(token)
            if postings is None:
                return {}
            holding = set(postings.positions) if holding is None else holding & set(postings.positions)
        found = {}
        for position in holding or ():
            tokens = tokenized.get(position)
            if tokens is None:
                tokens = tokenized[position] = keywords.tokenize(self.records[position].content)
            count = keywords.occurrences(tokens, term)
            if count:
                found[position] = count
        return found


class RecentIndexes:
    """One RecentTerms per open session, forgotten with the session object."""

    def __init__(self) -> None:
        self._indexes: weakref.WeakKeyDictionary[Session, RecentTerms] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def unindexed(self, session: Session) -> int | None:
        """How many of the session's records its index has yet to take in; None when it has no index
        over them (a first search, or after a compaction or reset), which would be built from scratch."""
        records = session.records
        with self._lock:
            index = self._indexes.get(session)
        if index is None or index.records is not records:
            return None
        return len(records) - len(index.lengths)

    def of(self, session: Session) -> RecentTerms:
        records = session.records
        with self._lock:
            index = self._indexes.get(session)
            if index is None or index.records is not records:
                index = self._indexes[session] = RecentTerms(records)
        index.catch_up()
        return index
