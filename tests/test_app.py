"""The assembled domain over a temp data directory: every store is reached
through the collaborators App hands out, and bad settings stop it before any
thread starts."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memsvc.app import App
from memsvc.core import config
from memsvc.core.errors import InvalidSetting
from memsvc.search.query import Query
from memsvc.window.incoming import NewMessage


def settings(tmp_path: Path, **values: str) -> config.Settings:
    return config.load({"data_dir": str(tmp_path / "data"), "archive_commit_seconds": "0.01", "embedder": "builtin",
                        **values}, environ={})


def test_an_append_reaches_every_tier_and_close_stops_every_thread(tmp_path: Path):
    before = set(threading.enumerate())
    app = App(settings(tmp_path))
    try:
        app.tenant().appender.append("s", [NewMessage(role="user", content="we deploy the sandbox on Friday"),
                                  NewMessage(role="assistant", content="noted")])
        app.tenant().archive.flush()
        assert app.tenant().archive.count("s") == 2
        keyword = app.tenant().searcher.search(Query(session_id="s", text="sandbox", match="keyword",
                                                     include_window=True))
        assert [hit.record.content for hit in keyword.hits] == ["we deploy the sandbox on Friday"]
        semantic = app.tenant().searcher.search(Query(session_id="s", text="sandbox friday", include_window=True))
        assert "we deploy the sandbox on Friday" in [hit.record.content for hit in semantic.hits]
        assert app.tenant().contexts.for_turn("s").window[-1].content == "noted"
        deleted = app.tenant().clearing.reset("s", keep_summary=False)
        assert (deleted.history_messages, deleted.archived_messages) == (2, 2)
    finally:
        app.close()
    lingering = [thread.name for thread in set(threading.enumerate()) - before if thread.is_alive()]
    assert not [name for name in lingering if not name.startswith("lessons-embed")], lingering


def test_settings_that_cannot_work_stop_the_app_before_any_thread_starts(tmp_path: Path):
    before = threading.active_count()
    with pytest.raises(InvalidSetting, match="llm_base_url"):
        App(settings(tmp_path, summary_model="m"))
    with pytest.raises(InvalidSetting, match="embedding_base_url"):
        App(settings(tmp_path, embedder="openai"))
    assert threading.active_count() == before
    with pytest.raises(InvalidSetting, match="summary_schedule"):
        settings(tmp_path, summary_schedule="every day")  # refused when the settings are read
