"""The window tier as the server builds it, over a temp data directory, with a real archive."""

from pathlib import Path

import pytest

from memsvc.archive.index import Archive
from memsvc.core import config
from memsvc.window.lifecycle import CompactionQueue, Lifecycle
from memsvc.window.sessions import Sessions


@pytest.fixture
def world(tmp_path: Path):
    settings = config.load({"data_dir": str(tmp_path / "data"), "max_history_messages": "2",
                            "max_history_bytes": "3000", "max_message_bytes": "500"}, environ={})
    clock = [10**18]
    archive = Archive(settings.store_dir, commit_interval=0.01)
    compactions = CompactionQueue()
    sessions = Sessions(settings, derived=[archive], embeddings=None, on_oversize=compactions.request,
                        clock=lambda: clock[0])
    lifecycle = Lifecycle(sessions, archive, compactions, clock=lambda: clock[0])
    yield sessions, archive, lifecycle, clock
    lifecycle.close()
    archive.close()
