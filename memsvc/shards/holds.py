"""Holds: sessions kept still while they move to another shard, and pauses of session creation.

Owns `sessions/.held-<session directory name>` (a marker per hold holding the id, written durably before
the hold takes effect and removed before it ends in memory, so a restart
never forgets one), the transient holds of imports in progress (in memory:
a crash ends the import anyway), the set every call about a session is
checked against (UNAVAILABLE `SESSION_MOVING`), and the pause of session
creation, which lapses by itself so a tool that dies cannot leave it on.
Must never decide when a session moves or wait for its writers: moves.py
takes the hold under the session's lock, the transfer package decides.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memsvc.core import durable, layout
from memsvc.core.errors import Unavailable
from memsvc.core.layout import TenantLayout
from memsvc.core.reasons import Reason
from memsvc.core.units import NANOS_PER_SECOND

MAX_PAUSE_SECONDS = 600


class Holds:
    def __init__(self, places: TenantLayout, clock: Callable[[], int] = time.time_ns):
        self.places = places
        self.clock = clock
        self._lock = threading.Lock()
        self._durable = sorted(session_id for session_id, _ in places.besides(layout.HELD))
        "Held session ids, in order (ListHeldSessions pages through them)."
        self._transient: set[str] = set()
        self._paused_until = 0

    def _marker(self, session_id: str) -> Path:
        return self.places.beside(layout.HELD, session_id)

    # -- holds -------------------------------------------------------------------

    def held(self, session_id: str) -> bool:
        """Held by a move (durably) or by an import in progress."""
        with self._lock:
            return session_id in self._transient or self._is_durable(session_id)

    def durable(self, session_id: str) -> bool:
        with self._lock:
            return self._is_durable(session_id)

    def _is_durable(self, session_id: str) -> bool:
        index = bisect.bisect_left(self._durable, session_id)
        return index < len(self._durable) and self._durable[index] == session_id

    def refuse(self, session_id: str) -> None:
        """UNAVAILABLE `SESSION_MOVING` when the session is held."""
        if self.held(session_id):
            raise Unavailable(f"session {session_id!r} is moving to another shard; retry shortly",
                              reason=Reason.SESSION_MOVING)

    def hold(self, session_id: str) -> None:
        """Hold the session durably (the caller made sure no write of it is in flight)."""
        if self.durable(session_id):
            return
        layout.record_id(self._marker(session_id), session_id)
        with self._lock:
            if not self._is_durable(session_id):
                bisect.insort(self._durable, session_id)

    def release(self, session_id: str) -> bool:
        """End the durable hold; returns whether there was one."""
        if not self.durable(session_id):
            return False
        durable.remove_file(self._marker(session_id))
        with self._lock:
            index = bisect.bisect_left(self._durable, session_id)
            if index < len(self._durable) and self._durable[index] == session_id:
                del self._durable[index]
        return True

    @contextmanager
    def transient(self, session_id: str) -> Iterator[None]:
        """Hold the session for the block, in memory only (an import under way)."""
        with self._lock:
            if session_id in self._transient:
                raise Unavailable(f"session {session_id!r} is being imported already; retry later",
                                  reason=Reason.SESSION_MOVING)
            self._transient.add(session_id)
        try:
            yield
        finally:
            with self._lock:
                self._transient.discard(session_id)

    def count(self) -> int:
        with self._lock:
            return len(self._durable)

    def page(self, page_size: int, page_token: str) -> tuple[list[str], str]:
        """Held ids after `page_token`, at most `page_size`; the token is the last id shown."""
        with self._lock:
            start = bisect.bisect_right(self._durable, page_token)
            page = self._durable[start:start + page_size]
            more = start + page_size < len(self._durable)
        return page, page[-1] if more and page else ""

    # -- pausing creation --------------------------------------------------------

    def pause_creation(self, seconds: int) -> int:
        """Refuse creating sessions for `seconds` from now (0: allow again); returns the end, 0 when none."""
        seconds = min(max(seconds, 0), MAX_PAUSE_SECONDS)
        with self._lock:
            self._paused_until = self.clock() + seconds * NANOS_PER_SECOND if seconds else 0
        return self._paused_until

    def creation_paused_until(self) -> int:
        with self._lock:
            return self._paused_until if self._paused_until > self.clock() else 0

    def refuse_creation(self) -> None:
        """UNAVAILABLE `SESSION_CREATION_PAUSED` while creating sessions is paused."""
        if self.creation_paused_until():
            raise Unavailable("creating sessions is paused on this server while shards change; retry shortly "
                              "(existing sessions keep working)", reason=Reason.SESSION_CREATION_PAUSED)
