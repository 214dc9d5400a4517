"""One open session: its recent messages in memory, its idempotency keys and its id floor.

Owns the in-memory copy of a session's history.json (loaded once, on open),
the idempotency keys of those messages (a retried key gets its first result),
and the id floor `.next_id` keeps (ids never repeat, even after a Reset or a
deletion of the newest); every change to that state is one of its methods,
called by the session's one writer holding `lock`. Must never write a file
nor take its own lock: the store (store.py) hands it to writers locked.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from memsvc.core import layout
from memsvc.core.errors import FailedPrecondition, storage_error
from memsvc.core.reasons import Reason
from memsvc.core.records import Record
from memsvc.window import history

log = logging.getLogger(__name__)


class Session:
    """One open session. Mutations hold `lock`; readers take the list as it is (it only grows at its end,
    or is replaced whole)."""

    def __init__(self, session_id: str, directory: Path):
        self.id = session_id
        self.directory = directory
        self.history_path = directory / layout.HISTORY
        self.summary_path = directory / layout.SUMMARY
        self.cursor_path = directory / layout.CURSOR
        self.summary_run_path = directory / layout.SUMMARY_RUN
        self.next_id_path = directory / layout.NEXT_ID
        self.lock = threading.Lock()
        self.closed = False
        "Left memory (evicted, removed, held): a writer that finds it closed opens the session afresh."
        try:
            loaded = history.load(self.history_path)
        except IsADirectoryError:
            raise FailedPrecondition(f"{self.history_path} is a directory, not a file: move it aside to use "
                                     f"session {session_id!r}", reason=Reason.HISTORY_UNREADABLE) from None
        except OSError as exc:
            raise storage_error(exc, f"opening session {session_id}") from exc
        self.records: list[Record] = []
        self.size = 0
        "Bytes of history.json."
        self.replies: dict[str, list[Record]] = {}
        self.rewritten(loaded.records, loaded.size)
        self.floor_id = self._read_floor()

    def _read_floor(self) -> int:
        """The id after the last one a Reset removed (1 when the session was never reset)."""
        try:
            return int(self.next_id_path.read_bytes())
        except FileNotFoundError:
            return 1
        except (OSError, ValueError) as exc:
            log.warning("unreadable .next_id left in place; ids continue after those in history.json",
                        extra={"path": str(self.next_id_path), "error": str(exc)})
            return 1

    @property
    def next_id(self) -> int:
        """Ids never repeat in a session, even after Reset emptied its history."""
        return max(self.records[-1].id + 1 if self.records else 1, self.floor_id)

    def published(self, records: list[Record], idempotency_key: str) -> None:
        """An Append is durable: readers see `records` from now on, and its key replays them."""
        self.records.extend(records)
        if idempotency_key:
            self.replies[idempotency_key] = records

    def replaced(self, records: list[Record], size: int, *, forget_keys: bool) -> None:
        """history.json was rewritten to hold exactly `records`, `size` bytes. `forget_keys`: the messages
        that left it were deleted, so their keys are forgotten, as history.json tells after a restart (a
        compaction keeps them: its messages still exist, in the archive)."""
        if forget_keys:
            kept = {record.id for record in records}
            self.replies = {key: left for key, replied in self.replies.items()
                            if (left := [record for record in replied if record.id in kept])}
        self.records, self.size = records, size

    def rewritten(self, records: list[Record], size: int) -> None:
        """history.json holds exactly `records`, `size` bytes, and nothing else of before: the keys are
        those these records carry, as after a restart."""
        self.records, self.size, self.replies = records, size, {}
        for record in records:
            if record.idempotency_key:
                self.replies.setdefault(record.idempotency_key, []).append(record)

    def floor_raised(self, next_id: int) -> None:
        """`.next_id` now holds `next_id`: ids continue from there."""
        self.floor_id = next_id
