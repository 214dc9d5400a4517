"""Sessions: tier 1, the source of truth for recent messages, assembled from its parts.

`sessions/<id>/` is tier 1: history.json, written by Appends (appending.py,
durable through the shared journal, journal.py) and rewritten or deleted
only by rewriting.py, which settles the journal first; the open sessions
in memory and the refusals every call passes (registry.py); the listing of
stored sessions (listing.py); one open session's state (session.py). The
Sessions class is those parts together, what the rest of memsvc is handed.
Must never hold behaviour of its own: each part's module does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from memsvc.core.config import Settings
from memsvc.window.appending import Appending
from memsvc.window.derived import DerivedStore, EmbeddingSink
from memsvc.window.incoming import NewMessage as NewMessage  # re-exported: callers build it from here
from memsvc.window.listing import Listing
from memsvc.window.rewriting import Rewriting


class Sessions(Appending, Rewriting, Listing):
    """Every session of the data root; opens them on first use and keeps the open ones in memory.

    `derived` stores hear of every change; `embeddings` takes vectors clients
    supply (None: refuse them); `on_oversize(session_id)` is called after an
    Append leaves history.json over max_history_bytes (it must return at once:
    compaction happens elsewhere).
    """

    def __init__(self, settings: Settings, *, derived: Sequence[DerivedStore], embeddings: EmbeddingSink | None,
                 on_oversize: Callable[[str], None], clock: Callable[[], int] = time.time_ns):
        self.embeddings = embeddings
        self.on_oversize = on_oversize
        super().__init__(settings, derived=derived, clock=clock)
