"""Importing an exported session whole, or not at all.

Owns the checks on what arrives, as strict as an Append's and as the checks
of files loaded from disk (a head first, its ids, times and cursor within
range, its summary read as summary.json is; ids increasing below the head's
next id, which fits a signed 64-bit integer; each message valid as an Append
would take it: roles, content, sizes, sender, time, payload JSON; an end
whose totals match what was received), writing the session into its staging
directory as it streams in (history.json from the recent messages, compacted
to max_history_bytes as Appends would leave it, summary.json, the cursor,
the last summary run's record, the next id) while every message goes to the archive, and the order that makes it
all-or-nothing: the staging directory exists before the first archive row,
the archive commits and the cutoff is recorded before the one rename that
makes the session appear, and anything left by a failure or a crash (the
staging directory and the rows of a session that is not stored) is removed.
The id is held while the import runs, so no Append can create the session
meanwhile. Must never overwrite a stored session.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import msgspec

from memsvc.core import durable, layout
from memsvc.core.config import Settings
from memsvc.core.deadline import UNBOUNDED, Deadline
from memsvc.core.errors import AlreadyExists, InvalidArgument, storage_error
from memsvc.core.ids import check_session_id
from memsvc.core.reasons import Reason
from memsvc.core.records import MAX_ID, Record
from memsvc.core.units import NO_UPPER_BOUND
from memsvc.lifecycle.cuts import AUTO_COMPACT_RATIO, cut_for_size
from memsvc.shards.moves import Moves, Staging
from memsvc.summary import rolling
from memsvc.summary.cursor import write_cursor
from memsvc.summary.rolling import InvalidSummary
from memsvc.summary.runs import write_run
from memsvc.transfer.parts import Digest, End, Head, Part
from memsvc.window.appender import ByteQuota
from memsvc.window.derived import ArchiveOfRecord
from memsvc.window.incoming import check_idempotency_key, check_message

log = logging.getLogger(__name__)

COMMIT_EVERY = 10_000
"Messages handed to the archive between two waits for its commit: its queue stays bounded."


class Imported(msgspec.Struct):
    session_id: str
    end: End
    held: bool
    "The id was held for the import (a move): it stays refused until released."


class Importer:
    """`quota` is the tenant's bytes quota, checked before an import is installed."""

    def __init__(self, settings: Settings, moves: Moves, archive: ArchiveOfRecord, quota: ByteQuota | None = None):
        self.settings = settings
        self.moves = moves
        self.archive = archive
        self.quota = quota

    def recover(self) -> None:
        """At start: undo the imports a crash stopped half way."""
        for session_id in self.moves.staged():
            log.warning("discarding an import a stop interrupted", extra={"session": session_id})
            self._discard(session_id)

    def restore(self, parts: Iterable[Part], deadline: Deadline = UNBOUNDED) -> Imported:
        """Store an exported session whole, or nothing (nothing either once `deadline` passed)."""
        stream = iter(parts)
        first = next(stream, None)
        if first is None or first.head is None or first.records or first.end is not None:
            raise InvalidArgument("an import starts with the head of an export, alone",
                                  reason=Reason.IMPORT_HEAD_MISSING)
        head = first.head
        session_id = check_session_id(head.session_id)
        _check_head(head)
        holds = self.moves.holds
        with holds.transient(session_id):
            if self.moves.stores(session_id):
                raise AlreadyExists(f"session {session_id!r} is already stored here: remove it first to import it "
                                    "again", reason=Reason.SESSION_EXISTS)
            held = holds.durable(session_id)
            try:
                end, size = self._write(head, stream)
                deadline.check(f"importing session {session_id!r}")
                self.moves.install(session_id)
                if self.quota is not None:
                    self.quota.grew(size)  # only now: a refused or failed import never counts as stored
            except BaseException:
                try:
                    self._discard(session_id)
                except Exception:  # what is left is removed at the next start (recover)
                    log.exception("could not remove what a failed import left", extra={"session": session_id})
                raise
        log.info("imported session", extra={"session": session_id, "messages": end.messages, "held": held})
        return Imported(session_id, end, held)

    def _write(self, head: Head, stream: Iterator[Part]) -> tuple[End, int]:
        """Stage the session and commit its archive rows; returns the totals it checked and the bytes its
        messages take against the tenant's quota."""
        session_id = head.session_id
        staging = self.moves.staging(session_id)
        if self.archive.messages(session_id, 0, NO_UPPER_BOUND, limit=1):  # rows of an import that failed before
            self.archive.cleared(session_id)
        digest, recent, uncommitted, size = Digest(), 0, 0, 0
        for part in stream:
            if part.end is not None:
                self._check_end(head, part, digest, recent, stream)
                break
            if part.head is not None:
                raise InvalidArgument("an import has one head, in its first part", reason=Reason.IMPORT_OUT_OF_ORDER)
            self._check(head, part.records, digest.last_id)
            if self.quota is not None:  # the pages before count too, though not stored yet
                size += self.quota.refuse(part.records, pending=size)
            self.archive.appended(session_id, part.records)
            kept = [record for record in part.records if head.first_recent_id and record.id >= head.first_recent_id]
            if kept:
                staging.append(kept)
            digest.add(part.records)
            recent += len(kept)
            uncommitted += len(part.records)
            if uncommitted >= COMMIT_EVERY:
                self.archive.flush()
                uncommitted = 0
        else:
            raise InvalidArgument(f"the import of session {session_id!r} ended before its end part: nothing was "
                                  "stored", reason=Reason.IMPORT_INCOMPLETE)
        self._write_state(head, staging)
        first_kept, start_at = self._compacted(head, staging)
        self.archive.flush()
        if start_at:
            self.archive.compacted(session_id, first_kept, start_at)
        return digest.end(), size

    def _compacted(self, head: Head, staging: Staging) -> tuple[int, int]:
        """Trim the staged history.json to 80% of max_history_bytes, as auto compaction would after the
        Appends that made it; returns the first id it keeps and the cutoff (the head's when not trimmed)."""
        first_kept = head.first_recent_id or head.next_id
        if staging.size <= self.settings.max_history_bytes:
            return first_kept, head.start_at
        records = staging.records()
        cut = cut_for_size(records, int(self.settings.max_history_bytes * AUTO_COMPACT_RATIO))
        if not cut:
            return first_kept, head.start_at
        staging.replace(records[cut:])
        log.info("imported history compacted", extra={"session": head.session_id, "archived_only": cut})
        return records[cut].id, records[cut].send_at  # a cut always keeps the last pair

    def _check(self, head: Head, records: list[Record], last_id: int) -> None:
        """Each message as an Append would check it, ids increasing below the head's next id."""
        for record in records:
            where = f"message {record.id} of session {head.session_id!r}"
            if not last_id < record.id < head.next_id:
                raise InvalidArgument(f"{where} is out of order: ids must increase, each below next_id "
                                      f"{head.next_id}", reason=Reason.IMPORT_OUT_OF_ORDER)
            check_message(record, where, self.settings)
            check_idempotency_key(record.idempotency_key)
            last_id = record.id

    def _check_end(self, head: Head, part: Part, digest: Digest, recent: int, stream: Iterator[Part]) -> None:
        if part.records or part.head is not None or next(stream, None) is not None:
            raise InvalidArgument("the end part comes alone, last", reason=Reason.IMPORT_OUT_OF_ORDER)
        if part.end != digest.end() or recent != head.recent_messages:
            raise InvalidArgument(
                f"the import of session {head.session_id!r} does not match its end part (received "
                f"{digest.messages} messages, {recent} of them recent, up to id {digest.last_id}): the export was "
                "cut or changed; nothing was stored", reason=Reason.IMPORT_MISMATCH)

    def _write_state(self, head: Head, staging: Staging) -> None:
        """The session's files beside history.json: the id floor, the summary, its cursor and its last run."""
        staging.keep_next_id(head.next_id)
        try:
            if head.summary_json:
                durable.atomic_write(staging.directory / layout.SUMMARY, head.summary_json.encode("utf-8"))
            if head.cursor is not None:
                write_cursor(staging.directory / layout.CURSOR,
                             Record(id=head.cursor.last_id, send_at=head.cursor.send_at))
            if head.last_run is not None:
                write_run(staging.directory / layout.SUMMARY_RUN, head.last_run)
        except OSError as exc:
            raise storage_error(exc, f"importing session {head.session_id}") from exc

    def _discard(self, session_id: str) -> None:
        """Remove what an import left: its archive rows (the session is not stored), then its staging."""
        if not self.moves.stores(session_id):
            self.archive.cleared(session_id)
        self.moves.discard_staging(session_id)


def _check_head(head: Head) -> None:
    """Every id, time, the cursor and the last summary run of a head within range, and its summary readable as
    summary.json is."""
    where = f"the head of session {head.session_id!r}"
    problems = [
        (not 1 <= head.next_id <= MAX_ID, f"next_id {head.next_id} is not within 1..2^63-1"),
        (not (head.first_recent_id == 0 or 1 <= head.first_recent_id < head.next_id),
         f"first_recent_id {head.first_recent_id} is not below next_id {head.next_id}"),
        (head.start_at < 0 or head.exported_at < 0, "a time is negative"),
        (head.recent_messages < 0, "recent_messages is negative"),
        (head.cursor is not None and not 0 <= head.cursor.last_id < head.next_id,
         f"the summary cursor's message is not below next_id {head.next_id}"),
        (head.cursor is not None and head.cursor.send_at < 0, "the summary cursor's time is negative"),
        (head.last_run is not None and not 0 <= head.last_run.started_at <= head.last_run.finished_at,
         "the last summary run's times are negative or end before they start"),
    ]
    for wrong, problem in problems:
        if wrong:
            raise InvalidArgument(f"{where}: {problem}; nothing was stored", reason=Reason.IMPORT_HEAD_INVALID)
    if head.summary_json:
        try:
            rolling.decode(head.summary_json.encode("utf-8"))
        except InvalidSummary as exc:
            raise InvalidArgument(f"{where}: summary_json is not a summary memsvc can read ({exc}); nothing was "
                                  "stored", reason=Reason.IMPORT_SUMMARY_INVALID) from None
