import os
import threading
import time

import pytest

from memsvc.core.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from memsvc.core.records import Record
from memsvc.lifecycle.clearing import Clearing
from memsvc.lifecycle.cuts import cut_for_size, pair_boundary
from memsvc.lifecycle.intents import Intent
from memsvc.window import history
from memsvc.window.incoming import NewMessage
from tests.support import session_parts, talk


def roles(*names: str) -> list[Record]:
    return [Record(id=i, role=name, content="x" * 10, send_at=i) for i, name in enumerate(names, start=1)]


def test_pair_boundary_cuts_only_after_an_assistant_message():
    records = roles("user", "assistant", "user", "user", "assistant", "user")
    assert pair_boundary(records, 4) == 2
    assert pair_boundary(records, 5) == 5
    assert pair_boundary(records, 1) == 0
    assert pair_boundary(records, -3) == 0


def test_no_cut_falls_between_a_tool_call_and_its_result():
    records = roles("user", "assistant", "tool", "assistant", "user", "assistant", "tool", "tool")
    assert pair_boundary(records, 3) == 0, "the assistant at 2 called the tool answering at 3"
    assert pair_boundary(records, 4) == 4
    assert pair_boundary(records, 8) == 4
    assert cut_for_size(records, len(history.render(records[3:]))) == 4, "not 3, the tool result's call"


def test_cut_for_size_takes_the_smallest_boundary_that_fits():
    records = roles(*["user", "assistant"] * 10)
    line = 75  # roughly one rendered record
    cut = cut_for_size(records, 6 * line)
    assert cut % 2 == 0 and records[cut - 1].role == "assistant"
    assert cut_for_size(records, 10**9) == 0
    assert cut_for_size(roles("user", "user", "user"), 1) == 0


def test_auto_compaction_runs_in_the_background_after_an_oversize_append(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 40)
    lifecycle.compaction.close()  # waits for the background worker to finish what was requested
    session = sessions.store.reading("s")
    assert session.size <= 3000 * 0.8 + 200 or session.size <= 3000
    assert session.records[0].role == "user"
    archive.flush()
    assert archive.count("s") == 80


def test_compact_reports_removed_and_start_at(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 5)
    result = lifecycle.compaction.compact("s")
    assert result.removed == 8
    assert result.start_at == sessions.store.window("s")[0].send_at
    assert archive.start_at("s") == result.start_at


def test_reset_keeps_or_drops_the_summary_and_ids_continue(world):
    sessions, _, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 3)
    summary = sessions.store.directory("s") / "summary.json"
    summary.write_text('{"key_decisions": [], "past_discussions": []}')
    kept = lifecycle.clearing.reset("s", keep_summary=True)
    assert (kept.history_messages, kept.archived_messages, kept.summary) == (6, 6, False)
    assert summary.exists()
    sessions.appender.append("s", [NewMessage(role="user", content="again")])
    assert sessions.store.window("s")[0].id == 7
    dropped = lifecycle.clearing.reset("s", keep_summary=False)
    assert dropped.summary and not summary.exists()


def test_remove_deletes_the_directory_and_unknown_sessions_are_not_found(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 2)
    assert lifecycle.clearing.remove("s").archived_messages == 4
    assert not sessions.store.directory("s").exists() and archive.count("s") == 0
    with pytest.raises(NotFound) as missing:
        lifecycle.clearing.remove("s")
    assert missing.value.reason == "SESSION_NOT_FOUND"
    with pytest.raises(NotFound):
        lifecycle.compaction.compact("ghost")


def test_idle_temporary_sessions_are_removed_from_every_store(world):
    sessions, archive, lifecycle, clock = world.parts, world.archive, world, world.clock
    for session_id in ("temp-idle", "temp-busy", "keep-idle"):
        talk(sessions.appender, session_id, 1)
    now = (sessions.store.directory("temp-busy") / "history.json").stat().st_mtime_ns
    an_hour_ago = now - 3600 * 10**9
    for session_id in ("temp-idle", "keep-idle"):
        os.utime(sessions.store.directory(session_id) / "history.json", ns=(an_hour_ago, an_hour_ago))
    clock[0] = now + 60 * 10**9
    assert lifecycle.cleanup.remove_idle() == ["temp-idle"]
    assert archive.count("temp-idle") == 0 and archive.count("keep-idle") == 2
    assert sessions.store.exists("keep-idle") and sessions.store.exists("temp-busy")
    assert not sessions.store.exists("temp-idle")


def test_reset_waits_while_another_writer_holds_the_session(world):
    import threading

    sessions, archive, _, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 1)
    summary_run = threading.Lock()
    clearing = Clearing(world.settings, sessions.store, sessions.rewriter, sessions.intents, archive, [archive],
                        exclusive=[lambda session_id, deadline: summary_run])
    summary_run.acquire()
    resetting = threading.Thread(target=clearing.reset, args=("s", True))
    resetting.start()
    resetting.join(0.3)
    assert resetting.is_alive() and len(sessions.store.window("s")) == 2
    summary_run.release()
    resetting.join()
    assert sessions.store.window("s") == []


def test_a_deletion_does_not_wait_for_a_summary_run(world):
    sessions, archive, _, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 2)
    summary_run = threading.Lock()
    clearing = Clearing(world.settings, sessions.store, sessions.rewriter, sessions.intents, archive, [archive],
                        exclusive=[lambda session_id, deadline: summary_run])
    with summary_run:  # held for as long as a summary run's LLM calls take
        assert [record.id for record in clearing.delete_messages("s", last=1).records] == [4]
    assert [record.id for record in sessions.store.window("s")] == [2, 3]


def test_an_interrupted_reset_is_completed_before_the_session_is_used_again(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 4)
    lifecycle.compaction.compact("s")
    next_id = sessions.store.reading("s").next_id
    # Killed half way: the intent recorded, the archive cleared, history.json still there.
    sessions.intents.begin(Intent("s", "reset", next_id))
    archive.cleared("s")
    reopened, journal = session_parts(world.settings, derived=[archive])
    with pytest.raises(Unavailable) as refused:
        reopened.appender.append("s", [NewMessage(role="user", content="too early")])
    assert refused.value.reason == "SESSION_BEING_CLEARED"
    resumed = Clearing(world.settings, reopened.store, reopened.rewriter, reopened.intents, archive, [archive])
    try:
        assert resumed.finish_interrupted() == 1
        assert reopened.store.window("s") == [] and archive.count("s") == 0
        assert not list(reopened.store.places.sessions_dir.glob(".intent-*"))
        assert reopened.appender.append("s", [NewMessage(role="user", content="after")]).records[0].id == next_id
    finally:
        journal.close()


def test_a_reset_refused_by_a_damaged_archive_changes_nothing(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 2)
    archive.damage.found("a test says so")
    with pytest.raises(FailedPrecondition) as refused:
        lifecycle.clearing.reset("s", keep_summary=False)
    assert refused.value.reason == "ARCHIVE_DAMAGED"
    assert len(sessions.store.window("s")) == 2 and sessions.intents.interrupted("s") is None
    assert not list(sessions.store.places.sessions_dir.glob(".intent-*"))


def test_a_reset_waiting_for_a_removal_finds_the_session_gone(world):
    sessions, _, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 1)
    outcome: list[BaseException | None] = []

    def reset() -> None:
        try:
            lifecycle.clearing.reset("s", keep_summary=True)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with sessions.store.writing("s") as session:  # a removal holds the session
        waiting = threading.Thread(target=reset)
        waiting.start()
        time.sleep(0.2)  # time for the Reset to see the session and wait for it
        sessions.rewriter.remove(session)
    waiting.join()
    assert isinstance(outcome[0], NotFound), outcome


def test_delete_messages_by_id_reaches_history_and_archive_even_after_compaction(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 4)  # ids 1-8
    lifecycle.compaction.compact("s")  # 1-6 archived only, 7 and 8 in history.json
    result = lifecycle.clearing.delete_messages("s", ids=[2, 7, 99, 7])
    assert [record.id for record in result.records] == [2, 7]
    assert [(r.role, r.content) for r in result.records] == [("assistant", "a0"), ("user", "q3 " + "x" * 20)]
    assert (result.deleted.history_messages, result.deleted.archived_messages) == (1, 2)
    assert [record.id for record in sessions.store.window("s")] == [8]
    assert [record.id for record in archive.messages("s", 0, 100)] == [1, 3, 4, 5, 6, 8]
    again = lifecycle.clearing.delete_messages("s", ids=[2, 7])
    assert again.records == [] and again.deleted.archived_messages == 0, "a repeat deletes nothing more"
    assert not list(sessions.store.places.sessions_dir.glob(".intent-*"))


def test_delete_the_newest_reaches_into_the_archive_and_ids_never_repeat(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 4)
    lifecycle.compaction.compact("s")
    result = lifecycle.clearing.delete_messages("s", last=3)
    assert [record.id for record in result.records] == [6, 7, 8]
    assert sessions.store.window("s") == []
    assert [record.id for record in archive.messages("s", 0, 100)] == [1, 2, 3, 4, 5]
    assert sessions.appender.append("s", [NewMessage(role="user", content="next")]).records[0].id == 9
    assert [record.id for record in lifecycle.clearing.delete_messages("s", last=1).records] == [9]
    assert sessions.appender.append("s", [NewMessage(role="user", content="again")]).records[0].id == 10


@pytest.mark.parametrize(("ids", "last", "reason"), [
    ([], 0, "DELETE_TARGET_REQUIRED"), ([1], 1, "DELETE_TARGET_AMBIGUOUS"), ([], 1001, "TOO_MANY_MESSAGES"),
    (list(range(1, 1002)), 0, "TOO_MANY_MESSAGES")])
def test_delete_messages_needs_ids_or_last(world, ids, last, reason):
    sessions, _, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 1)
    with pytest.raises(InvalidArgument) as refused:
        lifecycle.clearing.delete_messages("s", ids=ids, last=last)
    assert refused.value.reason == reason
    assert len(sessions.store.window("s")) == 2
    with pytest.raises(NotFound):
        lifecycle.clearing.delete_messages("ghost", last=1)


def test_an_interrupted_deletion_is_completed_before_the_session_is_used_again(world):
    sessions, archive = world.parts, world.archive
    talk(sessions.appender, "s", 3)
    next_id = sessions.store.reading("s").next_id
    # Killed half way: the intent recorded, the archive's part done, history.json untouched.
    sessions.intents.begin(Intent("s", "delete", next_id, ids=(5, 6)))
    archive.deleted("s", [5, 6])
    reopened, journal = session_parts(world.settings, derived=[archive])
    with pytest.raises(Unavailable) as refused:
        reopened.store.window("s")
    assert refused.value.reason == "SESSION_BEING_CLEARED"
    resumed = Clearing(world.settings, reopened.store, reopened.rewriter, reopened.intents, archive, [archive])
    try:
        assert resumed.finish_interrupted() == 1
        assert [record.id for record in reopened.store.window("s")] == [3, 4]
        assert [record.id for record in archive.messages("s", 0, 100)] == [1, 2, 3, 4]
        assert reopened.appender.append("s", [NewMessage(role="user", content="after")]).records[0].id == next_id
    finally:
        journal.close()
