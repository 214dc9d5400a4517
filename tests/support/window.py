"""Tier 1 and the lifecycle over it, built as a tenant builds them, with a real archive and a fake clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsvc.archive.index import Archive
from memsvc.core import config
from memsvc.core.layout import Layout
from memsvc.lifecycle.cleanup import TemporaryCleanup
from memsvc.lifecycle.clearing import Clearing
from memsvc.lifecycle.compaction import Compaction, CompactionQueue
from tests.support import session_parts


class Lifecycle:
    """The sessions of a temp data directory with their archive, compaction, clearing and cleanup."""

    def __init__(self, settings: config.Settings, clock: list[int]):
        self.settings = settings
        self.clock = clock
        self.archive = Archive(Layout(settings.data_dir).tenant().store_dir, commit_interval=0.01)
        queue = CompactionQueue()
        self.parts, self.journal = session_parts(settings, derived=[self.archive], on_oversize=queue.request,
                                                 clock=lambda: clock[0])
        self.compaction = Compaction(settings, self.parts.store, self.parts.rewriter, self.archive, [self.archive],
                                     queue)
        self.clearing = Clearing(settings, self.parts.store, self.parts.rewriter, self.parts.intents, self.archive,
                                 [self.archive])
        self.cleanup = TemporaryCleanup(self.parts.lister, self.clearing.remove, lambda: clock[0])

    def close(self) -> None:
        self.compaction.close()
        self.journal.close()
        self.archive.close()


@pytest.fixture
def world(tmp_path: Path):
    settings = config.load({"data_dir": str(tmp_path / "data"), "max_history_messages": "2",
                            "max_history_bytes": "3000", "max_message_bytes": "500"}, environ={})
    lifecycle = Lifecycle(settings, [10**18])
    yield lifecycle
    lifecycle.close()
