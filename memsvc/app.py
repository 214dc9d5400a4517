"""The domain, assembled: every store and worker a running server owns.

Owns construction order and shutdown order. Must never speak gRPC: server.py
binds it to the wire.
"""

from __future__ import annotations

import time

from .archive import Archive
from .config import Settings
from .lessons import Lessons
from .lifecycle import Lifecycle
from .search import Searcher
from .sessions import Sessions


class App:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.sessions = Sessions(settings)
        self.archive = Archive(settings.store_dir, settings.archive_commit_seconds)
        self.sessions.derived.append(self.archive)
        self.lifecycle = Lifecycle(self.sessions, self.archive)
        self.searcher = Searcher(self.sessions, self.archive)
        offset = int(settings.clock_offset_seconds * 1_000_000_000)
        self.lessons = Lessons(settings.store_dir / "lessons.sqlite3", ttl_days=settings.error_ttl_days,
                               clock=lambda: time.time_ns() + offset)

    def close(self) -> None:
        """Flush and stop background work; called once, after the last RPC."""
        self.lifecycle.close()
        self.archive.close()
        self.lessons.close()
