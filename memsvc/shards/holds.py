"""Holds: sessions kept still while they move to another shard, and pauses of session creation.

Owns `sessions/.held-<session directory name>` (a marker per hold holding its
lease, written durably before the hold takes effect and removed before it
ends in memory, so a restart never forgets one), the transient holds of
imports in progress (in memory: a crash ends the import anyway), the set
every call about a session is checked against (UNAVAILABLE `SESSION_MOVING`),
the quota of holds (`max_held_sessions`), and the pause of session creation.
Holds and pauses lapse by themselves so a tool that dies cannot leave them
on: a hold is a lease its holder renews (HoldSession again). A reservation
(a hold of an id not stored here, which an import fills) lapses at its
lease, a hold of a stored session only FENCE later: the move's target aborts
its copy (transfer/service.py) before its source serves the session again,
so two servers never both accept writes for it. Must never decide when a
session moves or wait for its writers: moves.py takes the hold under the
session's lock, the transfer package decides.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from memsvc.core import durable, layout
from memsvc.core.errors import ResourceExhausted, Unavailable
from memsvc.core.layout import TenantLayout
from memsvc.core.reasons import Reason
from memsvc.core.units import NANOS_PER_SECOND

log = logging.getLogger(__name__)

MAX_PAUSE_SECONDS = 600
FENCE = 0.5
"A stored session's hold lapses this part of its lease after a reservation taken as long would."


class Lease(msgspec.Struct, frozen=True):
    """A hold's marker: whose, and until when (UTC ns)."""

    session_id: str
    until: int
    reserved: bool
    "Taken on an id not stored here (a move's target): it lapses first, and an import under it is aborted."


class Holds:
    """`lease_seconds`: how long a hold lasts unless renewed; `quota`: how many at most."""

    def __init__(self, places: TenantLayout, clock: Callable[[], int] = time.time_ns, *,
                 lease_seconds: float = 600.0, quota: int = 1000, pause: CreationPause | None = None):
        self.places = places
        self.pause = pause or CreationPause(clock)
        "Shared by every tenant's holds: a pause is the server's."
        self.clock = clock
        self.lease_ns = int(lease_seconds * NANOS_PER_SECOND)
        self.quota = quota
        self._lock = threading.Lock()
        markers = places.sessions_dir.glob(f"{layout.HELD}*") if places.sessions_dir.is_dir() else ()
        self._leases = {lease.session_id: lease for path in markers
                        if (lease := self._read(path.name[len(layout.HELD):], path)) is not None}
        self._held = sorted(self._leases)
        "Held session ids, in order (ListHeldSessions pages through them)."
        self._transient: set[str] = set()

    def _marker(self, session_id: str) -> Path:
        return self.places.beside(layout.HELD, session_id)

    def _read(self, name: str, path: Path) -> Lease | None:
        """The lease in the marker of the session directory named `name`; None for a marker of no session."""
        try:
            lease = msgspec.json.decode(path.read_bytes(), type=Lease)
        except (OSError, msgspec.DecodeError):  # an earlier version's marker, empty: a lease from now
            session_id = layout.id_from_name(name)
            return None if session_id is None else Lease(session_id, self.clock() + self.lease_ns, reserved=False)
        return lease if layout.directory_name(lease.session_id) == name else None

    # -- holds -------------------------------------------------------------------

    def held(self, session_id: str) -> bool:
        """Held by a move (durably) or by an import in progress."""
        with self._lock:
            return session_id in self._transient or session_id in self._leases

    def durable(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._leases

    def lease(self, session_id: str) -> Lease | None:
        with self._lock:
            return self._leases.get(session_id)

    def refuse(self, session_id: str) -> None:
        """UNAVAILABLE `SESSION_MOVING` when the session is held."""
        if self.held(session_id):
            raise Unavailable(f"session {session_id!r} is moving to another shard; retry shortly",
                              reason=Reason.SESSION_MOVING)

    def hold(self, session_id: str, stored: bool) -> Lease:
        """Hold the session durably, or renew its hold, for a lease from now (the caller made sure no write
        of it is in flight); RESOURCE_EXHAUSTED past the quota. `stored`: whether the session is stored here
        (else the hold reserves the id for an import); a renewal keeps what the hold was."""
        with self._lock:
            held = self._leases.get(session_id)
            if held is None and len(self._leases) >= self.quota:
                raise ResourceExhausted(
                    f"{len(self._leases)} sessions are held on this server already (max_held_sessions): release "
                    "some, or let their leases lapse", reason=Reason.HOLD_QUOTA_EXCEEDED)
        reserved = held.reserved if held is not None else not stored
        lasting = self.lease_ns if reserved else int(self.lease_ns * (1 + FENCE))
        lease = Lease(session_id, self.clock() + lasting, reserved)
        durable.atomic_write(self._marker(session_id), msgspec.json.encode(lease))
        with self._lock:
            if session_id not in self._leases:
                bisect.insort(self._held, session_id)
            self._leases[session_id] = lease
        return lease

    def lapsed(self) -> list[Lease]:
        """The holds whose lease ended, reservations first."""
        now = self.clock()
        with self._lock:
            ended = [lease for lease in self._leases.values() if lease.until <= now]
        return sorted(ended, key=lambda lease: (not lease.reserved, lease.until))

    def release(self, session_id: str) -> bool:
        """End the durable hold; returns whether there was one."""
        if not self.durable(session_id):
            return False
        durable.remove_file(self._marker(session_id))
        with self._lock:
            if self._leases.pop(session_id, None) is not None:
                del self._held[bisect.bisect_left(self._held, session_id)]
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
            return len(self._leases)

    def page(self, page_size: int, page_token: str) -> tuple[list[str], str]:
        """Held ids after `page_token`, at most `page_size`; the token is the last id shown."""
        with self._lock:
            start = bisect.bisect_right(self._held, page_token)
            page = self._held[start:start + page_size]
            more = start + page_size < len(self._held)
        return page, page[-1] if more and page else ""


class CreationPause:
    """Creating sessions paused on the whole server while shards change, lapsing by itself."""

    def __init__(self, clock: Callable[[], int] = time.time_ns):
        self.clock = clock
        self._lock = threading.Lock()
        self._paused_until = 0

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
