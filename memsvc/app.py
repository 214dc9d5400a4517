"""The domain, assembled: every store and worker a running server owns.

Owns construction order and shutdown order. Must never speak gRPC: server.py
binds it to the wire.
"""

from __future__ import annotations

from .config import Settings
from .search import Searcher
from .sessions import Sessions


class App:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.sessions = Sessions(settings)
        self.searcher = Searcher(self.sessions)

    def close(self) -> None:
        """Flush and stop background work; called once, after the last RPC."""
