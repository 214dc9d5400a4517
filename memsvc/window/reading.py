"""What readers of tier 1 may ask of it: the protocols search, the summary tier and transcripts depend on.

Readers get an open session (its recent messages, which only grow at their
end or are replaced whole, and its next id) or the window, never a way to
write; the session store (store.py) and the lister (lister.py) implement
these. Must never hold an implementation: the import contracts keep search/
and summary/ on this module, not on the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import msgspec

from memsvc.core.records import Record
from memsvc.window.session import Session


class Stamps(msgspec.Struct):
    """When a stored session's files last changed (UTC ns; 0 when the file is missing)."""

    session_id: str
    directory: int
    history: int
    summary: int


class SessionReader(Protocol):
    """Read access to the sessions of one tenant."""

    def reading(self, session_id: str) -> Session | None:
        """The open session, or None when it was never written (it is opened if it is not)."""

    def in_memory(self, session_id: str) -> Session | None:
        """The session if it is open now: never reads the disk."""

    def require(self, session_id: str) -> Session:
        """The open session, or NOT_FOUND `SESSION_NOT_FOUND`."""

    def directory(self, session_id: str) -> Path:
        """Where the session's files are (the summary tier keeps its own there)."""

    def window(self, session_id: str) -> list[Record]:
        """The last max_history_messages messages, oldest first."""

    def records_after(self, session_id: str, after_id: int) -> list[Record]:
        """The messages in history.json with an id above `after_id`, oldest first."""


class SessionStamps(Protocol):
    """When each stored session's files last changed (the summary job picks sessions by them)."""

    def stamps(self, prefix: str = "") -> list[Stamps]:
        """Every stored session whose id starts with `prefix`, in id order."""
