"""One open session: its files' names, its recent messages in memory and what is derived from them.

Owns the in-memory copy of a session's history.json (loaded once, on open),
the idempotency keys of those messages, the id floor `.next_id` keeps (ids
never repeat, even after a Reset or a deletion of the newest), and the
lower-cased contents keyword search scans. Must never write a file nor lock
anything itself: the modules of Sessions (registry.py and the ones built on
it) do, holding `lock`.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from memsvc.core.errors import FailedPrecondition, storage_error
from memsvc.core.records import Record
from memsvc.window import history

log = logging.getLogger(__name__)


class Session:
    """One open session. Mutations hold `lock`; readers take the list as it is."""

    def __init__(self, session_id: str, directory: Path):
        self.id = session_id
        self.directory = directory
        self.history_path = directory / "history.json"
        self.summary_path = directory / "summary.json"
        self.next_id_path = directory / ".next_id"
        self.lock = threading.Lock()
        self.closed = False
        try:
            loaded = history.load(self.history_path)
        except IsADirectoryError:
            raise FailedPrecondition(f"{self.history_path} is a directory, not a file: move it aside to use "
                                     f"session {session_id!r}", reason="HISTORY_UNREADABLE") from None
        except OSError as exc:
            raise storage_error(exc, f"opening session {session_id}") from exc
        self.records: list[Record] = loaded.records
        self.size = loaded.size
        self.replies: dict[str, list[Record]] = {}
        for record in self.records:
            if record.idempotency_key:
                self.replies.setdefault(record.idempotency_key, []).append(record)
        self._lowered: dict[int, str] = {}
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

    def lowered(self, record: Record) -> str:
        """The record's content in lower case, computed once (keyword search scans it often)."""
        text = self._lowered.get(record.id)
        if text is None:
            text = self._lowered[record.id] = record.content.lower()
        return text


    def replaced(self, records: list[Record], size: int) -> None:
        """history.json was rewritten to hold exactly `records`, `size` bytes."""
        self.records, self.size, self._lowered = records, size, {}
