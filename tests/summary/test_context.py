"""What a turn gets from tier 1 (window + turn context) and what GetSummary
shows, over real session files in a temp directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsvc.app import SessionParts
from memsvc.core import config
from memsvc.core.errors import NotFound
from memsvc.core.layout import CURSOR
from memsvc.summary import rolling
from memsvc.summary.context import Contexts
from memsvc.summary.cursor import write_cursor
from memsvc.summary.rolling import Summary
from memsvc.window.incoming import NewMessage
from tests.support import session_parts


@pytest.fixture
def sessions(tmp_path: Path) -> SessionParts:
    settings = config.load({"data_dir": str(tmp_path / "data"), "max_history_messages": "2"}, environ={})
    return session_parts(settings)[0]


def say(sessions: SessionParts, session_id: str, *texts: str) -> None:
    sessions.appender.append(session_id, [NewMessage(role="user", content=text) for text in texts])


def test_summary_json_is_reread_only_when_the_file_changes(sessions: SessionParts):
    contexts = Contexts(sessions.store, None, cached_sessions=8)
    say(sessions, "s", "x")
    assert contexts.summary("s") is None
    path = sessions.store.directory("s") / "summary.json"
    rolling.save(path, Summary(key_decisions=["Do: a"]))
    assert contexts.summary("s").key_decisions == ["Do: a"]
    stamp = path.stat().st_mtime_ns
    rolling.save(path, Summary(key_decisions=["Do: b"]))
    os.utime(path, ns=(stamp, stamp))  # new content, same modification time: the cached copy stands
    assert contexts.summary("s").key_decisions == ["Do: a"]
    os.utime(path, ns=(stamp + 1, stamp + 1))
    assert contexts.summary("s").key_decisions == ["Do: b"]
    path.unlink()
    assert contexts.summary("s") is None


def test_the_cache_holds_at_most_the_sessions_it_was_given(sessions: SessionParts):
    contexts = Contexts(sessions.store, None, cached_sessions=2)
    for name in ("a", "b", "c"):
        say(sessions, name, "x")
        rolling.save(sessions.store.directory(name) / "summary.json", Summary(key_decisions=[f"Do: {name}"]))
        assert contexts.summary(name).key_decisions == [f"Do: {name}"]
    assert len(contexts._cache) == 2 and "a" not in contexts._cache


def test_a_turn_gets_the_window_and_the_summary_as_its_turn_context(sessions: SessionParts):
    contexts = Contexts(sessions.store, None, cached_sessions=8)
    say(sessions, "s", "one", "two", "three")
    bare = contexts.for_turn("s")
    assert [record.content for record in bare.window] == ["two", "three"] and bare.summary is None
    assert bare.text == ""
    rolling.save(sessions.store.directory("s") / "summary.json", Summary(key_decisions=["Do: be brief"]))
    turn = contexts.for_turn("s", "request text is ignored without a decision model")
    assert turn.summary == Summary(key_decisions=["Do: be brief"])
    assert turn.text == rolling.turn_context(turn.summary) and turn.text.startswith("Prior summary:")
    rolling.save(sessions.store.directory("s") / "summary.json", Summary(key_decisions=[], past_discussions=[]))
    assert contexts.for_turn("s").summary is None  # an empty summary is left out
    assert not contexts.may_wait("text") and contexts.for_turn("unknown").window == []


def test_the_stored_summary_comes_with_its_cursor_and_unknown_sessions_are_not_found(sessions: SessionParts):
    contexts = Contexts(sessions.store, None, cached_sessions=8)
    say(sessions, "s", "x")
    assert contexts.stored("s").summary is None and contexts.stored("s").cursor_at == 0
    record = sessions.store.window("s")[0]
    write_cursor(sessions.store.directory("s") / CURSOR, record)
    assert contexts.stored("s").cursor_at == record.send_at
    with pytest.raises(NotFound) as missing:
        contexts.stored("ghost")
    assert missing.value.reason == "SESSION_NOT_FOUND"
