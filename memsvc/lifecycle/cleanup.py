"""The cleanup of scratch sessions: `temp-` sessions idle for 30 minutes are removed from every store.

Owns which sessions are idle (no write to history.json, or to the directory
of one never written, for TEMP_IDLE_NS) and removing them as RemoveSession
does (the reference agent leaked their archive and vector rows; memsvc
does not). Must never remove a session that is not `temp-`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from memsvc.core.errors import NotFound
from memsvc.core.ids import TEMP_PREFIX
from memsvc.core.units import NANOS_PER_SECOND
from memsvc.window.reading import SessionStamps

log = logging.getLogger(__name__)

TEMP_IDLE_NS = 30 * 60 * NANOS_PER_SECOND


class TemporaryCleanup:
    """`remove(session_id)` removes a session from every store (Clearing.remove)."""

    def __init__(self, stamps: SessionStamps, remove: Callable[[str], object],
                 clock: Callable[[], int] = time.time_ns):
        self.stamps = stamps
        self.remove = remove
        self.clock = clock

    def remove_idle(self) -> list[str]:
        """Remove `temp-` sessions idle for 30 minutes; returns their ids."""
        idle_since = self.clock() - TEMP_IDLE_NS
        removed = []
        for stamp in self.stamps.stamps(prefix=TEMP_PREFIX):
            if (stamp.history or stamp.directory) < idle_since:
                try:
                    self.remove(stamp.session_id)
                except NotFound:
                    continue  # removed meanwhile
                removed.append(stamp.session_id)
        return removed
