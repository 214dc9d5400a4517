"""How many bytes a tenant stores, against its max_bytes quota.

Owns the count: its directories measured whole now and then (`measure`, a
job, and at start), plus what Appends and imports added since, so a quota is
kept between measurements without walking the disk on a request. Must never
delete anything: a tenant past its quota only stops growing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from memsvc.core.errors import ResourceExhausted
from memsvc.core.reasons import Reason
from memsvc.core.records import Record, utf8_size


class Usage:
    """The bytes under `directories`; `limit()` is the quota in force (0: none)."""

    def __init__(self, tenant: str, directories: Sequence[Path], limit: Callable[[], int]):
        self.tenant = tenant
        self.directories = tuple(directories)
        self.limit = limit
        self._lock = threading.Lock()
        self._measured = 0
        self._added = 0

    def measure(self) -> None:
        """Walk the directories again (only while a quota is set: nothing else reads the count)."""
        if not self.limit():
            return
        total = sum(directory_bytes(directory) for directory in self.directories)
        with self._lock:
            self._measured, self._added = total, 0

    def stored(self) -> int:
        with self._lock:
            return self._measured + self._added

    def refuse(self, records: Sequence[Record], pending: int = 0) -> int:
        """RESOURCE_EXHAUSTED `TENANT_QUOTA` when storing `records`, after `pending` bytes of the same call (an
        import's pages before) not stored yet, would pass max_bytes; else the bytes `records` count for (0
        while no quota is set: nothing is counted then)."""
        limit = self.limit()
        if not limit:
            return 0
        size = _bytes(records)
        if self.stored() + pending + size > limit:
            raise ResourceExhausted(
                f"tenant {self.tenant!r} stores {self.stored()} bytes and max_bytes (its tenants file entry) is "
                f"{limit}: nothing was stored; remove sessions or raise the quota", reason=Reason.TENANT_QUOTA,
                metadata={"quota": "max_bytes", "limit": str(limit)})
        return size

    def added(self, records: Sequence[Record]) -> None:
        if self.limit():
            self.grew(_bytes(records))

    def grew(self, size: int) -> None:
        with self._lock:
            self._added += size


def _bytes(records: Sequence[Record]) -> int:
    """What `records` take on disk, roughly: their text and payload, UTF-8 (the measurement corrects it)."""
    return sum(utf8_size(record.content) + utf8_size(record.payload)
               for record in records)


def directory_bytes(directory: Path) -> int:
    """What the files under `directory` take, in bytes (0 when it is gone)."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # removed while walked
    return total
