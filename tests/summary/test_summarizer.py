"""Generate, against real sessions on disk and a real chat-completions server on loopback."""

from __future__ import annotations

import json
import threading

import pytest

from memsvc.core.errors import FailedPrecondition, MemsvcError, NotFound
from memsvc.core.layout import CURSOR, SUMMARY_RUN
from memsvc.core.records import Record
from memsvc.summary import rolling
from memsvc.summary.runs import read_run
from memsvc.summary.summarizer import chunks, read_cursor, transcript_line
from tests.support import SECOND, T0, World
from tests.support.llm_server import Reply, error, summary_reply


@pytest.fixture
def world(tmp_path, llm_server):
    return World(tmp_path, llm_server.base_url)


def pairs(count: int, size: int = 20) -> list[tuple[str, str]]:
    turns = []
    for n in range(count):
        turns += [("user", f"question {n} " + "q" * size), ("assistant", f"answer {n} " + "a" * size)]
    return turns


def test_first_run_folds_every_message_and_writes_summary_and_cursor(world, llm_server):
    records = world.say("s", ("user", "Use Python 3.11 please"), ("assistant", "OK, Python 3.11 it is"),
                        ("user", "And never deploy on Fridays"), ("assistant", "Noted"))
    llm_server.script("sum", summary_reply(["Do: use Python 3.11", "Don't: deploy on Fridays"], topic="setup"))
    result = world.summarizer.summarize("s")
    assert result.count == 4 and result.summary == world.stored("s")
    assert world.stored("s").key_decisions == ["Do: use Python 3.11", "Don't: deploy on Fridays"]
    (call,) = llm_server.calls("sum")
    lines = call.user.split("\n")
    assert [line.split("] ", 1)[1] for line in lines] == [
        "user: Use Python 3.11 please", "assistant: OK, Python 3.11 it is", "user: And never deploy on Fridays",
        "assistant: Noted"]
    assert '"key_decisions": []' in call.system and "<summary>" in call.system
    cursor_text = (world.directory("s") / CURSOR).read_text().splitlines()
    assert cursor_text == ["2025-03-01 14:02:10", f"id {records[-1].id}", f"send_at {records[-1].send_at}"]


def test_chunks_never_pass_the_limit_nor_end_on_a_user_message(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, summary_chunk_chars=1000)
    turns = pairs(6, size=150) + [("user", "u" * 300), ("user", "v" * 300), ("assistant", "w" * 100)]
    turns += [("user", "x" * 5000), ("assistant", "y" * 40)] + pairs(3, size=100)
    records = world.say("s", *turns)
    llm_server.script("sum", *[lambda request: summary_reply()] * 20)
    result = world.summarizer.summarize("s")
    assert result.count == len(records)
    sent = [call.user for call in llm_server.calls("sum")]
    assert len(sent) >= 4
    for text in sent:
        assert len(text) <= 1000
        assert text.split("\n")[-1].split("] ", 1)[1].startswith("assistant: ")
    expected = [transcript_line(record, 1000 // 2 - 1) for record in records]
    assert "\n".join(sent).split("\n") == expected  # every message once, in order
    assert "characters left out" in expected[-8]  # the 5,000-character message was shortened to fit


def test_default_chunks_are_at_most_32000_characters(world, llm_server):
    world.say("s", *pairs(20, size=3000))
    llm_server.script("sum", *[lambda request: summary_reply()] * 10)
    world.summarizer.summarize("s")
    sizes = [len(call.user) for call in llm_server.calls("sum")]
    assert len(sizes) == 4 and max(sizes) <= 32_000 and sum(sizes) > 96_000


def test_chunking_holds_back_only_what_it_must():
    records = [Record(id=n, role=role, content="c" * 10) for n, role in
               enumerate(["user", "user", "user", "assistant", "user", "assistant"], start=1)]
    lines = ["x" * 40] * 6
    # Three waiting user messages and their reply exceed 100 together: the one case a chunk outgrows the limit.
    assert chunks(records, lines, 100) == [[0, 1, 2, 3], [4, 5]]
    assert chunks(records, lines, 1000) == [[0, 1, 2, 3, 4, 5]]


def test_each_chunk_sees_the_summary_of_the_chunks_before(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, summary_chunk_chars=300)
    world.say("s", *pairs(3, size=100))
    llm_server.script("sum", summary_reply(["Do: first rule"]), summary_reply(["Do: first rule", "Do: second"]),
                      summary_reply(["Do: third"]))
    world.summarizer.summarize("s")
    systems = [call.system for call in llm_server.calls("sum")]
    assert len(systems) == 3
    assert "Do: first rule" not in systems[0] and "Do: first rule" in systems[1] and "Do: second" in systems[2]
    assert world.stored("s").key_decisions == ["Do: third"]


@pytest.mark.parametrize("failure", [error(500, "boom"), error(400, "bad model"), Reply("I cannot summarize that"),
                                     Reply(body=b"<html>proxy error</html>")])
def test_a_failed_chunk_stops_the_run_and_the_next_run_resumes(tmp_path, llm_server, failure):
    world = World(tmp_path, llm_server.base_url, summary_chunk_chars=300)
    records = world.say("s", *pairs(3, size=100))
    llm_server.script("sum", summary_reply(["Do: one"]), failure, summary_reply(["Do: never asked"]))
    with pytest.raises(MemsvcError) as caught:
        world.summarizer.summarize("s")
    assert caught.value.kind.name in ("UNAVAILABLE", "FAILED_PRECONDITION", "INTERNAL")
    assert "2 of 6 messages were summarized" in caught.value.message
    assert len(llm_server.calls("sum")) == 2  # the third chunk was never sent
    assert world.stored("s").key_decisions == ["Do: one"]
    assert read_cursor(world.directory("s") / CURSOR).last_id == records[1].id
    run = read_run(world.directory("s") / SUMMARY_RUN)
    assert run is not None and (run.outcome, run.messages, run.reason, run.message) == (
        "failed", 2, caught.value.reason, caught.value.message)  # what it saved before the failure

    llm_server.scripts["sum"].clear()
    llm_server.script("sum", summary_reply(["Do: one", "Do: two"]), summary_reply(["Do: all"]))
    restarted = World(tmp_path, llm_server.base_url, summary_chunk_chars=300)
    assert restarted.summarizer.summarize("s").count == 4
    resumed = llm_server.calls("sum")[2:]
    assert "question 1" in resumed[0].user and "question 0" not in resumed[0].user
    assert "Do: one" in resumed[0].system
    assert restarted.stored("s").key_decisions == ["Do: all"]


def test_a_failed_first_chunk_changes_nothing(world, llm_server):
    world.say("s", *pairs(1))
    history_before = (world.directory("s") / "history.json").read_bytes()
    llm_server.script("sum", "no summary here")
    with pytest.raises(MemsvcError) as caught:
        world.summarizer.summarize("s")
    assert caught.value.reason == "LLM_REPLY_UNPARSEABLE" and "unchanged" in caught.value.message
    assert not (world.directory("s") / "summary.json").exists()
    assert not (world.directory("s") / CURSOR).exists()
    assert (world.directory("s") / "history.json").read_bytes() == history_before


def test_cursor_is_exact_within_a_second_and_across_restarts(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url)
    world.say("s", ("user", "first"), ("assistant", "one"), step=10_000)  # same second
    llm_server.script("sum", summary_reply(), summary_reply())
    assert world.summarizer.summarize("s").count == 2
    world.say("s", ("user", "second"), ("assistant", "two"), at=T0 + 30_000, step=10_000)  # still the same second
    restarted = World(tmp_path, llm_server.base_url)
    assert restarted.summarizer.summarize("s").count == 2
    second = llm_server.calls("sum")[1].user
    assert "second" in second and "two" in second and "first" not in second
    assert restarted.summarizer.summarize("s").count == 0
    assert len(llm_server.calls("sum")) == 2


def test_a_summary_without_cursor_only_gets_the_cursor(world, llm_server):
    records = world.say("s", *pairs(2))
    rolling.save(world.directory("s") / "summary.json", rolling.Summary(key_decisions=["Do: keep"]))
    result = world.summarizer.summarize("s")
    assert result.count == 0 and llm_server.calls() == []
    assert read_cursor(world.directory("s") / CURSOR).last_id == records[-1].id
    assert world.stored("s").key_decisions == ["Do: keep"]


def test_a_reference_cursor_holding_only_a_time_is_read_by_the_second(world, llm_server):
    world.say("s", ("user", "old q"), ("assistant", "old a"), at=T0, step=SECOND // 10)  # both in T0's second
    world.say("s", ("user", "new q"), ("assistant", "new a"), at=T0 + SECOND)
    (world.directory("s") / CURSOR).write_text("2025-03-01 14:02:07\n")
    llm_server.script("sum", summary_reply())
    assert world.summarizer.summarize("s").count == 2
    sent = llm_server.calls("sum")[0].user
    assert "new q" in sent and "old" not in sent
    assert read_cursor(world.directory("s") / CURSOR).last_id == 4


def test_a_question_waiting_for_its_answer_waits_too(world, llm_server):
    world.say("s", ("user", "q1"), ("assistant", "a1"), ("user", "q2 still open"))
    llm_server.script("sum", summary_reply(), summary_reply())
    assert world.summarizer.summarize("s").count == 2
    assert "q2" not in llm_server.calls("sum")[0].user
    assert world.summarizer.summarize("s").count == 0 and len(llm_server.calls("sum")) == 1
    asked = read_run(world.directory("s") / SUMMARY_RUN)
    assert asked is not None and (asked.trigger, asked.outcome) == ("summarize", "nothing_new")
    (world.directory("s") / "history.json").touch()  # newer than summary.json: the job's tick looks at it again
    world.summarizer.run_job()
    assert read_run(world.directory("s") / SUMMARY_RUN) == asked, "an idle tick of the job is no run"
    world.say("s", ("assistant", "a2"), at=T0 + 10 * SECOND)
    assert world.summarizer.summarize("s").count == 2
    assert "q2 still open" in llm_server.calls("sum")[1].user


def noise_verdict(noise: list[tuple[int, float]], key_decisions=(), past_discussions=()) -> str:
    return "```json\n" + json.dumps({"noise": [{"exchange": e, "confidence": c} for e, c in noise],
                                     "superseded_key_decisions": list(key_decisions),
                                     "superseded_past_discussions": list(past_discussions)}) + "\n```"


def previous_summary(world: World, session_id: str) -> None:
    rolling.save(world.directory(session_id) / "summary.json", rolling.from_dict({
        "key_decisions": ["Do: answer in English", "Do: use tabs", "要：寫測試"],
        "past_discussions": [{"topic": "old editor", "description": "vim", "direction": "", "last_discussed": ""},
                             {"topic": "ci", "description": "runs", "direction": "", "last_discussed": ""}]}))
    (world.directory(session_id) / CURSOR).write_text(f"2025-03-01 14:02:06\nid 0\nsend_at {T0 - SECOND}\n")


def test_noise_at_or_above_0_7_is_dropped_and_superseded_entries_removed(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, decision_model="judge")
    world.say("s", ("user", "hello!"), ("assistant", "hi"), ("user", "switch to spaces, not tabs"),
              ("assistant", "done"), ("user", "thanks"), ("assistant", "welcome"), ("user", "maybe noise"),
              ("assistant", "maybe"))
    previous_summary(world, "s")
    llm_server.script("judge", noise_verdict([(1, 0.95), (3, 0.7), (4, 0.69)], key_decisions=[2],
                                             past_discussions=["P1"]))
    llm_server.script("sum", summary_reply(["Do: use spaces"]))
    assert world.summarizer.summarize("s").count == 8
    judged = llm_server.calls("judge")[0]
    assert "E1:" in judged.user and "E4:" in judged.user and "K2. Do: use tabs" in judged.system
    sent = llm_server.calls("sum")[0]
    assert "hello" not in sent.user and "thanks" not in sent.user
    assert "switch to spaces" in sent.user and "maybe noise" in sent.user
    assert "Do: use tabs" not in sent.system and "old editor" not in sent.system
    assert "Do: answer in English" in sent.system and "Do: 寫測試" in sent.system  # marker rewritten at the merge
    assert '"ci"' in sent.system


def test_when_everything_is_noise_the_pruned_summary_is_saved_without_a_summary_call(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, decision_model="judge")
    records = world.say("s", ("user", "hi"), ("assistant", "hello"), ("user", "thx"), ("assistant", "np"))
    previous_summary(world, "s")
    llm_server.script("judge", noise_verdict([(1, 0.9), (2, 0.99)], key_decisions=[1]))
    result = world.summarizer.summarize("s")
    assert result.count == 4 and llm_server.calls("sum") == []
    assert world.stored("s").key_decisions == ["Do: use tabs", "Do: 寫測試"]
    assert read_cursor(world.directory("s") / CURSOR).last_id == records[-1].id


@pytest.mark.parametrize("verdict", [error(400, "no such model"), Reply("I think E1 is noise"), error(503)])
def test_a_failed_noise_check_keeps_everything(tmp_path, llm_server, verdict):
    world = World(tmp_path, llm_server.base_url, decision_model="judge")
    world.say("s", ("user", "hello!"), ("assistant", "hi"), ("user", "real work"), ("assistant", "done"))
    previous_summary(world, "s")
    llm_server.script("judge", verdict)
    llm_server.script("sum", summary_reply())
    assert world.summarizer.summarize("s").count == 4
    sent = llm_server.calls("sum")[0]
    assert "hello!" in sent.user and "real work" in sent.user
    assert "Do: use tabs" in sent.system and "old editor" in sent.system


@pytest.mark.parametrize("reply_lang, expected", [("auto", "Traditional Chinese (繁體中文), never Simplified"),
                                                  ("ja", "Japanese"), ("Klingon", "Klingon")])
def test_reply_lang_reaches_the_prompt(tmp_path, llm_server, reply_lang, expected):
    world = World(tmp_path, llm_server.base_url, reply_lang=reply_lang)
    world.say("s", *pairs(1))
    llm_server.script("sum", summary_reply())
    world.summarizer.summarize("s")
    assert expected in llm_server.calls("sum")[0].system


def test_the_result_follows_the_rules_whatever_the_model_says(world, llm_server):
    world.say("s", *pairs(1))
    llm_server.script("sum", summary_reply(["不要：用簡體", "Do: a", *[f"Do: r{n}" for n in range(10)]]))
    stored = world.summarizer.summarize("s").summary
    assert stored.key_decisions[:2] == ["Don't: 用簡體", "Do: a"] and len(stored.key_decisions) == 8


def test_no_summary_model_and_unknown_sessions_are_refused(tmp_path, llm_server):
    world = World(tmp_path, llm_server.base_url, summary_model="")
    world.say("s", *pairs(1))
    with pytest.raises(FailedPrecondition) as caught:
        world.summarizer.summarize("s")
    assert caught.value.reason == "SUMMARY_MODEL_NOT_CONFIGURED" and "summary_model" in caught.value.message
    with pytest.raises(NotFound) as missing:
        World(tmp_path, llm_server.base_url).summarizer.summarize("nobody")
    assert missing.value.reason == "SESSION_NOT_FOUND"


def test_an_unreadable_summary_is_never_overwritten(world, llm_server):
    world.say("s", *pairs(1))
    (world.directory("s") / "summary.json").write_text("{not json")
    with pytest.raises(FailedPrecondition) as caught:
        world.summarizer.summarize("s")
    assert caught.value.reason == "SUMMARY_UNREADABLE"
    assert (world.directory("s") / "summary.json").read_text() == "{not json" and llm_server.calls() == []


def test_two_runs_on_one_session_never_overlap(world, llm_server):
    world.say("s", *pairs(1))
    llm_server.script("sum", Reply(summary_reply(), delay=0.3), summary_reply())
    results = []
    threads = [threading.Thread(target=lambda: results.append(world.summarizer.summarize("s"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(result.count for result in results) == [0, 2]
    assert llm_server.max_in_flight == 1 and len(llm_server.calls("sum")) == 1


def test_an_unreadable_cursor_stops_summarizing_and_is_left_in_place(world, llm_server):
    world.say("s", ("user", "hi"), ("assistant", "hello"))
    cursor = world.directory("s") / CURSOR
    cursor.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(FailedPrecondition) as caught:
        world.summarizer.summarize("s")
    assert caught.value.reason == "SUMMARY_CURSOR_UNREADABLE" and str(cursor) in caught.value.message
    assert cursor.read_bytes() == b"\xff\xfe not utf-8" and not llm_server.calls()
