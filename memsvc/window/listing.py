"""Listing the stored sessions: pages of them by id, each with its size, count and last write.

Owns ListSessions' order and paging (the token is the last id shown), the
filter by a part of the id, what is said of each session without opening
it (a closed session's messages are counted without decoding history.json),
and the last write of each session (the idle `temp-` cleanup asks). Must
never open a session nor change a file: a listing of thousands of sessions
must not evict the open ones.
"""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec

from memsvc.core.ids import check_session_id, is_session_id
from memsvc.window.registry import Registry

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 1000


class SessionInfo(msgspec.Struct):
    session_id: str
    message_count: int
    history_bytes: int
    last_append: int
    "UTC Unix nanoseconds (history.json's modification time)."
    has_summary: bool


class Listing(Registry):
    def list_page(self, page_size: int, page_token: str, id_contains: str = "") -> tuple[list[SessionInfo], str]:
        """One page of sessions ordered by id, only those whose id contains `id_contains` (ignoring
        case) when it is given; the token is the last id shown.

        `page_size` 0 means DEFAULT_PAGE_SIZE; more than MAX_PAGE_SIZE gets MAX_PAGE_SIZE.
        """
        page_size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        if page_token:
            check_session_id(page_token)
        needle = id_contains.casefold()
        names = sorted(entry.name for entry in self.root.iterdir()
                       if entry.is_dir() and is_session_id(entry.name) and entry.name > page_token
                       and needle in entry.name.casefold())
        page = names[:page_size]
        infos = [info for name in page if (info := self._info(name)) is not None]
        return infos, page[-1] if len(names) > page_size else ""

    def _info(self, session_id: str) -> SessionInfo | None:
        directory = self.root / session_id
        path = directory / "history.json"
        session = self.in_memory(session_id)
        try:
            stat = path.stat()
            size, modified = stat.st_size, stat.st_mtime_ns
            count = len(session.records) if session is not None else _count_records(path) if size else 0
        except FileNotFoundError:
            size, modified, count = 0, 0, 0
        except OSError as exc:  # one unreadable session must not fail the listing of every other
            log.warning("history unreadable while listing sessions", extra={"path": str(path), "error": str(exc)})
            size, modified, count = 0, 0, 0
        return SessionInfo(session_id, count, size, modified, (directory / "summary.json").exists())

    def last_writes(self, prefix: str = "") -> list[tuple[str, int]]:
        """(session id, last history write in UTC ns) of stored sessions whose id starts with `prefix`."""
        found = []
        for entry in self.root.iterdir():
            if entry.is_dir() and entry.name.startswith(prefix) and is_session_id(entry.name):
                try:
                    found.append((entry.name, (entry / "history.json").stat().st_mtime_ns))
                except FileNotFoundError:
                    found.append((entry.name, entry.stat().st_mtime_ns))
        return found


def _count_records(path: Path) -> int:
    """Records in a closed session's history without decoding it.

    Every stored record starts with `{"id":` and that byte sequence cannot
    occur inside a JSON string (its quotes would be escaped).
    """
    return path.read_bytes().count(b'{"id":')
