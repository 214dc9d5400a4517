import os
import threading
import time

import pytest

from memsvc.core.errors import FailedPrecondition, NotFound, Unavailable
from memsvc.core.records import Record
from memsvc.window.intents import Intent
from memsvc.window.lifecycle import CompactionQueue, Lifecycle, cut_for_size, pair_boundary
from memsvc.window.sessions import NewMessage, Sessions
from tests.support import talk


def roles(*names: str) -> list[Record]:
    return [Record(id=i, role=name, content="x" * 10, send_at=i) for i, name in enumerate(names, start=1)]


def test_pair_boundary_cuts_only_after_an_assistant_message():
    records = roles("user", "assistant", "user", "user", "assistant", "user")
    assert pair_boundary(records, 4) == 2
    assert pair_boundary(records, 5) == 5
    assert pair_boundary(records, 1) == 0
    assert pair_boundary(records, -3) == 0


def test_cut_for_size_takes_the_smallest_boundary_that_fits():
    records = roles(*["user", "assistant"] * 10)
    line = 75  # roughly one rendered record
    cut = cut_for_size(records, 6 * line)
    assert cut % 2 == 0 and records[cut - 1].role == "assistant"
    assert cut_for_size(records, 10**9) == 0
    assert cut_for_size(roles("user", "user", "user"), 1) == 0


def test_auto_compaction_runs_in_the_background_after_an_oversize_append(world):
    sessions, archive, lifecycle, _ = world
    talk(sessions, "s", 40)
    lifecycle.close()  # waits for the background worker to finish what was requested
    session = sessions.reading("s")
    assert session.size <= 3000 * 0.8 + 200 or session.size <= 3000
    assert session.records[0].role == "user"
    archive.flush()
    assert archive.count("s") == 80


def test_compact_reports_removed_and_start_at(world):
    sessions, archive, lifecycle, _ = world
    talk(sessions, "s", 5)
    result = lifecycle.compact("s")
    assert result.removed == 8
    assert result.start_at == sessions.window("s")[0].send_at
    assert archive.start_at("s") == result.start_at


def test_reset_keeps_or_drops_the_summary_and_ids_continue(world):
    sessions, _, lifecycle, _ = world
    talk(sessions, "s", 3)
    summary = sessions.directory("s") / "summary.json"
    summary.write_text('{"key_decisions": [], "past_discussions": []}')
    kept = lifecycle.reset("s", keep_summary=True)
    assert (kept.history_messages, kept.archived_messages, kept.summary) == (6, 6, False)
    assert summary.exists()
    sessions.append("s", [NewMessage(role="user", content="again")])
    assert sessions.window("s")[0].id == 7
    dropped = lifecycle.reset("s", keep_summary=False)
    assert dropped.summary and not summary.exists()


def test_remove_deletes_the_directory_and_unknown_sessions_are_not_found(world):
    sessions, archive, lifecycle, _ = world
    talk(sessions, "s", 2)
    assert lifecycle.remove("s").archived_messages == 4
    assert not sessions.directory("s").exists() and archive.count("s") == 0
    with pytest.raises(NotFound) as missing:
        lifecycle.remove("s")
    assert missing.value.reason == "SESSION_NOT_FOUND"
    with pytest.raises(NotFound):
        lifecycle.compact("ghost")


def test_idle_temporary_sessions_are_removed_from_every_store(world):
    sessions, archive, lifecycle, clock = world
    for session_id in ("temp-idle", "temp-busy", "keep-idle"):
        talk(sessions, session_id, 1)
    now = (sessions.directory("temp-busy") / "history.json").stat().st_mtime_ns
    an_hour_ago = now - 3600 * 10**9
    for session_id in ("temp-idle", "keep-idle"):
        os.utime(sessions.directory(session_id) / "history.json", ns=(an_hour_ago, an_hour_ago))
    clock[0] = now + 60 * 10**9
    assert lifecycle.remove_idle_temporary() == ["temp-idle"]
    assert archive.count("temp-idle") == 0 and archive.count("keep-idle") == 2
    assert sessions.exists("keep-idle") and sessions.exists("temp-busy") and not sessions.exists("temp-idle")


def test_reset_waits_while_another_writer_holds_the_session(world):
    import threading

    sessions, archive, _, _ = world
    talk(sessions, "s", 1)
    summary_run = threading.Lock()
    lifecycle = Lifecycle(sessions, archive, CompactionQueue(), exclusive=[lambda session_id: summary_run])
    summary_run.acquire()
    resetting = threading.Thread(target=lifecycle.reset, args=("s", True))
    resetting.start()
    resetting.join(0.3)
    assert resetting.is_alive() and len(sessions.window("s")) == 2
    summary_run.release()
    resetting.join()
    lifecycle.close()
    assert sessions.window("s") == []


def test_an_interrupted_reset_is_completed_before_the_session_is_used_again(world):
    sessions, archive, lifecycle, _ = world
    talk(sessions, "s", 4)
    lifecycle.compact("s")
    next_id = sessions.reading("s").next_id
    # Killed half way: the intent recorded, the archive cleared, history.json still there.
    sessions.intents.begin(Intent("s", "reset", next_id))
    archive.cleared("s")
    reopened = Sessions(sessions.settings, derived=[archive], embeddings=None, on_oversize=lambda session_id: None)
    with pytest.raises(Unavailable) as refused:
        reopened.append("s", [NewMessage(role="user", content="too early")])
    assert refused.value.reason == "SESSION_BEING_CLEARED"
    resumed = Lifecycle(reopened, archive, CompactionQueue())
    try:
        assert resumed.finish_interrupted() == 1
        assert reopened.window("s") == [] and archive.count("s") == 0
        assert not list(reopened.root.glob(".intent-*"))
        assert reopened.append("s", [NewMessage(role="user", content="after")]).records[0].id == next_id
    finally:
        resumed.close()


def test_a_reset_refused_by_a_damaged_archive_changes_nothing(world):
    sessions, archive, lifecycle, _ = world
    talk(sessions, "s", 2)
    archive.damage.found("a test says so")
    with pytest.raises(FailedPrecondition) as refused:
        lifecycle.reset("s", keep_summary=False)
    assert refused.value.reason == "ARCHIVE_DAMAGED"
    assert len(sessions.window("s")) == 2 and sessions.intents.interrupted("s") is None
    assert not list(sessions.root.glob(".intent-*"))


def test_a_reset_waiting_for_a_removal_finds_the_session_gone(world):
    sessions, _, lifecycle, _ = world
    talk(sessions, "s", 1)
    outcome: list[BaseException | None] = []

    def reset() -> None:
        try:
            lifecycle.reset("s", keep_summary=True)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with sessions.writing("s") as session:  # a removal holds the session
        waiting = threading.Thread(target=reset)
        waiting.start()
        time.sleep(0.2)  # time for the Reset to see the session and wait for it
        sessions.remove(session)
    waiting.join()
    assert isinstance(outcome[0], NotFound), outcome
