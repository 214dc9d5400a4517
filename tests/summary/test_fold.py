"""Summarizer.fold (FitContext's ExtractOldHistories), against real sessions on disk
and a real chat-completions server on loopback."""

from __future__ import annotations

import pytest

from memsvc.core.errors import MemsvcError, NotFound
from memsvc.core.layout import CURSOR, SUMMARY_RUN
from memsvc.summary import rolling
from memsvc.summary.runs import read_run
from memsvc.summary.summarizer import Turn, read_cursor
from tests.support import World
from tests.support.llm_server import error, summary_reply


@pytest.fixture
def world(tmp_path, llm_server):
    return World(tmp_path, llm_server.base_url)


def turns(*pairs: tuple[str, str]) -> list[Turn]:
    return [Turn(role, text) for role, text in pairs]


def cursor_id(world: World, session_id: str) -> int:
    cursor = read_cursor(world.directory(session_id) / CURSOR)
    return cursor.last_id if cursor else 0


def test_stored_turns_fold_in_one_call_and_the_cursor_moves_past_them(world, llm_server):
    stored = world.say("s", ("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2"), ("user", "now"))
    llm_server.script("sum", summary_reply(["Do: be brief"]))
    folded = world.summarizer.fold("s", turns(("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")))
    assert folded.covered == [0, 1, 2, 3] and folded.count == 4
    assert folded.summary == world.stored("s") and folded.summary.key_decisions == ["Do: be brief"]
    assert cursor_id(world, "s") == stored[3].id  # not past "now": it waits for its reply
    (call,) = llm_server.calls("sum")
    assert [line.split("] ", 1)[1] for line in call.user.split("\n")] == [
        "user: q1", "assistant: a1", "user: q2", "assistant: a2"]


def test_stored_messages_between_the_cursor_and_the_run_are_folded_too_so_none_is_skipped(world, llm_server):
    stored = world.say("s", ("user", "old q"), ("assistant", "old a"), ("user", "q"), ("assistant", "a"))
    llm_server.script("sum", summary_reply())
    folded = world.summarizer.fold("s", turns(("user", "q"), ("assistant", "a")))
    assert folded.covered == [0, 1]
    assert "old q" in llm_server.calls("sum")[0].user.split("\n")[0]
    assert cursor_id(world, "s") == stored[-1].id


def test_turns_already_summarized_need_no_call(world, llm_server):
    world.say("s", ("user", "q1"), ("assistant", "a1"))
    llm_server.script("sum", summary_reply(["Do: x"]))
    world.summarizer.summarize("s")
    ran = read_run(world.directory("s") / SUMMARY_RUN)
    assert ran is not None and ran.trigger == "summarize"
    folded = world.summarizer.fold("s", turns(("user", "q1"), ("assistant", "a1")))
    assert (folded.covered, folded.count) == ([0, 1], 0)
    assert folded.summary.key_decisions == ["Do: x"] and len(llm_server.calls("sum")) == 1
    assert read_run(world.directory("s") / SUMMARY_RUN) == ran  # no call, no run: Summarize's record stands


def test_turns_the_session_never_stored_are_folded_without_moving_the_cursor(world, llm_server):
    stored = world.say("s", ("user", "q1"), ("assistant", "a1"))
    llm_server.script("sum", summary_reply())
    folded = world.summarizer.fold("s", turns(("user", "q1"), ("assistant", "a1"), ("tool", "[result ls] x"),
                                              ("assistant", "not stored")))
    assert folded.covered == [0, 1, 2, 3]
    assert cursor_id(world, "s") == stored[-1].id
    assert "tool: [result ls] x" in llm_server.calls("sum")[0].user


def test_a_text_said_twice_matches_its_latest_saying(world, llm_server):
    stored = world.say("s", ("user", "ok"), ("assistant", "a1"), ("user", "ok"), ("assistant", "a2"))
    llm_server.script("sum", summary_reply(["Do: y"]))
    world.summarizer.summarize("s")
    world.say("s", ("user", "ok"), ("assistant", "a3"))
    llm_server.script("sum", summary_reply())
    folded = world.summarizer.fold("s", turns(("user", "ok"), ("assistant", "a2"), ("user", "ok"), ("assistant", "a3")))
    assert folded.covered == [0, 1, 2, 3]
    assert [line.split("] ", 1)[1] for line in llm_server.calls("sum")[1].user.split("\n")] == [
        "user: ok", "assistant: a3"]
    assert cursor_id(world, "s") > stored[-1].id


def test_one_call_at_most_the_rest_stays_for_later(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, summary_chunk_chars=200)
    pairs = [(role, f"{role} {n} " + "z" * 60) for n in range(4) for role in ("user", "assistant")]
    stored = world.say("s", *pairs)
    llm_server.script("sum", summary_reply())
    folded = world.summarizer.fold("s", turns(*pairs))
    assert folded.count == len(folded.covered) < len(pairs)
    assert folded.covered == list(range(folded.count))
    assert len(llm_server.calls("sum")) == 1 and cursor_id(world, "s") == stored[folded.count - 1].id


def test_a_failed_call_changes_nothing_and_says_so(world, llm_server):
    world.say("s", ("user", "q1"), ("assistant", "a1"))
    llm_server.script("sum", error(500, "boom"))
    with pytest.raises(MemsvcError, match="the summary is unchanged") as caught:
        world.summarizer.fold("s", turns(("user", "q1"), ("assistant", "a1")))
    assert caught.value.reason == "LLM_UNAVAILABLE"
    assert world.stored("s") is None and not (world.directory("s") / CURSOR).exists()


def test_an_unknown_session_is_not_found(world):
    with pytest.raises(NotFound) as missing:
        world.summarizer.fold("nobody", turns(("user", "q")))
    assert missing.value.reason == "SESSION_NOT_FOUND"


def test_a_summary_older_than_cursors_covers_everything_stored(world, llm_server):
    world.say("s", ("user", "q1"), ("assistant", "a1"))
    rolling.save(world.directory("s") / "summary.json", rolling.from_dict(
        {"key_decisions": ["Do: z"], "past_discussions": []}))
    folded = world.summarizer.fold("s", turns(("user", "q1"), ("assistant", "a1")))
    assert (folded.covered, folded.count) == ([0, 1], 0) and llm_server.calls() == []
