"""Listing the stored sessions: pages of them by id, each with its size, count and last write.

Owns ListSessions' order (by id, as bytes) and paging (the token is the last
id shown), the filter by a part of the id, what is said of each session
without opening it (a closed session's messages are counted without decoding
history.json), and the times of each session's files (the idle `temp-`
cleanup and the summary job ask). Must never open a session nor change a
file: a listing of thousands of sessions must not evict the open ones.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import msgspec

from memsvc.core import durable, layout
from memsvc.core.ids import check_session_id
from memsvc.core.layout import TenantLayout
from memsvc.window.reading import Stamps
from memsvc.window.session import Session

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 100, 1000


class SessionInfo(msgspec.Struct):
    session_id: str
    message_count: int
    history_bytes: int
    last_append: int
    "UTC Unix nanoseconds (history.json's modification time)."
    has_summary: bool


class OpenSessions(Protocol):
    def in_memory(self, session_id: str) -> Session | None: ...


class Lister:
    def __init__(self, places: TenantLayout, open_sessions: OpenSessions, storage: durable.DataPaths):
        self.places = places
        self.open_sessions = open_sessions
        self.storage = storage

    def _stored(self) -> list[tuple[str, Path]]:
        """(id, directory) of every stored session; UNAVAILABLE `DATA_DIR_MISSING` when the data directory
        was deleted under the server, as every other call answers then."""
        self.storage.check()
        try:
            return self.places.stored()
        except FileNotFoundError:
            self.storage.check()
            return []  # deleted and made again between the check and the listing: nothing stored

    def list_page(self, page_size: int, page_token: str, id_contains: str = "") -> tuple[list[SessionInfo], str]:
        """One page of sessions ordered by id, only those whose id contains `id_contains` (ignoring
        case) when it is given; the token is the last id shown.

        `page_size` 0 means DEFAULT_PAGE_SIZE; more than MAX_PAGE_SIZE gets MAX_PAGE_SIZE.
        """
        page_size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        if page_token:
            check_session_id(page_token, "page_token")
        needle = id_contains.casefold()
        stored = sorted((session_id, directory) for session_id, directory in self._stored()
                        if session_id > page_token and needle in session_id.casefold())
        page = stored[:page_size]
        infos = [self._info(session_id, directory) for session_id, directory in page]
        return infos, page[-1][0] if len(stored) > page_size else ""

    def _info(self, session_id: str, directory: Path) -> SessionInfo:
        path = directory / layout.HISTORY
        session = self.open_sessions.in_memory(session_id)
        try:
            stat = path.stat()
            size, modified = stat.st_size, stat.st_mtime_ns
            count = len(session.records) if session is not None else _count_records(path) if size else 0
        except FileNotFoundError:
            size, modified, count = 0, 0, 0
        except OSError as exc:  # one unreadable session must not fail the listing of every other
            log.warning("history unreadable while listing sessions", extra={"path": str(path), "error": str(exc)})
            size, modified, count = 0, 0, 0
        return SessionInfo(session_id, count, size, modified, (directory / layout.SUMMARY).exists())

    def stamps(self, prefix: str = "") -> list[Stamps]:
        """The file times of every stored session whose id starts with `prefix`, in id order."""
        found = []
        for session_id, directory in sorted(self._stored()):
            if session_id.startswith(prefix):
                try:
                    found.append(Stamps(session_id, directory.stat().st_mtime_ns,
                                        _modified(directory / layout.HISTORY), _modified(directory / layout.SUMMARY)))
                except FileNotFoundError:
                    continue  # removed while listed
        return found


def _modified(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except (FileNotFoundError, NotADirectoryError):
        return 0


def _count_records(path: Path) -> int:
    """Records in a closed session's history without decoding it.

    Every stored record starts with `{"id":` and that byte sequence cannot
    occur inside a JSON string (its quotes would be escaped).
    """
    return path.read_bytes().count(b'{"id":')
